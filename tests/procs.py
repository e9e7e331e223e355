"""Process-table helpers shared by the tests that check nothing is left running."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio

T = TypeVar("T")


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
    """The first `count` pids written (one per line or word) to `path`, once they are, as
    this process sees them (a sandboxed command writes the pids of its pid namespace)."""
    with anyio.fail_after(timeout):
        while True:
            if path.exists():
                words = path.read_text().split()
                if len(words) >= count:
                    return [host_pid(int(word)) for word in words[:count]]
            await anyio.sleep(0.02)


async def pids_while_running(work: Callable[[], Awaitable[T]], *files: Path) -> tuple[T, list[int]]:
    """Await `work()` while reading the pid written to each of `files`: read while the
    processes live, so a sandbox's pids are translated to this process's."""
    pids: list[int] = []

    async def collect() -> None:
        for path in files:
            pids.extend(await read_pids(path, 1))

    async with anyio.create_task_group() as group:
        group.start_soon(collect)
        result = await work()
    return result, pids


GONE = 2**31 - 1
"""A pid no process has: what `host_pid` gives for a sandboxed process that has ended."""


def host_pid(pid: int) -> int:
    """The pid, in this process's pid namespace, of the process a sandbox numbers `pid`:
    the one among this process's descendants whose innermost pid it is (the latest started
    when older sandboxes hold one too: the pid was just written by a live process);
    `GONE` when a sandbox of ours is running but has no such process; `pid` itself when
    no sandbox is, or when it is a process of ours outside any."""
    mine = os.getpid()
    sandboxed = False
    found: list[tuple[int, int]] = []  # (start time, pid)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            start = int((entry / "stat").read_text().rpartition(")")[2].split()[19])
        except (OSError, IndexError, ValueError):
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        numbers = fields.get("NSpid", "").split()
        if len(numbers) > 1 and _descends_from(int(entry.name), mine):
            sandboxed = True
            if int(numbers[-1]) == pid:
                found.append((start, int(entry.name)))
    if found:
        return max(found)[1]
    if sandboxed and not _unconfined_descendant(pid, mine):
        return GONE
    return pid


def _unconfined_descendant(pid: int, ancestor: int) -> bool:
    """Whether `pid` is a process of ours started outside any sandbox (a sandbox another
    test just closed may still be ending beside it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return len(fields.get("NSpid", "").split()) == 1 and _descends_from(pid, ancestor)


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, IndexError, ValueError):
            return False
    return False
