"""What every tape store shares: the checks of what may be appended, payload JSON, copies
of entries, and the naming of sidecar tapes.

The in-memory, SQLite and PostgreSQL stores, the fork store and the session listing all
use these, so that a payload accepted by one store is accepted by every other.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import TapeEntry

__all__ = ["LONE_SURROGATE", "SIDECAR_MARKER", "is_sidecar_tape", "open_call_results"]

UNKNOWN_OUTCOME: Final = (
    "hookline stopped while this call ran, so its outcome is unknown: it may have completed, "
    "in part or in whole. Check what it would have changed before running it again.")
"""The result recovery records for a call that was running when its run was interrupted."""

SIDECAR_MARKER: Final = "__sidecar__"
"""Sidecar tapes are named `<owner tape>__sidecar__<sidecar name>`; listings hide them."""

REQUEST_META: Final = "request"
"""Meta of a turn's user message: the marks of the http request that sent it (its `id`,
and with an Idempotency-Key the `key` and the body's `digest`)."""


def request_keys(entries: Sequence[TapeEntry]) -> list[str]:
    """The Idempotency-Keys the messages among `entries` were sent with."""
    return [marks["key"] for entry in entries if entry.kind == "message"
            and isinstance(marks := entry.meta.get(REQUEST_META), dict)
            and isinstance(marks.get("key"), str)]


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


LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
"""Half of a UTF-16 pair on its own: valid in JSON (`"\\udcff"`, which a model or a tool
may send) and in a Python string, but not a character UTF-8 can encode."""


def dump_json(value: dict[str, Any], what: str) -> str:
    """JSON text of a payload or meta dict; values JSON cannot hold are `invalid_input`. A
    lone surrogate becomes U+FFFD: the text is stored as UTF-8, and a turn must not fail
    (nor its reply be lost) over a character that cannot be one."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise HooklineError(
            ErrorKind.invalid_input, f"Entry {what} is not JSON-serialisable: {exc}"
        ) from exc
    return valid_text(text)


def valid_text(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (as a decoder replaces what it
    cannot read)."""
    return text if text.isascii() else LONE_SURROGATE.sub("\ufffd", text)


def valid_values(value: Any) -> Any:
    """A JSON value with `valid_text` applied to every string in it, keys included."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, list):
        return [valid_values(item) for item in value]
    if isinstance(value, dict):
        return {valid_text(key): valid_values(item) for key, item in value.items()}
    return value


def copy_entry(entry: TapeEntry) -> TapeEntry:
    """A deep copy, so callers cannot edit stored payloads."""
    return replace(entry, payload=copy.deepcopy(entry.payload), meta=copy.deepcopy(entry.meta))


def unknown_outcomes(entries: Sequence[tuple[str, dict[str, Any]]]) -> TapeEntry | None:
    """For a run's entries (kind, payload) as recovery finds them: a `tool_result` entry
    answering each call that has no result, with outcome `unknown`, so that the next
    request shows the model the call and that it may have run; None when every call has
    its result."""
    return open_call_results(entries, "unknown", UNKNOWN_OUTCOME, recovered=True)


def open_call_results(entries: Sequence[tuple[str, dict[str, Any]]], outcome: str,
                      output: str, **meta: Any) -> TapeEntry | None:
    """A `tool_result` entry answering each call of `entries` (kind, payload) that has no
    result, as an error with `outcome` and `output`; None when every call has its result.
    A result answers, of the latest `tool_call` entry with an open call of its id, the
    first such call (the agent's pairing: one response may repeat an id)."""
    open_calls: list[tuple[int, dict[str, Any]]] = []  # (its tool_call entry's number, call)
    for number, (kind, payload) in enumerate(entries):
        if kind == "tool_call":
            open_calls += [(number, call) for call in payload.get("calls") or []
                           if isinstance(call, dict) and isinstance(call.get("id"), str)]
        elif kind == "tool_result":
            for result in payload.get("results") or []:
                call_id = result.get("call_id") if isinstance(result, dict) else None
                match = [i for i, (_, call) in enumerate(open_calls) if call["id"] == call_id]
                if match:
                    latest = open_calls[match[-1]][0]
                    del open_calls[next(i for i in match if open_calls[i][0] == latest)]
    if not open_calls:
        return None
    return TapeEntry.new("tool_result", {"results": [
        {"call_id": call["id"], "name": str(call.get("name", "")), "output": output,
         "is_error": True, "outcome": outcome, "error": output,
         "arguments": _as_object(call.get("arguments"))} for _, call in open_calls]}, **meta)


def _as_object(arguments: Any) -> Any:
    """A call's arguments as its results record them: the JSON text a model sent, parsed
    when it is one object."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return arguments
        return parsed if isinstance(parsed, dict) else arguments
    return arguments
