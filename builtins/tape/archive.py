"""Tape archives: a tape's entries as a private JSON-lines file (`Tape.archive`,
`hookline sessions archive`), and a session archived or deleted whole."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio.from_thread
import anyio.to_thread

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import AsyncTapeStore, TapeEntry, TapeQuery, TapeStore

from ..privacy.files import replacing_private_file
from ..store.asyncstore import as_async_store, inner_store, reset_through, tape_pages
from ..store.entries import SIDECAR_MARKER

__all__ = ["archive_session", "delete_session", "file_safe", "write_archive"]

ARCHIVE_ATTEMPTS = 3
"""Times a session is archived again when a turn ended while it was written."""


def file_safe(name: str) -> str:
    return name.replace("/", "_").replace("\\", "_")


def _entry_record(entry: TapeEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "kind": entry.kind,
        "payload": entry.payload,
        "meta": entry.meta,
        "date": entry.date,
    }


async def write_archive(path: Path, pages: AsyncIterable[Sequence[TapeEntry]]) -> int:
    """Write the entries of `pages` to `path` as JSON lines (one record per entry), mode
    0600, all or nothing (`Tape.archive`, `hookline sessions archive`); returns how many.

    Private from the first byte (a tape holds the whole conversation), fsynced, renamed.
    One page at a time is held and written, in a worker thread that asks the event loop
    for the next one, so a tape of gigabytes is archived in the memory of a page."""
    iterator = aiter(pages)

    async def next_page() -> Sequence[TapeEntry] | None:
        return await anext(iterator, None)

    def write_all() -> int:
        written = 0
        with replacing_private_file(path) as handle:
            while (page := anyio.from_thread.run(next_page)) is not None:
                handle.write("".join(json.dumps(_entry_record(entry), ensure_ascii=False)
                                     + "\n" for entry in page).encode("utf-8"))
                written += len(page)
        return written

    try:
        return await anyio.to_thread.run_sync(write_all)
    finally:  # a generator left at a page by a failed write is closed now
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()


async def _session_tapes(store: AsyncTapeStore, tape: str,
                         sidecars: Sequence[str]) -> list[str]:
    """The tape and the sidecar tapes of the mounted sidecars that hold entries."""
    names = [tape]
    for sidecar in sidecars:
        name = f"{tape}{SIDECAR_MARKER}{sidecar}"
        if list(await store.fetch_all(TapeQuery(name).limit(1))):
            names.append(name)
    return names


async def archive_session(store: TapeStore | AsyncTapeStore, tape: str, directory: Path,
                          sidecars: Sequence[str] = (), label: str = "") -> list[Path]:
    """Write the session's tape and sidecar tapes to JSON-lines files in `directory`
    (`<label>__<tape>.<stamp>.jsonl`, mode 0600), then remove them from the store. Nothing
    is removed unless every file was written, nor while a turn that ended meanwhile is not
    in them: the session is then archived again. Returns the files."""
    async_store = as_async_store(store)
    _remove_abandoned(directory)
    prefix = re.sub(r"[^A-Za-z0-9._-]", "_", label)[:60] + "__" if label else ""
    # Unique to this archive: another one of the session at the same second must neither
    # replace its files nor remove them.
    stamp = f"{datetime.now().astimezone():%Y%m%dT%H%M%S}-{secrets.token_hex(2)}"
    for _attempt in range(ARCHIVE_ATTEMPTS):
        if await _running_on(async_store, tape):
            raise HooklineError(ErrorKind.temporary, (
                f"a turn of the session {tape} is running (in another process): the "
                f"session is kept whole; archive it once that turn has ended"))
        if not list(await async_store.fetch_all(TapeQuery(tape).limit(1))):
            raise HooklineError(ErrorKind.invalid_input, (
                f"the session {tape} holds nothing (archived or deleted meanwhile, by "
                f"another process?): no archive was written"))
        written: list[tuple[str, Path, int]] = []
        for name in await _session_tapes(async_store, tape, sidecars):
            path = directory / f"{prefix}{file_safe(name)}.{stamp}.jsonl"  # a sidecar's "../"
            seen = [0]
            try:
                await write_archive(path, _noting_last(tape_pages(async_store, name), seen))
            except OSError as exc:  # a full disk, say: no half of an archive is left behind
                _remove(written)
                raise HooklineError(
                    ErrorKind.temporary,
                    f"could not write the archive {path} ({exc.strerror or exc}): the "
                    f"session is kept whole and no archive file is left; free disk space "
                    f"(or choose another home) and try again", {"path": str(path)}) from exc
            written.append((name, path, seen[0]))
        # The session's own tape first: a turn lands on it with its sidecars' entries at
        # once, so a sidecar that grows after it was removed holds a later turn's only.
        if written[0][2] and not await reset_through(async_store, tape, written[0][2]):
            _remove(written)
            continue
        for name, _, last in written[1:]:
            await reset_through(async_store, name, last)
        return [path for _, path, _ in written]
    raise HooklineError(ErrorKind.temporary, (
        f"the session {tape} went on while it was archived, {ARCHIVE_ATTEMPTS} times: it "
        f"is kept whole and no archive file is left; archive it when no turn of it runs"))


async def _running_on(store: AsyncTapeStore, tape: str) -> bool:
    """Whether a run of another process is writing `tape` now: its entries land on it
    when it ends, which an archive made meanwhile would never hold."""
    journaled = getattr(inner_store(store), "journaled_meta", None)
    return journaled is not None and bool(await journaled(tape))


async def _noting_last(pages: AsyncGenerator[list[TapeEntry], None], last: list[int]
                       ) -> AsyncGenerator[list[TapeEntry], None]:
    """`pages`, keeping the id of the last entry passed on in `last`."""
    async for page in pages:
        last[0] = page[-1].id
        yield page


ABANDONED_AFTER = 600.0
"""Seconds without a write after which an archive's temporary file is abandoned: an
archive killed before its rename (SIGKILL) leaves one, with a whole session in it."""


def _remove_abandoned(directory: Path) -> None:
    """Remove the temporary files of archives killed part way (an archive being written
    meanwhile writes its own at every page, so it is never this old)."""
    now = time.time()
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            if name.startswith(".") and ".jsonl." in name and name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    if now - entry.stat(follow_symlinks=False).st_mtime > ABANDONED_AFTER:
                        os.unlink(entry.path)


def _remove(written: list[tuple[str, Path, int]]) -> None:
    for _, path, _ in written:
        path.unlink(missing_ok=True)


async def delete_session(store: TapeStore | AsyncTapeStore, tape: str,
                         sidecars: Sequence[str] = ()) -> int:
    """Remove the session's tape and sidecar tapes; returns the entries removed, counted by
    each tape's last id (ids are gapless from 1), so that a tape of gigabytes of spilled
    outputs is not read into memory only to be counted."""
    async_store = as_async_store(store)
    removed = 0
    for name in await _session_tapes(async_store, tape, sidecars):
        last = list(await async_store.fetch_all(TapeQuery(name).tail(1)))
        removed += last[-1].id if last else 0
        await async_store.reset(name)
    return removed
