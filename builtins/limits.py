"""Size limits that the builtin plugin and its channels enforce, kept in one place so that
every channel, the session resolver and the docs agree on them."""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_EDIT_BYTES", "MAX_SESSION_ID_LENGTH"]

MAX_SESSION_ID_LENGTH: Final = 256
"""Longest session id or chat id accepted, in characters. Session ids name tapes, cache
keys and log lines; an unbounded one lets a single request grow every one of them."""

MAX_EDIT_BYTES: Final = 16 * 1024 * 1024
"""Largest file `fs.edit` works on, in bytes (16 MiB). An edit holds the whole file in
memory several times over (bytes, text, the edited text); larger files are refused with a
message that points to the shell tool, which edits them without loading them."""
