"""A background process's log stays bounded on disk while it runs, and its tail reads
right: the start is freed under the writer (a punched hole), never truncated. A session
keeps a bounded number of finished processes."""

from __future__ import annotations

import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from hookline.builtins.host.background import KEEP_FINISHED, BackgroundProcesses
from hookline.builtins.host.logfile import read_tail, trim
from hookline.kernel.errors import HooklineError

KEEP = 64 * 1024
WRITTEN = 3_000_000

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="holes are punched with Linux's fallocate")


def on_disk(path: str) -> int:
    return os.stat(path).st_blocks * 512


def can_punch_holes(folder: Path) -> bool:
    probe = folder / "probe"
    probe.write_bytes(b"x" * (4 * KEEP))
    return trim(str(probe), KEEP // 2) > 0


@pytest.mark.anyio
async def test_a_talkative_process_keeps_a_bounded_log(tmp_path: Path) -> None:
    processes = BackgroundProcesses(stop_grace=0.5, log_keep_bytes=KEEP)
    go_on = tmp_path / "go-on"
    async with asynccontextmanager(processes.lifespan)(sweep_seconds=0.05):
        bg = await processes.start(
            f"head -c {WRITTEN} /dev/zero | tr '\\0' x; echo END\n"
            f"while [ ! -e {go_on} ]; do sleep 0.02; done; echo AFTER; exec sleep 300",
            cwd=tmp_path)
        log = processes.get(bg).log_path
        if not can_punch_holes(Path(log).parent):
            pytest.skip("this file system cannot punch holes: the log is not trimmed")
        with anyio.fail_after(20):
            while "END" not in await processes.output(bg, 100):
                await anyio.sleep(0.02)
            while on_disk(log) > 3 * KEEP:  # the next sweep frees the start
                await anyio.sleep(0.02)
        assert os.stat(log).st_size == WRITTEN + 4, "the size (the writer's offset) stays"
        go_on.touch()
        with anyio.fail_after(20):
            while "AFTER" not in (text := await processes.output(bg, 10 * WRITTEN)):
                await anyio.sleep(0.02)
    # Written after the trim at the writer's offset; all of it read back is kept output.
    assert text.endswith("x" * 1000 + "END\nAFTER\n")
    head, _, body = text.partition("\n")
    assert head.startswith("[... earlier output omitted")
    assert "\0" not in body and set(body) <= {"x", "E", "N", "D", "A", "F", "T", "R", "\n"}
    assert KEEP <= len(body) <= 2 * KEEP + 4096


def test_a_short_log_is_left_whole(tmp_path: Path) -> None:
    log = tmp_path / "bg1.log"
    log.write_bytes(b"y" * (2 * KEEP))
    assert trim(str(log), KEEP) == 0
    assert read_tail(str(log), 10 * KEEP) == (b"y" * (2 * KEEP), False)
    assert trim(str(tmp_path / "gone.log"), KEEP) == 0


@pytest.mark.anyio
async def test_a_session_keeps_its_last_finished_processes_only(tmp_path: Path) -> None:
    processes = BackgroundProcesses(stop_grace=0.5)
    async with asynccontextmanager(processes.lifespan)():
        server = await processes.start("exec sleep 300", cwd=tmp_path, owner="a")
        other = await processes.start("echo other", cwd=tmp_path, owner="b")
        started, logs = [], []
        for n in range(KEEP_FINISHED + 8):
            started.append(await processes.start(f"echo run {n}", cwd=tmp_path, owner="a"))
            logs.append(processes.get(started[-1]).log_path)
            with anyio.fail_after(10):
                while processes.get(started[-1]).running:
                    await anyio.sleep(0.01)
        # The running server and the other session's process stay; of the finished, the
        # last KEEP_FINISHED (the one started last included) do.
        assert [info.id for info in processes.list()] == [server, other, *started[8:]]
        assert await processes.output(started[-1]) == f"run {KEEP_FINISHED + 7}\n"
        assert await processes.output(started[8]) == "run 8\n"
        assert await processes.output(other, owner="b") == "other\n"
        with pytest.raises(HooklineError, match="no background process 'bg3'"):
            processes.get(started[0], owner="a")
        assert [log for log in logs[:8] if Path(log).exists()] == [], "their logs are removed"
        assert Path(logs[8]).exists()
