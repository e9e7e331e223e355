"""Size limits that the builtin plugin and its channels enforce, kept in one place so that
every channel, the session resolver and the docs agree on them."""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_SESSION_ID_LENGTH"]

MAX_SESSION_ID_LENGTH: Final = 256
"""Longest session id or chat id accepted, in characters. Session ids name tapes, cache
keys and log lines; an unbounded one lets a single request grow every one of them."""
