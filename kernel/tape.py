"""Tape entries, queries, store protocols and the tape context.

A tape is an append-only log of a session (messages, tool calls, anchors, events). Stores
persist tapes and interpret queries; `apply_query` is the reference interpretation any
store can reuse once it has a tape's entries in memory.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time
from typing import Any, Final, Protocol, TypeAlias, runtime_checkable

from .errors import ErrorKind, HooklineError

__all__ = [
    "ENTRY_KINDS",
    "LAST_ANCHOR",
    "AsyncBatchTapeStore",
    "AsyncTapeStore",
    "BatchTapeStore",
    "TapeContext",
    "TapeEntry",
    "TapeQuery",
    "TapeSidecar",
    "TapeStore",
    "apply_query",
    "is_async_store",
]

ENTRY_KINDS: Final = ("message", "system", "anchor", "tool_call", "tool_result", "error", "event")

DateBound: TypeAlias = str | datetime | date


class _LastAnchor(str):
    """Type of LAST_ANCHOR; recognised by identity, so no real anchor name can collide."""

    __slots__ = ()

    def __reduce__(self) -> str:
        return "LAST_ANCHOR"

    def __copy__(self) -> _LastAnchor:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _LastAnchor:
        return self


LAST_ANCHOR: Final = _LastAnchor("<last anchor>")
"""Anchor marker meaning "the most recent anchor of the tape, whatever its name"."""


def _utc_now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass(frozen=True)
class TapeEntry:
    """One record of a tape; `id` is assigned by the store on append (per tape, from 1)."""

    id: int
    kind: str
    payload: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)
    date: str = field(default_factory=_utc_now)

    @classmethod
    def new(cls, kind: str, payload: dict[str, Any], **meta: Any) -> TapeEntry:
        """An entry ready to append: id 0 (unassigned), dated now in UTC."""
        return cls(id=0, kind=kind, payload=payload, meta=dict(meta), date=_utc_now())


@dataclass(frozen=True)
class TapeQuery:
    """An immutable query over one tape; each builder method returns a new query.

    Stores interpret it (`store.fetch_all(query)`); `apply_query` gives the reference
    semantics. Choosing one anchor selection (after, last, between) replaces another.
    """

    tape: str
    store: TapeStore | AsyncTapeStore | None = field(default=None, compare=False)
    text_filter: str | None = None
    anchor: str | None = None
    anchor_range: tuple[str, str] | None = None
    date_range: tuple[DateBound, DateBound] | None = None
    kind_filter: tuple[str, ...] = ()
    max_entries: int | None = None
    tail_entries: int | None = None

    def query(self, text: str) -> TapeQuery:
        """Keep entries whose JSON contains `text`, ignoring case."""
        return replace(self, text_filter=text)

    def after_anchor(self, name: str) -> TapeQuery:
        """Keep entries after the most recent anchor called `name`."""
        return replace(self, anchor=name, anchor_range=None)

    def last_anchor(self) -> TapeQuery:
        """Keep entries after the most recent anchor of any name."""
        return replace(self, anchor=LAST_ANCHOR, anchor_range=None)

    def between_anchors(self, start: str, end: str) -> TapeQuery:
        """Keep entries between the most recent `start` anchor and the next `end` anchor."""
        return replace(self, anchor=None, anchor_range=(start, end))

    def between_dates(self, start: DateBound, end: DateBound) -> TapeQuery:
        """Keep entries dated within `[start, end]`; a bare date as end covers that day."""
        return replace(self, date_range=(start, end))

    def kinds(self, *kinds: str) -> TapeQuery:
        """Keep entries of these kinds."""
        return replace(self, kind_filter=tuple(kinds))

    def limit(self, n: int) -> TapeQuery:
        """Keep at most the first `n` matching entries."""
        if n < 0:
            raise ValueError(f"limit must be >= 0, got {n}")
        return replace(self, max_entries=n)

    def tail(self, n: int) -> TapeQuery:
        """Keep at most the last `n` matching entries (before `limit` applies).

        Lets a store read the end of a long tape without reading the rest of it.
        """
        if n < 0:
            raise ValueError(f"tail must be >= 0, got {n}")
        return replace(self, tail_entries=n)

    def all(self) -> Any:
        """Run the query on its store: entries, or an awaitable of them for async stores."""
        if self.store is None:
            raise ValueError(f"query on tape {self.tape!r} has no store")
        return self.store.fetch_all(self)


@runtime_checkable
class TapeStore(Protocol):
    """Synchronous tape storage."""

    def list_tapes(self) -> list[str]: ...

    def reset(self, tape: str) -> None: ...

    def fetch_all(self, query: TapeQuery) -> Iterable[TapeEntry]: ...

    # The reference's stores return None; hookline's return the stored entry (with its id).
    def append(self, tape: str, entry: TapeEntry) -> object: ...


@runtime_checkable
class AsyncTapeStore(Protocol):
    """Asynchronous tape storage; the framework always talks to stores this way."""

    async def list_tapes(self) -> list[str]: ...

    async def reset(self, tape: str) -> None: ...

    async def fetch_all(self, query: TapeQuery) -> Iterable[TapeEntry]: ...

    async def append(self, tape: str, entry: TapeEntry) -> object: ...


@runtime_checkable
class BatchTapeStore(TapeStore, Protocol):
    """A TapeStore that can also append several entries to one tape in one transaction.

    `append_many(tape, entries, bootstrap=None)` appends `entries` in order, contiguously
    (no other writer's entry lands between them) and atomically (all or none). When
    `bootstrap` is given and the tape holds no `anchor` entry yet, it is appended first,
    in the same transaction: the check and the insert cannot be separated by another
    writer, so a tape gets exactly one such anchor however many writers race. Returns
    the stored entries (the bootstrap anchor first when it was written). Stores with only
    `append` (the reference protocol) remain valid; callers fall back to one `append` per
    entry for them, without these guarantees.
    """

    def append_many(
        self, tape: str, entries: Sequence[TapeEntry], *, bootstrap: TapeEntry | None = None
    ) -> list[TapeEntry]: ...


@runtime_checkable
class AsyncBatchTapeStore(AsyncTapeStore, Protocol):
    """The asynchronous form of BatchTapeStore."""

    async def append_many(
        self, tape: str, entries: Sequence[TapeEntry], *, bootstrap: TapeEntry | None = None
    ) -> list[TapeEntry]: ...


def is_async_store(store: object) -> bool:
    """True when the store's `append` is a coroutine function (the contract's test)."""
    append = getattr(store, "append", None)
    if append is None:
        return False
    if inspect.iscoroutinefunction(append):
        return True
    call = getattr(append, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return call is not None and inspect.iscoroutinefunction(call)


@runtime_checkable
class TapeSidecar(Protocol):
    """A named tape attached to a session tape; its other abilities are its own."""

    name: str


@dataclass(frozen=True)
class TapeContext:
    """How tape entries become model context.

    `anchor`: LAST_ANCHOR (entries after the most recent anchor), a name (after that
    anchor), or None (the whole tape). `window`, when set, keeps only the last `window`
    of those entries, so reading the context costs the same however long the tape is.
    `select`, when set, turns the selected entries into messages (it may return them or
    a coroutine of them).
    """

    anchor: str | None = LAST_ANCHOR
    select: Callable[[list[TapeEntry], TapeContext], Any | Awaitable[Any]] | None = None
    state: dict[str, Any] = field(default_factory=dict)
    window: int | None = None

    def build_query(self, query: TapeQuery) -> TapeQuery:
        """Apply the anchor rule and the window to `query`; None leaves them unrestricted."""
        if self.window is not None:
            query = query.tail(self.window)
        if self.anchor is None:
            return query
        if self.anchor is LAST_ANCHOR:
            return query.last_anchor()
        return query.after_anchor(self.anchor)


def _parse_bound(value: DateBound, *, is_end: bool) -> datetime:
    """Turn a date bound into an aware datetime; a bare end date means the end of that day."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime.combine(value, time.max if is_end else time.min)
    else:
        text = str(value).strip()
        try:
            if len(text) == 10:  # YYYY-MM-DD, a whole day
                day = date.fromisoformat(text)
                moment = datetime.combine(day, time.max if is_end else time.min)
            else:
                moment = datetime.fromisoformat(text)
        except ValueError as exc:
            raise HooklineError(ErrorKind.invalid_input, f"Invalid date bound: {value!r}") from exc
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _entry_moment(entry: TapeEntry) -> datetime:
    try:
        moment = datetime.fromisoformat(entry.date)
    except ValueError as exc:
        raise HooklineError(
            ErrorKind.invalid_input, f"Tape entry {entry.id} has an invalid date: {entry.date!r}"
        ) from exc
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _last_anchor_index(entries: list[TapeEntry], name: str | None) -> int:
    for index in range(len(entries) - 1, -1, -1):
        entry = entries[index]
        if entry.kind == "anchor" and (name is None or entry.payload.get("name") == name):
            return index
    return -1


def _next_anchor_index(entries: list[TapeEntry], name: str, start: int) -> int:
    for index in range(start, len(entries)):
        entry = entries[index]
        if entry.kind == "anchor" and entry.payload.get("name") == name:
            return index
    return -1


def _search_text(entry: TapeEntry) -> str:
    payload = json.dumps(entry.payload, ensure_ascii=False, default=str)
    meta = json.dumps(entry.meta, ensure_ascii=False, default=str)
    return f"{payload}\n{meta}".casefold()


def apply_query(entries: Iterable[TapeEntry], query: TapeQuery) -> list[TapeEntry]:
    """Reference interpretation of a query over one tape's entries (in tape order).

    Anchors are entries of kind `anchor` whose payload `name` names them. Order of
    filtering: anchor slice (exclusive of the anchors), dates (inclusive), kinds, text,
    then the tail keeps the last matches and the limit the first of those. Missing
    anchors raise HooklineError `not_found`; an inverted or invalid date range raises
    `invalid_input`.
    """
    selected = list(entries)

    if query.anchor_range is not None:
        start_name, end_name = query.anchor_range
        start = _last_anchor_index(selected, start_name)
        if start < 0:
            raise HooklineError(ErrorKind.not_found, f"Anchor '{start_name}' was not found.")
        end = _next_anchor_index(selected, end_name, start + 1)
        if end < 0:
            raise HooklineError(
                ErrorKind.not_found, f"Anchor '{end_name}' was not found after '{start_name}'."
            )
        selected = selected[start + 1 : end]
    elif query.anchor is LAST_ANCHOR:
        start = _last_anchor_index(selected, None)
        if start < 0:
            raise HooklineError(ErrorKind.not_found, "No anchor found in tape.")
        selected = selected[start + 1 :]
    elif query.anchor is not None:
        start = _last_anchor_index(selected, query.anchor)
        if start < 0:
            raise HooklineError(ErrorKind.not_found, f"Anchor '{query.anchor}' was not found.")
        selected = selected[start + 1 :]

    if query.date_range is not None:
        low = _parse_bound(query.date_range[0], is_end=False)
        high = _parse_bound(query.date_range[1], is_end=True)
        if low > high:
            raise HooklineError(
                ErrorKind.invalid_input,
                f"Start date {query.date_range[0]!s} is after end date {query.date_range[1]!s}.",
            )
        selected = [entry for entry in selected if low <= _entry_moment(entry) <= high]

    if query.kind_filter:
        wanted = set(query.kind_filter)
        selected = [entry for entry in selected if entry.kind in wanted]

    if query.text_filter:
        needle = query.text_filter.casefold()
        selected = [entry for entry in selected if needle in _search_text(entry)]

    if query.tail_entries is not None:
        selected = selected[-query.tail_entries :] if query.tail_entries else []
    if query.max_entries is not None:
        selected = selected[: query.max_entries]
    return selected
