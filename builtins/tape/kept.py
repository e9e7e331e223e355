"""A session's context kept from one read to the next: the one cache of the context read.

A turn reads its context before every model call, and each read is the last one plus what
was written since (less the oldest entries once the window is full). So, per store and
session tape, this keeps the entries the store gave for the context query and their
messages (`ContextMessages`), and a read asks the store only for the rows from the last
one it holds on. That row must come back equal to the entry kept from it, or the tape was
reset or rewritten since: then the store is read whole again, as if nothing were kept.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final
from weakref import WeakKeyDictionary

from hookline.kernel.tape import LAST_ANCHOR, AsyncTapeStore, TapeEntry, TapeQuery, apply_query

from ..config.limits import CONTEXT_WINDOW
from ..store.asyncstore import fetch_since, has_fetch_since, inner_store
from .context import ContextMessages

__all__ = ["KEPT_CONTEXTS", "KEPT_ENTRIES", "KeptContext", "kept_context"]

KEPT_CONTEXTS: Final = 256
"""Session tapes per store whose context is kept between runs, most recent first: the
next run's first read then reads and converts only what the last one added."""

KEPT_ENTRIES: Final = KEPT_CONTEXTS * CONTEXT_WINDOW
"""Entries those contexts may hold together (the builtin window for each): the oldest go
first, so a context without a window cannot make them hold whole tapes."""


class KeptContext:
    """One session tape's last context read: the entries of the store's part and the
    messages of the whole selection (`messages`, which also holds a run's own entries).

    The entries are shared by every reader: a reader must not change them.
    """

    __slots__ = ("_entries", "_query", "messages")

    def __init__(self) -> None:
        self.messages = ContextMessages(hide_excluded=True)
        self._query: TapeQuery | None = None
        self._entries: list[TapeEntry] = []

    def __len__(self) -> int:
        """The entries it holds."""
        return max(len(self.messages), len(self._entries))

    async def read(self, store: AsyncTapeStore, query: TapeQuery) -> list[TapeEntry]:
        """`store.fetch_all(query)`, for a reader that never changes what it gets: a
        context query (an anchor rule and a tail, nothing else) reads only the rows from
        the last one kept on, when the store can (`fetch_since`)."""
        if not (is_context_query(query) and has_fetch_since(store)):
            return list(await store.fetch_all(query))
        kept, entries = self._query, self._entries  # as they are before any await
        if kept == query and entries:
            last = entries[-1]
            since = await fetch_since(store, query.tape, last.id)
            if since[:1] == [last]:
                if len(since) > 1:
                    entries = self._entries = _extended(entries, since[1:], query)
                return entries
        self._query, self._entries = None, []
        selected = list(await store.fetch_all(query))
        self._query, self._entries = query, selected
        return selected


def is_context_query(query: TapeQuery) -> bool:
    """Whether `query` keeps every entry from its anchor (if any) to the tape's end but
    for a tail: what a context read asks, and all a kept read can extend."""
    return (query.anchor_range is None and not query.kind_filter
            and query.text_filter is None and query.date_range is None
            and query.max_entries is None)


def is_anchor(entry: TapeEntry, name: str | None) -> bool:
    """Whether `entry` is an anchor called `name` (any anchor for None)."""
    return entry.kind == "anchor" and (name is None or entry.payload.get("name") == name)


def _extended(entries: list[TapeEntry], added: list[TapeEntry],
              query: TapeQuery) -> list[TapeEntry]:
    """The selection of `query` once `added` follows what selected `entries`: from the
    last anchor of `added` when it holds one the query starts at, else `entries` and
    `added` under the query's tail."""
    if query.anchor is not None:
        wanted = None if query.anchor is LAST_ANCHOR else query.anchor
        if any(is_anchor(entry, wanted) for entry in added):
            return apply_query(added, query)
    return apply_query([*entries, *added], replace(query, anchor=None))


_kept: WeakKeyDictionary[object, dict[str, KeptContext]] = WeakKeyDictionary()


def kept_context(store: AsyncTapeStore, tape: str) -> KeptContext:
    """The kept context of `tape` in `store` (a new one when none is kept), now the most
    recent; the oldest are dropped past `KEPT_CONTEXTS` or `KEPT_ENTRIES`."""
    # A tape wraps a sync store in an adapter of its own: the store is what lasts.
    lasting = inner_store(store)
    try:
        kept = _kept.setdefault(lasting, {})
    except TypeError:  # a store that cannot be weakly referenced keeps none
        return KeptContext()
    context = kept.pop(tape, None)
    if context is None:
        context = KeptContext()
    held = sum(map(len, kept.values()))  # once a run: at most 256 lengths
    while kept and (len(kept) >= KEPT_CONTEXTS or held > KEPT_ENTRIES):
        held -= len(kept.pop(next(iter(kept))))
    kept[tape] = context  # the most recent last
    return context
