"""What the agent's tool_result records say about how a call really ran, as lines for the
terminal (`hookline run --stream`, `hookline chat`). Standard library only: the command
line imports it at start-up."""

from __future__ import annotations

import json
from typing import Any


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
            notes.append(f"[tool] {name} ran with {arguments} (rewritten by a plugin)")
        if outcome == "denied":
            notes.append(f"[tool] {name} denied: {record.get('error', '')}")
        elif outcome == "replaced":
            notes.append(f"[tool] {name} not run: a plugin gave its result")
        elif outcome == "failed":
            notes.append(f"[tool] {name} failed: {record.get('error', '')}")
    return [terminal_text(note, keep_newlines=False) for note in notes]


def is_terminal(stream: Any) -> bool:
    """Whether `stream` is a terminal (False for closed, detached or fake streams)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def terminal_text(text: str, *, keep_newlines: bool = True) -> str:
    """`text` safe to write to a terminal: control characters (escape sequences that move
    the cursor, retitle the window or write the clipboard) are shown escaped, as `\\x1b`.
    Newlines and tabs stay unless `keep_newlines` is false."""
    if text.isprintable():
        return text
    kept = "\n\t" if keep_newlines else ""
    return "".join(char if char.isprintable() or char in kept else repr(char)[1:-1]
                   for char in text)
