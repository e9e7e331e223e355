"""An MCP server's tools as hookline `Tool`s: named `server__tool`, arguments checked by
the kernel's validator, results made into model text (and images into a message).

A tool whose name a model API would refuse, or whose schema the kernel's validator cannot
enforce in full, is not offered: one warning names the server, the tool and why.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tools import Tool, ToolContext, check_schema, validate_arguments

from ..config.limits import MAX_REQUEST_TOOLS
from .config import NAME_SEPARATOR, ServerConfig

if TYPE_CHECKING:
    from mcp_types import CallToolResult

    from .cache import ListedTool

__all__ = ["MAX_IMAGE_BYTES", "Caller", "make_tools", "result_parts"]

logger = logging.getLogger(__name__)

MAX_IMAGE_BYTES = 8 * 1024 * 1024
"""An image result larger than this (decoded) is named in the text, not sent."""

_MODEL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ANNOTATIONS = ("$schema", "$id", "$comment")
"""Top-level schema keys that describe the schema and constrain nothing."""

MAX_SERVER_TOOLS = MAX_REQUEST_TOOLS
"""Tools of one server offered at most (as many as a request may offer): past it the rest
are not, with one warning (`tools.allow` chooses which)."""
MAX_DESCRIPTION = 4_000
"""Characters of a tool's description offered: every request carries each one."""

Caller = Callable[[str, dict[str, Any]], Awaitable["CallToolResult"]]
Steer = Callable[[dict[str, Any], dict[str, Any]], Awaitable[bool]]


def make_tools(config: ServerConfig, listed: list[ListedTool], call: Caller,
               steer: Steer, warned: set[str]) -> list[Tool]:
    """The offered tools of one server (its `tools` allow and deny lists applied); each
    skipped tool is warned about once per name in `warned`."""
    tools: list[Tool] = []
    for item in listed:
        if not config.offers(item.name):
            continue
        if len(tools) == MAX_SERVER_TOOLS:
            if config.name not in warned:
                warned.add(config.name)
                logger.warning("MCP server %r offers more than %d tools: the rest are not "
                               "offered (choose them with tools.allow)", config.name,
                               MAX_SERVER_TOOLS)
            break
        name = f"{config.name}{NAME_SEPARATOR}{item.name}"
        try:
            schema = checked_schema(name, item.input_schema)
        except ValueError as exc:
            if name not in warned:
                warned.add(name)
                logger.warning("MCP server %r: tool %r is not offered: %s", config.name,
                               item.name, exc)
            continue
        tools.append(Tool(name=name, handler=_Handler(name, item.name, schema, call, steer),
                          description=_bounded(item.description),
                          parameters=schema, context=True))
    return tools


def _bounded(description: str) -> str:
    if len(description) <= MAX_DESCRIPTION:
        return description
    return (f"{description[:MAX_DESCRIPTION]}... [{len(description) - MAX_DESCRIPTION:,} more "
            f"characters left out]")


def checked_schema(name: str, schema: Any) -> dict[str, Any]:
    """`schema` as offered (annotations dropped), or ValueError saying what the kernel's
    validator cannot enforce in it (read in full, at every depth, before any call)."""
    if not _MODEL_NAME.match(name):
        raise ValueError(f"its name {name!r} is not 1-64 letters, digits, '_' or '-' "
                         f"(what model APIs accept)")
    if not isinstance(schema, Mapping):
        raise ValueError("its input schema is not a JSON object")
    offered = {key: value for key, value in schema.items() if key not in _ANNOTATIONS}
    offered.setdefault("type", "object")
    try:
        check_schema(name, offered)
    except (TypeError, AttributeError, KeyError) as exc:
        raise ValueError(f"its input schema is malformed ({type(exc).__name__}: {exc})"
                         ) from None
    return offered


@dataclass(frozen=True)
class _Handler:
    """Checks the arguments, calls the server, and turns its result into model text."""

    name: str
    tool: str
    schema: Mapping[str, Any]
    call: Caller
    steer: Steer

    async def __call__(self, *, context: ToolContext | None = None, **arguments: Any) -> str:
        checked = validate_arguments(self.name, self.schema, arguments)
        result = await self.call(self.tool, checked)
        text, media = result_parts(self.name, result)
        if result.is_error:
            raise HooklineError(ErrorKind.tool, f"{self.name}: {text or 'the tool failed'}")
        if media:
            state = context.state if context is not None else {}
            message = {"content": f"[{len(media)} image(s) returned by {self.name}]",
                       "media": media, "session_id": state.get("session_id", "")}
            if await self.steer(message, state):
                text += f"\n[{len(media)} image(s): they follow in the next message]"
            else:
                text += f"\n[{len(media)} image(s) not shown: this run has no steering inbox]"
        return text.strip("\n")


def result_parts(name: str, result: CallToolResult) -> tuple[str, list[dict[str, Any]]]:
    """The model text of a tool result, and its images as envelope media items."""
    texts: list[str] = []
    media: list[dict[str, Any]] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)  # type: ignore[union-attr]
        elif kind == "image":
            data, mime = block.data, block.mime_type  # type: ignore[union-attr]
            size = _decoded_size(data)
            if size is None or size > MAX_IMAGE_BYTES:
                why = "not valid base64" if size is None else f"{size:,} bytes, over the limit"
                texts.append(f"[an image ({mime}) not shown: {why}]")
            else:
                media.append({"type": "image", "mime_type": mime,
                              "url": f"data:{mime};base64,{data}"})
        elif kind == "resource":
            resource = block.resource  # type: ignore[union-attr]
            text = getattr(resource, "text", None)
            texts.append(text if isinstance(text, str)
                         else f"[a binary resource {resource.uri} not shown]")
        elif kind == "resource_link":
            texts.append(f"[resource {block.uri}]")  # type: ignore[union-attr]
        else:
            texts.append(f"[a {kind or 'content'} part not shown]")
    if not texts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(texts), media


def _decoded_size(data: str) -> int | None:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None
