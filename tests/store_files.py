"""Real store files for the tests that damage, check and back them up."""

from __future__ import annotations

from pathlib import Path

from hookline.builtins.store import SQLiteTapeStore
from hookline.kernel.tape import TapeEntry

GARBAGE = bytes((n * 131 + 17) % 256 for n in range(2048))
"""2 KB of fixed garbage (the same bytes every run, so a failure can be replayed)."""


def fill_store(path: Path) -> int:
    """About a megabyte of real entries (20 tapes of 100), closed, so the WAL is
    checkpointed into the file; returns the file's size."""
    with SQLiteTapeStore(path) as store:
        for tape in range(20):
            store.append_many(f"t{tape}", [
                TapeEntry.new("message", {"role": "user", "content": "x" * 300, "n": n})
                for n in range(100)])
    assert not Path(f"{path}-wal").exists()
    return path.stat().st_size


def damage(path: Path, offset: int | None = None) -> bytes:
    """GARBAGE written over the file at `offset` (default: 1,000 bytes past the middle, so
    it spans a page boundary); returns the damaged file's bytes."""
    with path.open("r+b") as handle:
        handle.seek(path.stat().st_size // 2 + 1000 if offset is None else offset)
        handle.write(GARBAGE)
    return path.read_bytes()
