"""Tools over the session tape: `tape.info`, `tape.search`, `tape.handoff` (`tape_tools()`),
and `spill.read` (`spill_tools()`) for outputs moved to the spill sidecar.

Each is a context-aware kernel Tool: the handler reads the session Tape from
`context.tape`. Arguments are checked against the tool's JSON schema
(`hookline.kernel.tools.validate_arguments`: types, required and unknown names, lengths,
ranges) before anything runs, and text that is only whitespace is refused; a bad argument
is HooklineError `invalid_input` naming the tool, the argument and what to send.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import TapeEntry
from hookline.kernel.tools import Tool, ToolContext, argument_error, validate_arguments

from .spill import find_spill

__all__ = ["SEARCH_LIMIT_MAX", "SPILL_READ_MAX", "spill_tools", "tape_tools"]

SEARCH_LIMIT_MAX: Final = 100
SPILL_READ_MAX: Final = 10_000
_SNIPPET_CHARS: Final = 300


def _tape_of(context: ToolContext | None) -> Any:
    tape = getattr(context, "tape", None)
    if tape is None:
        raise HooklineError(
            ErrorKind.config, "Tape tools need a session tape in the tool context (none is set)."
        )
    return tape


def _not_blank(tool: str, argument: str, value: str) -> str:
    """A rule the schema cannot say: text that is only whitespace is refused."""
    if not value.strip():
        raise argument_error(
            tool, f"{argument!r} must not be blank, got {json.dumps(value)}", argument=argument
        )
    return value


@dataclass(frozen=True)
class _Handler:
    """A tape tool's handler: checks the arguments against the tool's schema, then runs
    the body with the context and the checked arguments (defaults filled in)."""

    name: str
    schema: Mapping[str, Any]
    body: Callable[..., Awaitable[Any]]

    async def __call__(self, *, context: ToolContext, **arguments: Any) -> Any:
        checked = validate_arguments(self.name, self.schema, arguments)
        return await self.body(context, **checked)


async def _info(context: ToolContext) -> dict[str, Any]:
    info = await _tape_of(context).info()
    return info.as_dict()


def _entry_summary(entry: TapeEntry) -> dict[str, Any]:
    text = json.dumps(entry.payload, ensure_ascii=False)
    if len(text) > _SNIPPET_CHARS:
        text = text[:_SNIPPET_CHARS] + "..."
    return {"id": entry.id, "kind": entry.kind, "date": entry.date, "payload": text}


async def _search(context: ToolContext, *, query: str, limit: int) -> list[dict[str, Any]]:
    text = _not_blank("tape.search", "query", query)
    found = await _tape_of(context).search(text, limit=limit)
    return [_entry_summary(entry) for entry in found]


def _render_search(result: list[dict[str, Any]]) -> str:
    if not result:
        return "No matching tape entries."
    return "\n".join(
        f"#{item['id']} [{item['kind']}] {item['date']}: {item['payload']}" for item in result
    )


async def _handoff(context: ToolContext, *, name: str, summary: str = "") -> str:
    anchor_name = _not_blank("tape.handoff", "name", name).strip()
    state = {"summary": summary} if summary else {}
    meta = {"run_id": context.run_id} if context.run_id else {}
    anchor = await _tape_of(context).handoff(anchor_name, state=state, **meta)
    return f"Handoff recorded: anchor '{anchor_name}' (entry {anchor.id}); context restarts here."


async def _spill_read(context: ToolContext, *, id: str, offset: int, limit: int) -> str:
    spill_id = _not_blank("spill.read", "id", id).strip()
    try:
        data = await find_spill(_tape_of(context), spill_id)
    except KeyError:
        data = None
    if data is None:
        raise HooklineError(ErrorKind.not_found, f"spill.read: no spilled output '{spill_id}'.")
    text = str(data.get("text", ""))
    piece = text[offset:offset + limit]
    end = offset + len(piece)
    more = f"; continue with offset={end}" if end < len(text) else ""
    return f"[characters {offset}-{end} of {len(text)}{more}]\n{piece}"


def _tool(
    name: str, description: str, schema: dict[str, Any], body: Callable[..., Awaitable[Any]],
    renderer: Callable[[Any], str] | None = None,
) -> Tool:
    return Tool(name=name, handler=_Handler(name, schema, body), description=description,
                parameters=schema, context=True, renderer=renderer)


def tape_tools() -> list[Tool]:
    """The tape tools, in the order they are offered."""
    return [
        _tool(
            "tape.info",
            "Summarise the session tape: entry and anchor counts, the last anchor, "
            "entries since it, and the last token usage.",
            {"type": "object", "properties": {}, "additionalProperties": False},
            _info,
        ),
        _tool(
            "tape.search",
            "Search the whole session tape (also before the last handoff) for entries "
            "containing a text, case-insensitively; returns the most recent matches.",
            {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "description": "Text to find."},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": SEARCH_LIMIT_MAX,
                        "default": 20,
                        "description": "How many matches at most.",
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
            _search,
            renderer=_render_search,
        ),
        _tool(
            "tape.handoff",
            "Start a new phase: add an anchor so the model context restarts after it, "
            "carrying only the summary forward.",
            {
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Anchor name, e.g. 'phase/implement'.",
                    },
                    "summary": {
                        "type": "string",
                        "description": "What the next phase needs to know.",
                    },
                },
                "required": ["name"],
                "additionalProperties": False,
            },
            _handoff,
        ),
    ]


def spill_tools() -> list[Tool]:
    """`spill.read`: pages through a tool output moved to the spill sidecar."""
    return [
        _tool(
            "spill.read",
            "Read a tool output that was too long for the context and was cut: give the "
            "spill id from the cut note, and an offset and limit in characters.",
            {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "minLength": 1, "description": "The spill id."},
                    "offset": {
                        "type": "integer",
                        "minimum": 0,
                        "default": 0,
                        "description": "First character to return.",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": SPILL_READ_MAX,
                        "default": 4_000,
                        "description": "How many characters at most.",
                    },
                },
                "required": ["id"],
                "additionalProperties": False,
            },
            _spill_read,
        ),
    ]
