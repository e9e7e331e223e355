"""A background process's log stays bounded on disk while it runs, and its tail reads
right: the start is freed under the writer (a punched hole), never truncated."""

from __future__ import annotations

import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from hookline.builtins.host.background import BackgroundProcesses
from hookline.builtins.host.logfile import read_tail, trim

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
