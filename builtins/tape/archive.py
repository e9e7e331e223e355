"""Tape archives: a tape's entries as a private JSON-lines file (`Tape.archive`,
`hookline sessions archive`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from hookline.kernel.tape import TapeEntry

from ..privacy.files import write_private_file

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


async def write_archive(path: Path, entries: list[TapeEntry]) -> None:
    """Write `entries` to `path` as JSON lines (one record per entry), mode 0600, all or
    nothing (`Tape.archive`, `hookline sessions archive`)."""
    text = "".join(json.dumps(_entry_record(entry), ensure_ascii=False) + "\n"
                   for entry in entries)
    # Private from the first byte (a tape holds the whole conversation), fsynced, renamed.
    await anyio.to_thread.run_sync(write_private_file, path, text)
