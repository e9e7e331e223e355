"""The fork store behind `Tape.fork`: a run's writes held over the parent store.

Reads see the parent's entries followed by the run's; `flush` puts the run's pending
writes in the store's run journal, `commit` merges them in one transaction, and `merge`
writes one buffered tape into a store without a journal.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import partial
from operator import attrgetter
from typing import Any

import anyio

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import LAST_ANCHOR, AsyncTapeStore, TapeEntry, TapeQuery, apply_query

from ..store.asyncstore import AsyncJournal, append_batch, has_batch
from ..store.entries import check_entry, copy_entry, dump_json, is_sidecar_tape
from .kept import KeptContext, is_anchor, is_context_query, kept_context

__all__ = ["COMMIT_OBSERVER", "ForkStore", "TapeRecordError", "observed_commit"]

COMMIT_OBSERVER: ContextVar[Callable[[], AbstractAsyncContextManager[object]] | None] = \
    ContextVar("hookline_tape_commit_observer", default=None)
"""What wraps each run's commit (the fork merge) in the current context: telemetry sets it
around a turn to time the commit; None (the default) costs one lookup."""


async def observed_commit(merge: Callable[..., Awaitable[None]], *args: Any) -> None:
    """`await merge(*args)` inside the context's commit observer, if any."""
    observe = COMMIT_OBSERVER.get()
    if observe is None:
        await merge(*args)
        return
    async with observe():
        await merge(*args)


class TapeRecordError(HooklineError):
    """A run's record could not be made durable; the run stops rather than go on unrecorded."""



@dataclass
class _Buffer:
    entries: list[TapeEntry] = field(default_factory=list)
    reset: bool = False
    base_id: int | None = None  # the parent's last id, learned at the first append
    bootstrap: TapeEntry | None = None  # a conditional anchor at the head of `entries`
    scanned: tuple[int, TapeEntry | None, bool] = (0, None, False)
    """How many `entries` were looked at for an anchor, the last of them, and whether one
    was found: a read looks only at what was added since (see `_holds_anchor`)."""


class ForkStore:
    """An AsyncTapeStore holding some tapes' writes over a parent store (see `Tape.fork`).

    `buffers` serve reads; `pending` holds the writes not yet in the journal, as journal
    ops, in order.
    """

    def __init__(
        self,
        parent: AsyncTapeStore,
        tapes: Iterable[str],
        main: str,
        journal: AsyncJournal | None,
    ) -> None:
        self.parent = parent
        self.buffers = {tape: _Buffer() for tape in tapes}
        self.main = main
        self.journal = journal
        self.run = f"fork-{uuid.uuid4().hex}"
        self.pending: list[tuple[str, str, TapeEntry | None]] = []
        self.closed = False
        self._kept: dict[str, KeptContext] = {}
        self._writing = anyio.Lock()

    def kept_context(self, tape: str) -> KeptContext:
        """The kept context of `tape` (see `kept_context`): each step reads and converts
        only what it added, and each run only what the runs before it added."""
        kept = self._kept.get(tape)
        if kept is None:
            kept = self._kept[tape] = kept_context(self.parent, tape)
        return kept

    def _check_open(self) -> None:
        if self.closed:
            raise HooklineError(ErrorKind.invalid_input, "This tape fork is closed.")

    async def list_tapes(self) -> list[str]:
        self._check_open()
        names = set(await self.parent.list_tapes())
        for tape, buffer in self.buffers.items():
            if is_sidecar_tape(tape):
                continue
            if buffer.entries:
                names.add(tape)
            elif buffer.reset:
                names.discard(tape)
        return sorted(names)

    async def reset(self, tape: str) -> None:
        self._check_open()
        buffer = self.buffers.get(tape)
        if buffer is None:
            await self.parent.reset(tape)
            return
        buffer.entries.clear()
        buffer.reset = True
        buffer.base_id = 0
        buffer.bootstrap = None
        self.pending.append((tape, "reset", None))

    async def append(self, tape: str, entry: TapeEntry) -> TapeEntry:
        self._check_open()
        check_entry(entry)
        entry = _redact(entry)
        if tape not in self.buffers:
            stored = await self.parent.append(tape, entry)
            return stored if isinstance(stored, TapeEntry) else entry
        return await self._buffer(tape, entry, "append")

    async def append_bootstrap(self, tape: str, anchor: TapeEntry) -> TapeEntry:
        """Buffer an anchor that is written at the merge only if the tape has none then."""
        self._check_open()
        return await self._buffer(tape, check_entry(anchor), "bootstrap")

    async def _buffer(self, tape: str, entry: TapeEntry, action: str) -> TapeEntry:
        buffer = self.buffers[tape]
        # Normalise through JSON now, so a bad payload fails here and not at merge time.
        payload = json.loads(dump_json(entry.payload, "payload"))
        meta = json.loads(dump_json(entry.meta, "meta"))
        if buffer.base_id is None:
            last = list(await self.parent.fetch_all(TapeQuery(tape).tail(1)))
            if buffer.base_id is None:  # a reset during the await already set it
                buffer.base_id = last[-1].id if last else 0
        # No await between computing the id and storing the entry: ids stay unique.
        stored = replace(
            entry, id=buffer.base_id + len(buffer.entries) + 1, payload=payload, meta=meta
        )
        buffer.entries.append(stored)
        if action == "bootstrap":
            buffer.bootstrap = stored
        self.pending.append((tape, action, replace(stored, id=0)))
        return copy_entry(stored)

    async def fetch_all(
        self, query: TapeQuery, *, whole_run: bool = False, shared: bool = False
    ) -> list[TapeEntry]:
        """The parent's entries then the fork's, as one tape; `whole_run` (the context read)
        applies the query's tail to the parent's part only, keeping all of the fork's.

        The fork's entries are copied once selected, so a reader cannot change them;
        `shared` returns them as held, and the parent's through the tape's kept context,
        for a reader that never changes them (the context conversion, which copies what
        it returns).
        """
        self._check_open()
        read = (partial(self.kept_context(query.tape).read, self.parent) if shared
                else self.parent.fetch_all)
        buffer = self.buffers.get(query.tape)
        if buffer is None or (not buffer.entries and not buffer.reset):
            selected = list(await read(query))
            if buffer is not None and buffer.base_id is None:
                buffer.base_id = _last_id(query, selected)
            return selected
        buffered = list(buffer.entries)  # what the fork holds now, whatever an await adds
        selected = await self._select(query, buffered, buffer.reset, whole_run, read)
        if shared:
            return selected
        held = {id(entry) for entry in buffered}
        return [copy_entry(entry) if id(entry) in held else entry for entry in selected]

    async def _select(
        self, query: TapeQuery, buffered: list[TapeEntry], reset: bool, whole_run: bool,
        read: Callable[[TapeQuery], Awaitable[Iterable[TapeEntry]]],
    ) -> list[TapeEntry]:
        own = replace(query, tail_entries=None) if whole_run else query
        if reset:
            return apply_query(buffered, own)
        if query.anchor_range is not None:
            # The whole tape, read past `read`: it must not become the kept context.
            before = list(await self.parent.fetch_all(TapeQuery(query.tape)))
            return apply_query(before + buffered, query)
        if query.anchor is not None:
            wanted = None if query.anchor is LAST_ANCHOR else query.anchor
            # Most runs hold no anchor: knowing that first keeps reads cheap.
            if self._holds_anchor(query.tape, buffered) and any(
                is_anchor(entry, wanted) for entry in buffered
            ):
                return apply_query(buffered, own)
        # The parent's part through the whole query (cheap for stores that push anchors,
        # filters and tails down), then the rest of the query on its part plus ours. The
        # limit keeps the first entries of the tail, so it waits for the combined list.
        parent_query = query if query.tail_entries is None else replace(query, max_entries=None)
        parent = await read(parent_query)
        rest = replace(own, anchor=None)
        if not is_context_query(rest) or rest.tail_entries is not None:
            return apply_query([*parent, *buffered], rest)
        return [*parent, *buffered]  # a context read: nothing left to filter

    def _holds_anchor(self, tape: str, buffered: list[TapeEntry]) -> bool:
        """Whether `buffered` (the tape's buffered entries) holds an anchor, looking only at
        the entries added since the last call when the ones before are as they were."""
        buffer = self.buffers[tape]
        seen, last, found = buffer.scanned
        if not (0 < seen <= len(buffered) and buffered[seen - 1] is last):
            seen, found = 0, False  # emptied or changed since: look at all of them
        found = found or "anchor" in map(_kind, buffered[seen:])
        buffer.scanned = (len(buffered), buffered[-1] if buffered else None, found)
        return found

    async def flush(self) -> None:
        """Write the pending ops to the journal in one commit (nothing without a journal)."""
        if self.journal is None:
            return
        async with self._writing:
            if not self.pending:
                return
            ops = list(self.pending)
            try:
                await self.journal.write(self.run, self.main, ops)
            except Exception as exc:
                # The store's own error says what to do; any other is the store failing.
                fix = "" if isinstance(exc, HooklineError) else "; fix the tape store and try again"
                raise TapeRecordError(
                    ErrorKind.temporary,
                    f"Could not record the run on tape {self.main}: {_said(exc)}. The run "
                    f"stops here so that nothing goes on unrecorded{fix}.",
                ) from exc
            del self.pending[: len(ops)]  # appends made meanwhile stay pending

    async def commit(self) -> None:
        """Merge the journal and the pending ops into the tapes in one transaction."""
        assert self.journal is not None
        async with self._writing:
            try:
                await self.journal.commit(self.run, list(self.pending))
            except Exception as exc:
                raise TapeRecordError(
                    ErrorKind.temporary,
                    f"Could not save the run on tape {self.main}: {_said(exc)}. "
                    f"What it recorded "
                    f"before its last tool result stays in the store's run journal and is put "
                    f"on the tape, marked interrupted, by the store's recovery (the SQLite "
                    f"store's next call; a PostgreSQL store's next sweep).",
                ) from exc
            self.pending.clear()
            for buffer in self.buffers.values():
                buffer.entries.clear()
                buffer.bootstrap = None

    async def merge(self, tape: str) -> None:
        """Write one buffered tape into the parent (no journal) and empty its buffer."""
        buffer = self.buffers.get(tape)
        if buffer is None:
            return
        if buffer.reset:
            await self.parent.reset(tape)
            buffer.reset = False
        bootstrap = buffer.bootstrap
        entries = [replace(entry, id=0) for entry in buffer.entries if entry is not bootstrap]
        if has_batch(self.parent):
            head = None if bootstrap is None else replace(bootstrap, id=0)
            await append_batch(self.parent, tape, entries, head)
            buffer.entries.clear()
        else:
            if bootstrap is not None:
                await append_batch(self.parent, tape, [], replace(bootstrap, id=0))
                buffer.entries.remove(bootstrap)
            # Each buffered entry leaves the buffer only once the parent has it: a failing
            # append leaves the rest buffered instead of losing it.
            while buffer.entries:
                await self.parent.append(tape, replace(buffer.entries[0], id=0))
                buffer.entries.pop(0)
        buffer.bootstrap = None
        buffer.base_id = None


_kind = attrgetter("kind")


def _last_id(query: TapeQuery, selected: list[TapeEntry]) -> int | None:
    """The tape's last id, when what `query` selected tells it (`fetch_all` then learns it
    without asking): a selection without filters or limit ends with the tape's last
    entry, and only an empty tape gives none without an anchor."""
    if not is_context_query(query):
        return None
    if selected:
        return selected[-1].id
    return 0 if query.anchor is None else None


def _is_text_part(part: Any) -> bool:
    return isinstance(part, str) or (isinstance(part, dict) and part.get("type") == "text")


def _redact(entry: TapeEntry) -> TapeEntry:
    """Drop non-text parts (media) from list-valued `content`/`prompt` payload values."""
    payload = entry.payload
    changed = {
        key: [part for part in value if _is_text_part(part)]
        for key in ("content", "prompt")
        if isinstance(value := payload.get(key), list)
    }
    if not changed:
        return entry
    return replace(entry, payload={**payload, **changed})



def _said(exc: BaseException) -> str:
    """What a store's failure says, to quote inside a sentence: a HooklineError's message
    without its `[kind]`, without its last full stop."""
    return (exc.message if isinstance(exc, HooklineError) else str(exc)).rstrip(".")
