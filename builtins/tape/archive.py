"""Tape archives: a tape's entries as a private JSON-lines file (`Tape.archive`,
`hookline sessions archive`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, Sequence
from pathlib import Path
from typing import Any

import anyio.from_thread
import anyio.to_thread

from hookline.kernel.tape import TapeEntry

from ..privacy.files import replacing_private_file

__all__ = ["file_safe", "write_archive"]


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
