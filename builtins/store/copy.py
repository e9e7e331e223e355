"""Copying every tape of one store into another (`hookline store copy`).

A location is a SQLite file path or a PostgreSQL URL, either way round. Each tape, sidecar
tapes included, is read and written a page at a time (`tape_pages`: memory holds one
page, whatever the tape's size), each page with one `append_many` (one transaction), so
an interrupted copy leaves every tape whole or cut between two pages; the ids come out
equal because a builtin store's ids are gapless from 1. A destination holding any tape is
refused, unless `into_existing`: then tapes it already holds must be identical to the
source's (they are skipped) or their start (they are completed: that is how an
interrupted copy is resumed), and a differing one stops the copy before anything is
written. At the end every copied tape is read back from both stores and compared, entry by
entry (id, kind, payload, meta, date).

Opening the stores is what any hookline command does: runs left by dead processes are
finished (marked interrupted) first. Runs still in progress in the source are not copied:
stop the gateways before copying.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, replace
from os import PathLike
from pathlib import Path
from typing import Any, Final

import anyio.to_thread

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import TapeEntry, TapeQuery

from .asyncstore import AsyncStoreAdapter, tape_pages
from .sqlite.store import SQLiteTapeStore
from .url import is_postgres_url, redact_url

__all__ = ["CopyReport", "copy_store", "shown"]

Location = str | PathLike[str]

PROGRESS_ENTRIES: Final = 10_000
"""A long tape's copy says how far it is every this many entries."""


@dataclass(frozen=True)
class CopyReport:
    """What `copy_store` did: tapes and entries copied, tapes found already there."""

    tapes: int
    entries: int
    skipped: int
    pending_runs: int


def shown(location: Location) -> str:
    """The location as it may be printed (a URL without its password)."""
    return redact_url(str(location))


@asynccontextmanager
async def open_location(location: Location, *, create: bool) -> AsyncIterator[Any]:
    """The store at `location`, open for the block: a PostgresTapeStore for a URL, else a
    SQLiteTapeStore behind an AsyncStoreAdapter. A missing SQLite file is `not_found`
    unless `create`."""
    if is_postgres_url(location):
        from .postgres.store import PostgresTapeStore

        async with PostgresTapeStore(str(location)) as store:
            yield store
        return
    path = Path(location).expanduser()
    if not create and not path.is_file():
        raise HooklineError(ErrorKind.not_found, f"No tape store at {path}.")
    sqlite = await anyio.to_thread.run_sync(SQLiteTapeStore, path)
    try:
        yield AsyncStoreAdapter(sqlite)
    finally:
        await anyio.to_thread.run_sync(sqlite.close)


async def _all_tapes(store: Any) -> list[str]:
    if isinstance(store, AsyncStoreAdapter):
        return list(await anyio.to_thread.run_sync(store.store.list_all_tapes))  # type: ignore[attr-defined]
    return list(await store.list_all_tapes())


async def _pending(store: Any) -> int:
    if isinstance(store, AsyncStoreAdapter):
        return int(await anyio.to_thread.run_sync(store.store.pending_runs))  # type: ignore[attr-defined]
    return int(await store.pending_runs())


async def _length(store: Any, tape: str) -> int:
    """The tape's entries, counted by its last id (ids are gapless from 1)."""
    last = list(await store.fetch_all(TapeQuery(tape).tail(1)))
    return last[-1].id if last else 0


async def _held(src: Any, dst: Any, tape: str) -> int | None:
    """How many of the source tape's first entries the destination's tape is made of:
    all of them when the tapes are equal, fewer when a copy was interrupted between two
    pages, None when the destination's differs otherwise. Compared a page at a time
    (pages of both hold the same ids)."""
    held = 0
    async with aclosing(tape_pages(src, tape)) as source, \
            aclosing(tape_pages(dst, tape)) as target:
        async for theirs in target:
            ours: list[TapeEntry] = await anext(source, [])
            if theirs != ours[:len(theirs)]:
                return None
            held += len(theirs)
    return held


async def _copy_tape(src: Any, dst: Any, tape: str, held: int,
                     progress: Callable[[str], None]) -> int:
    """Append the source tape's entries after the first `held` to the destination, a page
    per transaction; returns how many."""
    copied = 0
    async with aclosing(tape_pages(src, tape, after=held)) as pages:
        async for page in pages:
            await dst.append_many(tape, [replace(entry, id=0) for entry in page])
            copied += len(page)
            if copied % PROGRESS_ENTRIES < len(page):
                progress(f"  {tape}: {held + copied:,} entries so far")
    return copied


async def copy_store(
    source: Location,
    target: Location,
    *,
    into_existing: bool = False,
    progress: Callable[[str], None] = lambda line: None,
) -> CopyReport:
    """Copy every tape of `source` into `target` (see the module doc); `progress` gets one
    line per tape, and one per `PROGRESS_ENTRIES` entries of a long one. Raises
    HooklineError: `invalid_input` for a refused destination or a differing tape,
    `unknown` when the verification finds a difference."""
    if str(source) == str(target) or (
        not is_postgres_url(source) and not is_postgres_url(target)
        and Path(source).expanduser().resolve() == Path(target).expanduser().resolve()
    ):
        raise HooklineError(ErrorKind.invalid_input, "The source and destination are the same.")
    async with open_location(source, create=False) as src, \
            open_location(target, create=True) as dst:
        tapes = await _all_tapes(src)
        existing = set(await _all_tapes(dst))
        if existing and not into_existing:
            raise HooklineError(
                ErrorKind.invalid_input,
                f"The destination {shown(target)} already holds {len(existing)} tape(s); copy "
                f"into an empty store, or pass --into-existing to add the missing tapes (tapes "
                f"it holds must then be identical to the source's, or their start).",
            )
        held: dict[str, int] = {}
        for tape in sorted(existing.intersection(tapes)):
            count = await _held(src, dst, tape)
            if count is None:
                raise HooklineError(
                    ErrorKind.invalid_input,
                    f"Tape {tape!r} is in both stores with different entries; nothing was "
                    f"copied. Remove it from the destination or copy into another store.",
                )
            held[tape] = count
        todo = [tape for tape in tapes
                if tape not in held or held[tape] < await _length(src, tape)]
        copied = 0
        for number, tape in enumerate(todo, 1):
            count = await _copy_tape(src, dst, tape, held.get(tape, 0), progress)
            copied += count
            progress(f"copied tape {number}/{len(todo)} {tape}: {count} entries")
        progress(f"verifying {len(todo)} tape(s)")
        for tape in todo:
            if await _held(src, dst, tape) != await _length(src, tape):
                raise HooklineError(
                    ErrorKind.unknown,
                    f"Verification failed: tape {tape!r} differs after the copy (was the "
                    f"source written to meanwhile? stop the gateways and copy again with "
                    f"--into-existing after removing that tape).",
                )
        return CopyReport(len(todo), copied, len(tapes) - len(todo), await _pending(src))
