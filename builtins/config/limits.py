"""Size limits that the builtin plugin, its channels and its tapes enforce, kept in one
place so that every channel, the session resolver, the context and the docs agree on them."""

from __future__ import annotations

from typing import Any, Final

from hookline.kernel.envelope import get_field
from hookline.kernel.errors import ErrorKind, HooklineError

__all__ = ["CONTEXT_WINDOW", "MAX_EDIT_BYTES", "MAX_REQUEST_TOOLS", "MAX_SESSION_ID_LENGTH",
           "SESSION_FIELDS", "check_session_fields", "session_id_problem"]

MAX_SESSION_ID_LENGTH: Final = 256
"""Longest session id or chat id accepted, in characters. Session ids name tapes, cache
keys and log lines; an unbounded one lets a single request grow every one of them."""

MAX_REQUEST_TOOLS: Final = 128
"""Tools one model request offers at most (OpenAI's limit: a request with more is
refused); past it, the rest of the tools, in priority order, are not offered."""

MAX_EDIT_BYTES: Final = 16 * 1024 * 1024
"""Largest file `fs.edit` works on, in bytes (16 MiB). An edit holds the whole file in
memory several times over (bytes, text, the edited text); larger files are refused with a
message that points to the shell tool, which edits them without loading them."""

CONTEXT_WINDOW: Final = 100
"""Messages since the last anchor past which the context is compacted, as past the token
budget; the tape is read with twice as many entries at most (the running turn's own all
kept), a bound that compaction keeps from ever sliding; see docs/context.md."""

SESSION_FIELDS: Final = ("session_id", "chat_id")
"""Envelope fields a session id is made from; each is held to `MAX_SESSION_ID_LENGTH`."""


BIDI_CONTROLS: Final = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                                 "\u2066\u2067\u2068\u2069")
"""Marks that reorder the text around them on a terminal (a right-to-left override makes
`txt.exe` read `exe.txt`): refused in ids, escaped where text is shown."""


def session_id_problem(value: str) -> str | None:
    """What is wrong with a session or chat id a person or a client gave (None: nothing):
    empty, too long, or holding control characters (it names a tape and is shown in log
    lines and on terminals)."""
    if not value.strip():
        return "must not be empty (leave it out instead)"
    if len(value) > MAX_SESSION_ID_LENGTH:
        return f"is {len(value)} characters long; at most {MAX_SESSION_ID_LENGTH} are allowed"
    if any(ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F or char in BIDI_CONTROLS
           for char in value):
        return "must not contain control characters"
    return None


def check_session_fields(message: Any) -> None:
    """Refuse an envelope whose `session_id` or `chat_id` is longer than the cap.

    Raises `HooklineError(invalid_input)` naming the field, its length, the cap and the fix,
    before the id can name a tape, a cache entry or a log line.
    """
    for name in SESSION_FIELDS:
        value = get_field(message, name)
        if value is None:
            continue
        length = len(str(value))
        if length > MAX_SESSION_ID_LENGTH:
            channel = get_field(message, "channel") or "default"
            raise HooklineError(
                ErrorKind.invalid_input,
                f"{name} of a message on channel {channel!r} is {length} characters long; "
                f"at most {MAX_SESSION_ID_LENGTH} are accepted (MAX_SESSION_ID_LENGTH): send "
                f"a shorter {name}, for example a hash of the long one",
                {"field": name, "length": length, "limit": MAX_SESSION_ID_LENGTH},
            )
