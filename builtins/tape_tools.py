"""Tools over the session tape: `tape.info`, `tape.search`, `tape.handoff` (`tape_tools()`),
and `spill.read` (`spill_tools()`) for outputs moved to the spill sidecar.

Each is a context-aware kernel Tool: the handler reads the session Tape from
`context.tape`. Bad arguments (wrong types, empty text, out-of-range limits, unknown
argument names) raise HooklineError `invalid_input` with a message saying what to send.
"""

from __future__ import annotations

import json
from typing import Any, Final

from hookline.kernel.streaming import ErrorKind, HooklineError
from hookline.kernel.tape import TapeEntry
from hookline.kernel.tools import Tool, ToolContext

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


def _no_extra(tool: str, extra: dict[str, Any], allowed: str) -> None:
    if extra:
        names = ", ".join(sorted(extra))
        raise HooklineError(
            ErrorKind.invalid_input,
            f"{tool}: unknown argument(s) {names}; expected {allowed}.",
        )


def _text_arg(tool: str, key: str, value: Any, *, required: bool) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        expected = "a non-empty string" if required else "a string"
        raise HooklineError(
            ErrorKind.invalid_input, f"{tool}: '{key}' must be {expected}, got {value!r}."
        )
    return value


async def _info(*, context: ToolContext, **extra: Any) -> dict[str, Any]:
    _no_extra("tape.info", extra, "no arguments")
    info = await _tape_of(context).info()
    return info.as_dict()


def _entry_summary(entry: TapeEntry) -> dict[str, Any]:
    text = json.dumps(entry.payload, ensure_ascii=False)
    if len(text) > _SNIPPET_CHARS:
        text = text[:_SNIPPET_CHARS] + "..."
    return {"id": entry.id, "kind": entry.kind, "date": entry.date, "payload": text}


async def _search(
    query: Any = None, limit: Any = 20, *, context: ToolContext, **extra: Any
) -> list[dict[str, Any]]:
    _no_extra("tape.search", extra, "'query' and optional 'limit'")
    text = _text_arg("tape.search", "query", query, required=True)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= SEARCH_LIMIT_MAX:
        raise HooklineError(
            ErrorKind.invalid_input,
            f"tape.search: 'limit' must be an integer from 1 to {SEARCH_LIMIT_MAX}, got {limit!r}.",
        )
    found = await _tape_of(context).search(text, limit=limit)
    return [_entry_summary(entry) for entry in found]


def _render_search(result: list[dict[str, Any]]) -> str:
    if not result:
        return "No matching tape entries."
    return "\n".join(
        f"#{item['id']} [{item['kind']}] {item['date']}: {item['payload']}" for item in result
    )


async def _handoff(
    name: Any = None, summary: Any = None, *, context: ToolContext, **extra: Any
) -> str:
    _no_extra("tape.handoff", extra, "'name' and optional 'summary'")
    anchor_name = _text_arg("tape.handoff", "name", name, required=True).strip()
    summary_text = _text_arg("tape.handoff", "summary", summary, required=False)
    state = {"summary": summary_text} if summary_text else {}
    meta = {"run_id": context.run_id} if context.run_id else {}
    anchor = await _tape_of(context).handoff(anchor_name, state=state, **meta)
    return f"Handoff recorded: anchor '{anchor_name}' (entry {anchor.id}); context restarts here."


def _int_arg(tool: str, key: str, value: Any, low: int, high: int | None = None) -> int:
    if (isinstance(value, bool) or not isinstance(value, int) or value < low
            or (high is not None and value > high)):
        bound = f"from {low} to {high}" if high is not None else f">= {low}"
        raise HooklineError(
            ErrorKind.invalid_input, f"{tool}: '{key}' must be an integer {bound}, got {value!r}."
        )
    return value


async def _spill_read(
    id: Any = None, offset: Any = 0, limit: Any = 4_000, *, context: ToolContext, **extra: Any
) -> str:
    _no_extra("spill.read", extra, "'id' and optional 'offset' and 'limit'")
    spill_id = _text_arg("spill.read", "id", id, required=True).strip()
    start = _int_arg("spill.read", "offset", offset, 0)
    size = _int_arg("spill.read", "limit", limit, 1, SPILL_READ_MAX)
    try:
        data = await find_spill(_tape_of(context), spill_id)
    except KeyError:
        data = None
    if data is None:
        raise HooklineError(ErrorKind.not_found, f"spill.read: no spilled output '{spill_id}'.")
    text = str(data.get("text", ""))
    piece = text[start:start + size]
    end = start + len(piece)
    more = f"; continue with offset={end}" if end < len(text) else ""
    return f"[characters {start}-{end} of {len(text)}{more}]\n{piece}"


def tape_tools() -> list[Tool]:
    """The tape tools, in the order they are offered."""
    return [
        Tool(
            name="tape.info",
            handler=_info,
            description=(
                "Summarise the session tape: entry and anchor counts, the last anchor, "
                "entries since it, and the last token usage."
            ),
            parameters={"type": "object", "properties": {}, "additionalProperties": False},
            context=True,
        ),
        Tool(
            name="tape.search",
            handler=_search,
            description=(
                "Search the whole session tape (also before the last handoff) for entries "
                "containing a text, case-insensitively; returns the most recent matches."
            ),
            parameters={
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
            context=True,
            renderer=_render_search,
        ),
        Tool(
            name="tape.handoff",
            handler=_handoff,
            description=(
                "Start a new phase: add an anchor so the model context restarts after it, "
                "carrying only the summary forward."
            ),
            parameters={
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
            context=True,
        ),
    ]


def spill_tools() -> list[Tool]:
    """`spill.read`: pages through a tool output moved to the spill sidecar."""
    return [
        Tool(
            name="spill.read",
            handler=_spill_read,
            description=(
                "Read a tool output that was too long for the context and was cut: give the "
                "spill id from the cut note, and an offset and limit in characters."
            ),
            parameters={
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
            context=True,
        ),
    ]
