"""What the agent's tool calls and tool_result records say about how a call really ran, as
lines for the terminal (`hookline run`, `hookline chat`). Standard library only: the
command line imports it at start-up."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["call_line", "is_terminal", "result_lines", "retry_status", "terminal_text",
           "tool_notes", "turn_note"]


def tool_notes(records: list[dict[str, Any]]) -> list[str]:
    """One line per tool call whose run differs from what the model asked: rewritten
    arguments, a denial, a plugin's replacement, or a failure. Calls that ran as asked get
    no line (the `[tool] name arguments` line shown before the call says it all). Control
    characters (a hostile file name in an error, say) are shown escaped, never sent to the
    terminal."""
    notes = []
    for record in records:
        name, outcome = record.get("name"), record.get("outcome")
        if "requested_arguments" in record and outcome in ("ran", "failed"):
            arguments = json.dumps(record.get("arguments"), ensure_ascii=False)
            notes.append(f"[tool] {name} ran with {arguments} "
                         f"(rewritten before it ran: your edit or a plugin)")
        if outcome == "denied":
            notes.append(f"[tool] {name} denied: {record.get('error', '')}")
        elif outcome == "replaced":
            notes.append(f"[tool] {name} not run: a plugin gave its result")
        elif outcome == "failed":
            notes.append(f"[tool] {name} failed: {record.get('error', '')}")
    return [terminal_text(note, keep_newlines=False) for note in notes]


def call_line(call: dict[str, Any], width: int = 100) -> str:
    """`[tool] <name> <arguments>` for one requested call, on one line of about `width`
    characters: the arguments as compact JSON (newlines inside strings stay `\\n`), cut
    with `…`, control characters escaped."""
    arguments = call.get("arguments", "")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:  # the model's own text, shown as it sent it
            return shortened(f"[tool] {call.get('name')} {arguments}", width)
    return shortened(f"[tool] {call.get('name')} {json.dumps(arguments, ensure_ascii=False)}",
                     width)


def result_lines(records: list[dict[str, Any]], width: int = 120) -> list[str]:
    """What each call came to, one line or two per call: the `tool_notes` line when it did
    not run as asked, and for a call that ran `[tool] <name> ok (<size>): <first line>`.
    A record without an outcome (another agent's) counts as ran, or failed when it says
    `is_error`."""
    lines: list[str] = []
    for record in records:
        outcome = record.get("outcome") or ("failed" if record.get("is_error") else "ran")
        if "outcome" in record:
            lines.extend(shortened(note, width) for note in tool_notes([record]))
        elif outcome == "failed":
            lines.append(shortened(f"[tool] {record.get('name')} failed: "
                                   f"{record.get('output', '')}", width))
        if outcome == "ran":
            output = str(record.get("output") or "")
            first = output.strip().split("\n", 1)[0] if output.strip() else "(no output)"
            lines.append(shortened(f"[tool] {record.get('name')} ok ({size(output)}): {first}",
                                   width))
    return lines


def size(text: str) -> str:
    """`1 line, 27 chars` or `12 lines, 1,204 chars`: how big a result is."""
    count = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    return f"{count:,} line{'' if count == 1 else 's'}, {len(text):,} chars"


def shortened(text: str, width: int = 100) -> str:
    """`text` on one terminal line: control characters (newlines too) escaped, cut to
    about `width` characters with `…`."""
    text = terminal_text(text, keep_newlines=False)
    return text if len(text) <= width else text[:width - 1] + "…"


def is_terminal(stream: Any) -> bool:
    """Whether `stream` is a terminal (False for closed, detached or fake streams)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


_UNSAFE_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})
"""Control characters (C0, DEL, C1: escape sequences), lone surrogates, and the line and
paragraph separators: what a terminal acts on, or what cannot be written."""


def terminal_text(text: str, *, keep_newlines: bool = True, strict: bool = False) -> str:
    """`text` safe to write to a terminal: control characters (escape sequences that move
    the cursor, retitle the window or write the clipboard) and marks that reorder text are
    shown escaped, as `\\x1b`, `\\u202e`; text stays text (a no-break space, an emoji's
    joiner, the joiner Persian writes with, a soft hyphen). With `strict` (an approval
    question, where nothing may hide) every character Python deems unprintable is
    escaped. Newlines and tabs stay unless `keep_newlines` is false."""
    if text.isprintable():
        return text
    kept = "\n\t" if keep_newlines else ""
    if strict:
        return "".join(char if char.isprintable() or char in kept else repr(char)[1:-1]
                       for char in text)
    import unicodedata

    from ..config.limits import BIDI_CONTROLS  # here: the module itself is standard library

    return "".join(repr(char)[1:-1] if char not in kept and (
        char in BIDI_CONTROLS or unicodedata.category(char) in _UNSAFE_CATEGORIES)
        else char for char in text)


def turn_note(kind: str, data: dict[str, Any]) -> str | None:
    """The line a `retry` or `compaction` stream event shows on a terminal, else None."""
    if kind == "retry":
        return (f"[retry] {data.get('reason')}: waiting {float(data.get('wait') or 0):.1f} s, "
                f"then attempt {data.get('attempt')} of {data.get('attempts')}")
    if kind == "compaction":
        why = {"budget": "the context passed its budget",
               "messages": "more messages than the context window keeps",
               "overflow": "the model refused the request as too long",
               "user": "asked"}.get(str(data.get("reason")), "")
        return (f"[context] compacted ({why}; about {int(data.get('tokens_before') or 0):,} "
                f"tokens): the session goes on from a summary of "
                f"{int(data.get('summary_chars') or 0):,} characters, about "
                f"{int(data.get('tokens_after') or 0):,} tokens with the system prompt and tools")
    return None


def retry_status(data: dict[str, Any]) -> str:
    """What the status line says after a `retry` event, while its clock counts the wait."""
    return f"waiting {float(data.get('wait') or 0):g} s to retry"
