"""A bounded cache of parsed tape entries, for reads whose reader never changes them.

A turn's context read parses the same window of JSON rows as the turn before, plus what
that turn added; parsing was most of a gateway turn's CPU. The store still reads every
row from the database, and a row is served from the cache only when it is equal, text for
text, to the row the cached entry was parsed from: a reset tape whose ids start again, or
a row another process wrote, can never be answered with a stale entry.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Final

from hookline.kernel.tape import TapeEntry

__all__ = ["PARSED_CACHE_CHARS", "ParsedEntries", "Row"]

PARSED_CACHE_CHARS: Final = 8 * 1024 * 1024
"""The JSON text (payload and meta) whose parsed entries a store keeps, at most: the
builtin context window (`CONTEXT_WINDOW` entries) for each of a few hundred sessions. The
oldest entries go first."""

Row = tuple[int, str, str, str, str]
"""A stored entry as read: (id, kind, payload JSON, meta JSON, date)."""


class ParsedEntries:
    """Entries parsed from rows, kept by (tape, id) with the row they came from.

    The entries handed out are shared by every reader: a reader must not change them.
    """

    def __init__(self, limit: int = PARSED_CACHE_CHARS) -> None:
        self._limit = limit
        self._kept: dict[tuple[str, int], tuple[Row, TapeEntry]] = {}
        self._chars = 0
        self._lock = threading.Lock()  # reads may come from several threads

    def entries(
        self, tape: str, rows: Sequence[Row],
        parse: Callable[[str, list[Row]], list[TapeEntry]],
    ) -> list[TapeEntry]:
        """The entries of `rows`; those not kept (or kept from another row) are parsed
        by `parse(tape, rows)` in one call, which raises for a damaged row."""
        kept = self._kept
        found: list[TapeEntry | None] = []
        missing: list[int] = []
        for index, row in enumerate(rows):
            hit = kept.get((tape, row[0]))
            if hit is not None and hit[0] == row:
                found.append(hit[1])
            else:
                found.append(None)
                missing.append(index)
        if missing:
            parsed = parse(tape, [rows[index] for index in missing])
            with self._lock:
                for index, entry in zip(missing, parsed, strict=True):
                    found[index] = entry
                    self._keep((tape, entry.id), rows[index], entry)
        return found  # type: ignore[return-value]  # every None was filled above

    def _keep(self, key: tuple[str, int], row: Row, entry: TapeEntry) -> None:
        size = len(row[2]) + len(row[3])
        if size > self._limit:
            return
        old = self._kept.pop(key, None)
        if old is not None:
            self._chars -= len(old[0][2]) + len(old[0][3])
        self._kept[key] = (row, entry)
        self._chars += size
        while self._chars > self._limit:
            oldest = next(iter(self._kept))
            dropped, _ = self._kept.pop(oldest)
            self._chars -= len(dropped[2]) + len(dropped[3])

    def __len__(self) -> int:
        return len(self._kept)
