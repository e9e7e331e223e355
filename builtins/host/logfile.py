"""A background process's log: its tail, and its disk use kept bounded while it runs.

A background process writes its log through a descriptor of its own, at an offset only
it knows, for as long as it runs (a dev server, all day). The file cannot be truncated or
rotated under it: what it writes next would land at its old offset, after a hole, or be
lost. Punching a hole in the file's start (Linux `fallocate(FALLOC_FL_PUNCH_HOLE)`) frees
those blocks instead: the size and the writer's offset stay, the old bytes become a hole,
and `data_start` says where what is kept begins. Where the file system or the system
cannot punch holes, `trim` does nothing and the log grows as before.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
from typing import Any

__all__ = ["read_tail", "trim"]

_PUNCH_HOLE = 0x02
_KEEP_SIZE = 0x01
_BLOCK = 4096
"""The least block a hole is punched in (the file system's own when larger)."""


def read_tail(path: str, limit: int) -> tuple[bytes, bool]:
    """The last `limit` bytes of what is kept of the log, and whether earlier output is
    left out (not read, or freed by `trim`)."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            kept = data_start(handle.fileno())
            start = max(size - max(limit, 0), kept)
            handle.seek(start)
            return handle.read(), start > 0
    except FileNotFoundError:
        return b"", False


def data_start(fd: int) -> int:
    """Where the file's first byte that is not a hole lies (0 where that cannot be told)."""
    seek_data = getattr(os, "SEEK_DATA", None)
    if seek_data is None:
        return 0
    try:
        return os.lseek(fd, 0, seek_data)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # nothing but a hole: the data starts at the end
            return os.fstat(fd).st_size
        return 0


def trim(path: str, keep: int) -> int:
    """Free the start of the log at `path` once more than `2 * keep` bytes of it are kept,
    leaving at least its last `keep` bytes. Returns the bytes freed (0: nothing to do, or
    holes cannot be punched here)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return 0
    try:
        info = os.fstat(fd)
        start = data_start(fd)
        if info.st_size - start <= 2 * keep:
            return 0
        block = max(info.st_blksize, _BLOCK)  # whole blocks: no kept byte is zeroed
        end = (info.st_size - keep) // block * block
        if end <= start or not _punch(fd, end):
            return 0
        return end - start
    finally:
        os.close(fd)


def _punch(fd: int, length: int) -> bool:
    fallocate = _fallocate()
    return fallocate is not None and fallocate(fd, _PUNCH_HOLE | _KEEP_SIZE, 0, length) == 0


@functools.cache
def _fallocate() -> Any:
    """The C library's `fallocate`, typed; None where there is none (not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function = getattr(libc, "fallocate64", None) or libc.fallocate
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    function.restype = ctypes.c_int
    return function
