"""Adapting any tape store to the async protocol the framework talks to.

Also the two optional abilities the session tape uses when a store has them, each with a
fallback for stores that only implement the four reference methods:

- `append_batch`: the store's `append_many` (contiguous, atomic, with a bootstrap anchor
  checked for and written in the same transaction), else one `append` per entry after a
  separate anchor check: another writer may then interleave or add a second anchor;
- `journal_of`: the store's run journal (`journal_write(run, tape, ops)` and
  `journal_commit(run, ops)`, sync or async, as `SQLiteTapeStore` has them), else None:
  the run is then kept in memory until it ends.

A sync store may also offer `fetch_all_async`, `append_many_async`, `journal_write_async`
and `journal_commit_async` (coroutine functions): those are awaited instead of running the
sync method in a worker thread (`SQLiteTapeStore` has them: its writer thread does the
writes, so a worker thread waiting for it would be one thread hop too many, and its reads
are cheaper than the hop). It may also offer `fetch_since_async(tape, entry_id)`, the
entries from one id on, which the kept context read extends itself with (`fetch_since`);
with a `limit` parameter too, archives and copies read the tape a page at a time
(`tape_pages`).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Callable, Sequence
from functools import partial
from typing import Any, Final, cast

import anyio.to_thread

from hookline.kernel.tape import AsyncTapeStore, TapeEntry, TapeQuery, TapeStore, is_async_store

__all__ = [
    "PAGE_ENTRIES",
    "AsyncJournal",
    "AsyncStoreAdapter",
    "append_batch",
    "as_async_store",
    "inner_store",
    "journal_of",
    "recover_abandoned",
    "reset_through",
    "scope_store",
    "tape_pages",
]

_METHODS = ("list_tapes", "reset", "fetch_all", "append")


class AsyncStoreAdapter:
    """An AsyncTapeStore over a sync TapeStore: every call runs in a worker thread, but
    for the store's own coroutine functions (the module doc).

    Blocking I/O therefore never runs on the event loop thread. A call that has started
    in its thread is not abandoned on cancellation (anyio's default): an append either
    completes and is reported, or never started, so a cancelled caller cannot leave the
    store half-way through a call it believes did not happen. `fetch_all` materialises
    the result in the worker thread, so a lazy iterable cannot do I/O on the loop either.
    """

    def __init__(self, store: TapeStore) -> None:
        self.store = store
        native = _native(store, "fetch_all")
        self._fetch_async = native if inspect.iscoroutinefunction(native) else None
        """The store's own `fetch_all_async`, looked up once: a turn reads at every step."""
        since = getattr(store, "fetch_since_async", None)
        self._fetch_since = (since if since is not None and not _overridden(
            type(store), "fetch_all", "fetch_since_async") else None)
        """Its `fetch_since_async`, unless a subclass reads in its own `fetch_all`."""

    async def list_tapes(self) -> list[str]:
        return list(await anyio.to_thread.run_sync(self.store.list_tapes))

    async def reset(self, tape: str) -> None:
        await anyio.to_thread.run_sync(self.store.reset, tape)

    async def fetch_all(self, query: TapeQuery) -> list[TapeEntry]:
        if self._fetch_async is not None:
            return list(await self._fetch_async(query))
        return await anyio.to_thread.run_sync(_fetch_list, self.store, query)

    @property
    def reads_since(self) -> bool:
        """Whether the store has a `fetch_since_async` this adapter uses."""
        return self._fetch_since is not None

    async def fetch_since(self, tape: str, entry_id: int,
                          limit: int | None = None) -> list[TapeEntry]:
        """The store's `fetch_since_async` (see `has_fetch_since`)."""
        if self._fetch_since is None:
            raise TypeError(f"{self.store!r} has no fetch_since_async")
        if limit is None:
            return list(await self._fetch_since(tape, entry_id))
        return list(await self._fetch_since(tape, entry_id, limit))

    async def append(self, tape: str, entry: TapeEntry) -> Any:
        """Whatever the sync store's append returns (the builtin stores: the stored entry)."""
        return await anyio.to_thread.run_sync(partial(self.store.append, tape, entry))

    async def append_many(
        self, tape: str, entries: Sequence[TapeEntry], *, bootstrap: TapeEntry | None = None
    ) -> list[TapeEntry]:
        """The sync store's `append_many` in one worker-thread call; for a store without
        one, one `append` per entry (in that same call), without its guarantees."""
        many = _native(self.store, "append_many")
        if inspect.iscoroutinefunction(many):
            return list(await many(tape, entries, bootstrap=bootstrap))
        if callable(many):
            return list(await anyio.to_thread.run_sync(partial(many, tape, entries,
                                                               bootstrap=bootstrap)))
        return await anyio.to_thread.run_sync(_append_each, self.store, tape, entries, bootstrap)

    def __repr__(self) -> str:
        return f"AsyncStoreAdapter({self.store!r})"


def _fetch_list(store: TapeStore, query: TapeQuery) -> list[TapeEntry]:
    return list(store.fetch_all(query))


def _anchor_query(tape: str) -> TapeQuery:
    return TapeQuery(tape).kinds("anchor").limit(1)


def _stored(result: Any, sent: TapeEntry) -> TapeEntry:
    return result if isinstance(result, TapeEntry) else sent


def _append_each(
    store: TapeStore, tape: str, entries: Sequence[TapeEntry], bootstrap: TapeEntry | None
) -> list[TapeEntry]:
    batch = list(entries)
    if bootstrap is not None and not list(store.fetch_all(_anchor_query(tape))):
        batch.insert(0, bootstrap)
    return [_stored(store.append(tape, entry), entry) for entry in batch]


async def append_batch(
    store: AsyncTapeStore,
    tape: str,
    entries: Sequence[TapeEntry],
    bootstrap: TapeEntry | None = None,
) -> list[TapeEntry]:
    """Append entries to one tape through the best the store offers (see the module doc)."""
    if has_batch(store):
        return list(await cast(Any, store).append_many(tape, entries, bootstrap=bootstrap))
    batch = list(entries)
    if bootstrap is not None and not list(await store.fetch_all(_anchor_query(tape))):
        batch.insert(0, bootstrap)
    return [_stored(await store.append(tape, entry), entry) for entry in batch]


def has_fetch_since(store: AsyncTapeStore) -> bool:
    """Whether the store reads a tape from one id on (`fetch_since`): its own
    `fetch_since` (for an adapter: its sync store's `fetch_since_async`), unless a
    subclass reads in its own `fetch_all`."""
    if isinstance(store, AsyncStoreAdapter):
        return store.reads_since
    return (getattr(store, "fetch_since", None) is not None
            and not _overridden(type(store), "fetch_all", "fetch_since"))


async def fetch_since(store: AsyncTapeStore, tape: str, entry_id: int,
                      limit: int | None = None) -> list[TapeEntry]:
    """The entries of `tape` whose id is `entry_id` or more, in id order, at most `limit`
    of them, from a store that can (`has_fetch_since`): what a kept context read asks,
    the row it holds last and those written since."""
    if limit is None:
        return list(await cast(Any, store).fetch_since(tape, entry_id))
    return list(await cast(Any, store).fetch_since(tape, entry_id, limit))


def _reads_pages(store: AsyncTapeStore) -> bool:
    if not has_fetch_since(store):
        return False
    method: Any = (store._fetch_since if isinstance(store, AsyncStoreAdapter)
                   else cast(Any, store).fetch_since)
    try:
        return "limit" in inspect.signature(method).parameters
    except (TypeError, ValueError):  # a callable without a signature Python can read
        return False


PAGE_ENTRIES: Final = 100
"""The entries a tape is read by when it is read whole (`tape_pages`)."""


async def tape_pages(store: AsyncTapeStore, tape: str, size: int = PAGE_ENTRIES,
                     after: int = 0) -> AsyncGenerator[list[TapeEntry], None]:
    """The tape's entries whose id is above `after` (all, by default) in id order, `size`
    at a time, so that archiving or copying a tape of gigabytes holds one page in memory,
    not the tape. A store that cannot read from an id on up to a limit (`fetch_since`
    with a `limit` parameter) is read whole, as one page."""
    if not _reads_pages(store):
        entries = list(await store.fetch_all(TapeQuery(tape)))
        if page := [entry for entry in entries if entry.id > after]:
            yield page
        return
    start = after + 1
    while page := await fetch_since(store, tape, start, size):
        yield page
        if len(page) < size:
            return
        start = page[-1].id + 1


def has_batch(store: AsyncTapeStore | TapeStore) -> bool:
    """Whether the store has its own `append_many` (for an adapter: its sync store)."""
    inner = inner_store(store)
    return callable(getattr(inner, "append_many", None))


class AsyncJournal:
    """A store's run journal, awaited (sync stores' calls run in worker threads)."""

    def __init__(self, write: Callable[..., Any], commit: Callable[..., Any]) -> None:
        self._write = write
        self._commit = commit

    async def write(self, run: str, tape: str, ops: Sequence[Any]) -> None:
        """Record `ops` durably under `run` before returning (see `SQLiteTapeStore`)."""
        await _call(self._write, run, tape, list(ops))

    async def commit(self, run: str, ops: Sequence[Any] = ()) -> list[TapeEntry]:
        """Apply the journal of `run`, then `ops`, to the tapes in one transaction."""
        return list(await _call(self._commit, run, list(ops)))


async def _call(function: Callable[..., Any], *args: Any) -> Any:
    if inspect.iscoroutinefunction(function):
        return await function(*args)
    return await anyio.to_thread.run_sync(partial(function, *args))


def inner_store(store: Any) -> Any:
    """The store itself: an adapter's sync store, else `store` (what its optional abilities
    are looked up on)."""
    return store.store if isinstance(store, AsyncStoreAdapter) else store


def journal_of(store: AsyncTapeStore | TapeStore) -> AsyncJournal | None:
    """The store's run journal, or None when it has none (see the module doc)."""
    inner = inner_store(store)
    write = _native(inner, "journal_write")
    commit = _native(inner, "journal_commit")
    if not callable(write) or not callable(commit):
        return None
    return AsyncJournal(write, commit)


async def recover_abandoned(store: AsyncTapeStore | TapeStore) -> list[str]:
    """Have the store finish the runs of processes that died since it was opened, where it
    can (`recover_abandoned_async`: the SQLite store); their tapes."""
    inner = inner_store(store)
    recover = getattr(inner, "recover_abandoned_async", None)
    return list(await recover()) if callable(recover) else []


async def reset_through(store: AsyncTapeStore, tape: str, last_id: int) -> bool:
    """Remove the tape's entries unless something was added after `last_id` (what was
    read of it, archived, say); whether they were removed. At once where the store has
    `reset_if_last` (`SQLiteTapeStore`), else a look at the last entry, then a reset."""
    inner = inner_store(store)
    at_once = getattr(inner, "reset_if_last", None)
    if callable(at_once):
        if inspect.iscoroutinefunction(at_once):
            return bool(await at_once(tape, last_id))
        return bool(await anyio.to_thread.run_sync(at_once, tape, last_id))
    last = list(await store.fetch_all(TapeQuery(tape).tail(1)))
    if (last[-1].id if last else 0) != last_id:
        return False
    await store.reset(tape)
    return True


def _native(store: Any, name: str) -> Any:
    """The store's `<name>_async` coroutine function when it has one and no subclass
    overrides `<name>` below where `<name>_async` is defined; else `<name>`."""
    native = getattr(store, name + "_async", None)
    sync = getattr(store, name, None)
    if not inspect.iscoroutinefunction(native) or _overridden(type(store), name):
        return sync
    return native


_OVERRIDDEN: dict[tuple[type, str, str], bool] = {}


def _overridden(cls: type, name: str, native: str = "") -> bool:
    """Whether `cls` defines `<name>` below the class defining `native` (by default
    `<name>_async`), so that the native method would skip it (a turn asks at every
    journal write and read, so the answer is kept per class)."""
    native = native or name + "_async"
    known = _OVERRIDDEN.get((cls, name, native))
    if known is None:
        native_at = next((base for base in cls.__mro__ if native in vars(base)), None)
        sync_at = next((base for base in cls.__mro__ if name in vars(base)), None)
        known = native_at is None or (sync_at is not None and not issubclass(native_at, sync_at))
        _OVERRIDDEN[(cls, name, native)] = known
    return known


def _missing_methods(store: object) -> list[str]:
    return [name for name in _METHODS if not callable(getattr(store, name, None))]


def scope_store(framework: Any) -> TapeStore | AsyncTapeStore | None:
    """The `running()` scope's tape store (None outside one, or when no plugin gave one);
    a value that is no tape store is the framework's `resource_error`, which names the
    plugin and function that gave it."""
    store = framework.get_tape_store()
    if store is not None and (missing := _missing_methods(store)):
        raise framework.resource_error(
            "provide_tape_store", "a tape store or None",
            f", which lacks {', '.join(missing)}: give it those methods (docs/tapes.md), or "
            f"return None to leave the store to the builtin plugin")
    return cast("TapeStore | AsyncTapeStore | None", store)


def as_async_store(store: TapeStore | AsyncTapeStore) -> AsyncTapeStore:
    """The store itself when it is async (its `append` is a coroutine function), else an
    AsyncStoreAdapter running each call in a worker thread.

    Raises TypeError for an object missing any of the four store methods.
    """
    if missing := _missing_methods(store):
        raise TypeError(f"{type(store).__name__} is not a tape store: missing {', '.join(missing)}")
    if is_async_store(store):
        return cast(AsyncTapeStore, store)
    return cast(AsyncTapeStore, AsyncStoreAdapter(cast(TapeStore, store)))
