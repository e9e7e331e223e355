"""An in-memory tape store, for tests and for agents created without a store.

Entries are normalised through JSON on append (exactly what the SQLite store does), so a
payload that works here works against the durable store too, and neither the caller's
later mutations nor a reader's mutations can change what is stored.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import replace

from hookline.kernel.tape import TapeEntry, TapeQuery, apply_query

from .entries import (
    check_batch,
    check_entry,
    check_tape_name,
    copy_entry,
    dump_json,
    is_sidecar_tape,
)

__all__ = [
    "InMemoryTapeStore",
]


class InMemoryTapeStore:
    """A synchronous TapeStore that keeps tapes in a dict; safe to share between threads.

    `append` assigns the next id of the tape (from 1; a reset tape starts again at 1)
    and returns the stored entry; `append_many` appends a batch under one lock hold, so
    it is contiguous and atomic (see `BatchTapeStore`). `list_tapes` lists tapes that hold
    entries, sorted, without sidecar tapes.
    """

    def __init__(self) -> None:
        self._tapes: dict[str, list[TapeEntry]] = {}
        self._lock = threading.Lock()

    def list_tapes(self) -> list[str]:
        with self._lock:
            return sorted(
                name
                for name, entries in self._tapes.items()
                if entries and not is_sidecar_tape(name)
            )

    def list_all_tapes(self) -> list[str]:
        """Every tape holding entries, sidecar tapes included (what a copy must read)."""
        with self._lock:
            return sorted(name for name, entries in self._tapes.items() if entries)

    def reset(self, tape: str) -> None:
        check_tape_name(tape)
        with self._lock:
            self._tapes.pop(tape, None)

    def fetch_all(self, query: TapeQuery) -> list[TapeEntry]:
        check_tape_name(query.tape)
        with self._lock:
            entries = list(self._tapes.get(query.tape, ()))
        # The list is copied under the lock and stored entries are never mutated, so
        # filtering can run outside it; readers get copies so they cannot edit them.
        return [copy_entry(entry) for entry in apply_query(entries, query)]

    async def fetch_since_async(self, tape: str, entry_id: int,
                                limit: int | None = None) -> list[TapeEntry]:
        """The entries of `tape` whose id is `entry_id` or more, at most `limit` of them,
        as stored (ids are positions from 1): for the kept context read and `tape_pages`,
        which never change them."""
        check_tape_name(tape)
        start = max(entry_id, 1) - 1
        with self._lock:
            return self._tapes.get(tape, [])[start:None if limit is None else start + limit]

    def append(self, tape: str, entry: TapeEntry) -> TapeEntry:
        check_tape_name(tape)
        normalised = _normalised(check_entry(entry))
        with self._lock:
            entries = self._tapes.setdefault(tape, [])
            stored = replace(normalised, id=len(entries) + 1)
            entries.append(stored)
        return copy_entry(stored)

    def append_many(
        self, tape: str, entries: Sequence[TapeEntry], *, bootstrap: TapeEntry | None = None
    ) -> list[TapeEntry]:
        check_tape_name(tape)
        checked, bootstrap = check_batch(entries, bootstrap)
        batch = [_normalised(entry) for entry in checked]  # everything is checked first
        first = None if bootstrap is None else _normalised(bootstrap)
        with self._lock:
            stored = self._tapes.setdefault(tape, [])
            if first is not None and not any(entry.kind == "anchor" for entry in stored):
                batch.insert(0, first)
            added = [replace(entry, id=len(stored) + n) for n, entry in enumerate(batch, 1)]
            stored.extend(added)
        return [copy_entry(entry) for entry in added]

    def __repr__(self) -> str:
        return f"InMemoryTapeStore(tapes={len(self._tapes)})"


def _normalised(entry: TapeEntry) -> TapeEntry:
    """The entry with its payload and meta passed through JSON, as SQLite would keep them."""
    payload = json.loads(dump_json(entry.payload, "payload"))
    meta = json.loads(dump_json(entry.meta, "meta"))
    return replace(entry, payload=payload, meta=meta)
