"""The embedded offline model: the default when no model is configured.

It needs no key and no network and is deterministic: the same conversation always gets
the same reply (only tool call ids are new every time, so they never repeat in a
session). Every reply starts with `[offline model]`, so nobody mistakes it for a real
model, and unless `offline` was configured on purpose the first reply of a process logs
one warning saying how to configure a real model (`notice()`: shown once, never part of a
reply, so never on a tape). It does not understand
language; it echoes and summarises the last user message.

Tool use can still be tried end to end: a user message of the form

    /tool NAME {"json": "arguments"}

is answered with a call of tool NAME with those arguments (`{}` when omitted). After the
tool result comes back, the next reply summarises the tool output.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from hookline.kernel.messages import ModelMessage, ToolCallSpec, as_model_messages, content_text
from hookline.kernel.prompt import is_media

from ..config import setting_env
from .base import Finished, ModelEvent, TextDelta, ToolCallEvent, ToolSchema, Usage, usage_dict

__all__ = ["OfflineModel"]

logger = logging.getLogger(__name__)

OFFLINE_LABEL = "[offline model]"
def notice() -> str:
    """Said once per process, as a warning, by the first offline reply: how to configure
    a real model, with this process's config file."""
    from ..config import default_home
    from ..config.table import CONFIG_NAME

    return (
        "no model is configured, so hookline's built-in offline model answers: it works "
        "without network access and does not understand language. To use a real model, "
        f"set {setting_env('model')} to a provider:model spec (for example "
        f"{setting_env('model')}=openai:gpt-4o-mini together with {setting_env('api_key')}), "
        f'or put model = "provider:model" in the config file, '
        f"{default_home() / CONFIG_NAME} (or run hookline onboard)."
    )

_noticed = threading.Event()

_TOOL_COMMAND = re.compile(r"^/tool(?:\s+(?P<name>\S+))?\s*(?P<args>.*)$", re.DOTALL)
_ECHO_LIMIT = 200
_TOOL_OUTPUT_LIMIT = 500
_CHUNKS = 4


class OfflineModel:
    """Deterministic, network-free stand-in for a language model (see the module doc)."""

    def __init__(self, name: str = "offline", *, notice: bool = True) -> None:
        self.name = name
        self.notice = notice
        """Log `notice()` with the process's first offline reply (off when chosen on purpose)."""

    def __repr__(self) -> str:
        return f"OfflineModel(name={self.name!r})"

    async def stream(
        self,
        messages: Sequence[Any],
        tools: Sequence[ToolSchema] = (),
        *,
        max_tokens: int | None = None,
        **options: Any,
    ) -> AsyncIterator[ModelEvent]:
        from anyio.lowlevel import checkpoint

        conversation = as_model_messages(messages)
        text, calls = self.reply(conversation, tools)
        if self.notice and not _noticed.is_set():
            _noticed.set()
            logger.warning("%s", notice())
        pieces = _word_pieces(text)
        if max_tokens is not None and len(pieces) > max_tokens:
            pieces = pieces[: max(max_tokens, 1)]
            text = "".join(pieces)
        for chunk in _group(pieces, _CHUNKS):
            await checkpoint()
            yield TextDelta(chunk)
        for call in calls:
            await checkpoint()
            yield ToolCallEvent(call)
        usage = usage_dict(
            input_tokens=sum(_count_words(message) for message in conversation),
            output_tokens=len(text.split()) + len(calls),
        )
        yield Usage(dict(usage))
        yield Finished(text, list(calls), dict(usage))

    def reply(
        self, conversation: Sequence[ModelMessage], tools: Sequence[ToolSchema] = ()
    ) -> tuple[str, list[ToolCallSpec]]:
        """The whole answer to `conversation`: reply text and tool calls."""
        results = _trailing_tool_results(conversation)
        if results:
            return _summarise_results(results), []
        user = next((m for m in reversed(conversation) if m.role == "user"), None)
        if user is None:
            return f"{OFFLINE_LABEL} There is no user message to answer.", []
        match = _TOOL_COMMAND.match(user.text.strip())
        if match is not None:
            return _tool_command(match, tools, call_id=f"offline-call-{uuid.uuid4().hex[:16]}")
        return _echo(user, tools), []


def _trailing_tool_results(conversation: Sequence[ModelMessage]) -> list[ModelMessage]:
    results: list[ModelMessage] = []
    for message in reversed(conversation):
        if message.role != "tool":
            break
        results.append(message)
    results.reverse()
    return results


def _summarise_results(results: Sequence[ModelMessage]) -> str:
    lines = [OFFLINE_LABEL]
    for result in results:
        name = result.name or "tool"
        verb = "failed" if result.is_error else "returned"
        output = result.text
        excerpt = output[:_TOOL_OUTPUT_LIMIT]
        if len(output) > _TOOL_OUTPUT_LIMIT:
            excerpt += f"... ({len(output) - _TOOL_OUTPUT_LIMIT} more characters)"
        size = f"{len(output)} characters, {len(output.splitlines())} lines"
        lines.append(f"Tool `{name}` {verb} ({size}):\n{_fenced(excerpt)}")
    return "\n\n".join(lines)


def _fenced(text: str) -> str:
    """`text` as a Markdown code block, so a terminal that renders the reply shows tool
    output as it is (the fence outruns any backtick run inside)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text.rstrip(chr(10))}\n{fence}"


def _tool_names(tools: Sequence[ToolSchema]) -> str:
    return ", ".join(tool.name for tool in tools) if tools else "none"


def _tool_command(
    match: re.Match[str], tools: Sequence[ToolSchema], *, call_id: str
) -> tuple[str, list[ToolCallSpec]]:
    usage = f'Usage: /tool NAME {{"argument": "value"}}. Available tools: {_tool_names(tools)}'
    name = match.group("name")
    if not name:
        return f"{OFFLINE_LABEL} {usage}.", []
    raw = match.group("args").strip() or "{}"
    try:
        arguments = json.loads(raw)
    except ValueError as exc:
        return f"{OFFLINE_LABEL} Could not read the tool arguments as JSON ({exc}). {usage}.", []
    if not isinstance(arguments, dict):
        return f"{OFFLINE_LABEL} Tool arguments must be a JSON object. {usage}.", []
    if name not in {tool.name for tool in tools}:
        return (
            f"{OFFLINE_LABEL} No tool named `{name}` is available. "
            f"Available tools: {_tool_names(tools)}.",
            [],
        )
    call = ToolCallSpec(call_id, name, json.dumps(arguments, ensure_ascii=False, sort_keys=True))
    return f"{OFFLINE_LABEL} Calling tool `{name}`.", [call]


def _echo(user: ModelMessage, tools: Sequence[ToolSchema]) -> str:
    text = user.text.strip()
    parts = [OFFLINE_LABEL]
    if text:
        flat = " ".join(text.split())
        excerpt = flat if len(flat) <= _ECHO_LIMIT else flat[:_ECHO_LIMIT] + "..."
        words, lines = len(text.split()), len(text.splitlines())
        parts.append(f'You said: "{excerpt}" ({words} words, {lines} lines).')
    else:
        parts.append("Your message has no text.")
    media = [] if isinstance(user.content, str) else [i for i in user.content if is_media(i)]
    if media:
        listed = ", ".join(f"{item.kind} ({item.media_type})" for item in media)
        parts.append(f"It also carries {listed}.")
    first = " ".join(parts)
    return (
        f"{first}\n\n"
        f"To try tool use, send /tool NAME {{json arguments}} "
        f"(available tools: {_tool_names(tools)})."
    )


def _count_words(message: ModelMessage) -> int:
    count = len(content_text(message.content).split())
    return count + sum(len(call.arguments.split()) + 1 for call in message.tool_calls)


def _word_pieces(text: str) -> list[str]:
    """Words with their following whitespace; joining them gives `text` back."""
    return [piece for piece in re.split(r"(?<=\s)(?=\S)", text) if piece]


def _group(pieces: list[str], count: int) -> list[str]:
    if not pieces:
        return []
    size = -(-len(pieces) // count)
    return ["".join(pieces[i : i + size]) for i in range(0, len(pieces), size)]
