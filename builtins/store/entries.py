"""What every tape store shares: the checks of what may be appended, payload JSON, copies
of entries, and the naming of sidecar tapes.

The in-memory, SQLite and PostgreSQL stores, the fork store and the session listing all
use these, so that a payload accepted by one store is accepted by every other.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from hookline.kernel.streaming import ErrorKind, HooklineError
from hookline.kernel.tape import TapeEntry

__all__ = [
    "SIDECAR_MARKER",
    "check_batch",
    "check_entry",
    "check_tape_name",
    "copy_entry",
    "dump_json",
    "is_sidecar_tape",
]

SIDECAR_MARKER: Final = "__sidecar__"
"""Sidecar tapes are named `<owner tape>__sidecar__<sidecar name>`; listings hide them."""


def is_sidecar_tape(name: str) -> bool:
    """True for a sidecar's physical tape name."""
    return SIDECAR_MARKER in name


def check_tape_name(tape: object) -> str:
    """A tape name must be a non-empty string."""
    if not isinstance(tape, str) or not tape:
        raise HooklineError(
            ErrorKind.invalid_input, f"Tape name must be a non-empty string, got {tape!r}."
        )
    return tape


def check_entry(entry: object) -> TapeEntry:
    """What a store accepts on append: a TapeEntry with a string kind and dict payload/meta."""
    if not isinstance(entry, TapeEntry):
        raise HooklineError(
            ErrorKind.invalid_input,
            f"Only TapeEntry objects can be appended, got {type(entry).__name__}.",
        )
    if not isinstance(entry.kind, str) or not entry.kind:
        raise HooklineError(
            ErrorKind.invalid_input, f"Entry kind must be a non-empty string, got {entry.kind!r}."
        )
    if not isinstance(entry.payload, dict):
        raise HooklineError(ErrorKind.invalid_input, "Entry payload must be a dict.")
    if not isinstance(entry.meta, dict):
        raise HooklineError(ErrorKind.invalid_input, "Entry meta must be a dict.")
    if not isinstance(entry.date, str):
        raise HooklineError(ErrorKind.invalid_input, "Entry date must be an ISO date string.")
    return entry


def check_batch(
    entries: Sequence[TapeEntry], bootstrap: TapeEntry | None
) -> tuple[list[TapeEntry], TapeEntry | None]:
    """What `append_many` accepts: a sequence of entries and an optional `anchor` entry."""
    if isinstance(entries, TapeEntry | str | bytes) or not isinstance(entries, Sequence):
        raise HooklineError(
            ErrorKind.invalid_input,
            f"append_many takes a sequence of TapeEntry objects, got {type(entries).__name__}.",
        )
    checked = [check_entry(entry) for entry in entries]
    if bootstrap is not None and check_entry(bootstrap).kind != "anchor":
        raise HooklineError(
            ErrorKind.invalid_input,
            f"The bootstrap entry must be an anchor, got kind {bootstrap.kind!r}.",
        )
    return checked, bootstrap


def dump_json(value: dict[str, Any], what: str) -> str:
    """JSON text of a payload or meta dict; values JSON cannot hold are `invalid_input`."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise HooklineError(
            ErrorKind.invalid_input, f"Entry {what} is not JSON-serialisable: {exc}"
        ) from exc


def copy_entry(entry: TapeEntry) -> TapeEntry:
    """A deep copy, so callers cannot edit stored payloads."""
    return replace(entry, payload=copy.deepcopy(entry.payload), meta=copy.deepcopy(entry.meta))
