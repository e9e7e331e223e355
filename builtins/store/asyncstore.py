"""Adapting any tape store to the async protocol the framework talks to."""

from __future__ import annotations

from functools import partial
from typing import Any, cast

import anyio.to_thread

from hookline.kernel.tape import AsyncTapeStore, TapeEntry, TapeQuery, TapeStore, is_async_store

__all__ = ["AsyncStoreAdapter", "as_async_store"]

_METHODS = ("list_tapes", "reset", "fetch_all", "append")


class AsyncStoreAdapter:
    """An AsyncTapeStore over a sync TapeStore: every call runs in a worker thread.

    Blocking I/O therefore never runs on the event loop thread. A call that has started
    in its thread is not abandoned on cancellation (anyio's default): an append either
    completes and is reported, or never started, so a cancelled caller cannot leave the
    store half-way through a call it believes did not happen. `fetch_all` materialises
    the result in the worker thread, so a lazy iterable cannot do I/O on the loop either.
    """

    def __init__(self, store: TapeStore) -> None:
        self.store = store

    async def list_tapes(self) -> list[str]:
        return list(await anyio.to_thread.run_sync(self.store.list_tapes))

    async def reset(self, tape: str) -> None:
        await anyio.to_thread.run_sync(self.store.reset, tape)

    async def fetch_all(self, query: TapeQuery) -> list[TapeEntry]:
        return await anyio.to_thread.run_sync(_fetch_list, self.store, query)

    async def append(self, tape: str, entry: TapeEntry) -> Any:
        """Whatever the sync store's append returns (the builtin stores: the stored entry)."""
        return await anyio.to_thread.run_sync(partial(self.store.append, tape, entry))

    def __repr__(self) -> str:
        return f"AsyncStoreAdapter({self.store!r})"


def _fetch_list(store: TapeStore, query: TapeQuery) -> list[TapeEntry]:
    return list(store.fetch_all(query))


def as_async_store(store: TapeStore | AsyncTapeStore) -> AsyncTapeStore:
    """The store itself when it is async (its `append` is a coroutine function), else an
    AsyncStoreAdapter running each call in a worker thread.

    Raises TypeError for an object missing any of the four store methods.
    """
    missing = [name for name in _METHODS if not callable(getattr(store, name, None))]
    if missing:
        raise TypeError(f"{type(store).__name__} is not a tape store: missing {', '.join(missing)}")
    if is_async_store(store):
        return cast(AsyncTapeStore, store)
    return cast(AsyncTapeStore, AsyncStoreAdapter(cast(TapeStore, store)))
