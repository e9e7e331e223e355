"""Process-table helpers shared by the tests that check nothing is left running."""

from __future__ import annotations

import os
from pathlib import Path

import anyio


def is_gone(pid: int) -> bool:
    """No such process, or only a zombie: it has exited and waits for a reaper that may
    never come (PID 1 in these sandboxes does not reap orphans)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.rpartition(b")")[2].split()[0] in (b"Z", b"X")


async def wait_gone(pids: list[int], timeout: float = 5.0) -> list[int]:
    """Poll until every pid is gone; return those still running after `timeout`."""
    with anyio.move_on_after(timeout):
        while any(not is_gone(pid) for pid in pids):
            await anyio.sleep(0.05)
    return [pid for pid in pids if not is_gone(pid)]


async def read_pids(path: Path, count: int, timeout: float = 10.0) -> list[int]:
    """The first `count` pids written (one per line or word) to `path`, once they are."""
    with anyio.fail_after(timeout):
        while True:
            if path.exists():
                words = path.read_text().split()
                if len(words) >= count:
                    return [int(word) for word in words[:count]]
            await anyio.sleep(0.02)
