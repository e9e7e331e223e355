"""BackgroundProcesses and its lifespan: every background process group is gone when the
running() scope exits, normally, by an exception or by cancellation."""

from __future__ import annotations

import os
import time
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from procs import is_gone, read_pids

from hookline.builtins.host.background import BackgroundProcesses
from hookline.builtins.host.environment import LocalEnvironment
from hookline.kernel import Framework, hookimpl
from hookline.kernel.errors import ErrorKind, HooklineError

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX")


class LifespanPlugin:
    """A test plugin that hands the registry's lifespan to running()."""

    def __init__(self, processes: BackgroundProcesses) -> None:
        self.processes = processes

    @hookimpl
    def provide_lifespan(self):
        return self.processes.lifespan()


def make_framework(workspace: Path, processes: BackgroundProcesses) -> Framework:
    framework = Framework(workspace=workspace)
    framework.registry.register(LifespanPlugin(processes), name="lifespan-test")
    return framework


async def start_family(processes: BackgroundProcesses, workspace: Path) -> list[int]:
    """Start a mix of background commands and return every pid they create.

    - a plain sleep (the shell execs it or waits for it);
    - a shell that ignores SIGTERM (`trap '' TERM`, inherited by its children) with a
      child and a grandchild that ignore it too, so only SIGKILL ends them;
    - a shell that exits at once, leaving an orphan in its process group.
    """
    pids: list[int] = []
    first = await processes.start("echo $$ > plain.pid; exec sleep 60", cwd=workspace)
    pids += await read_pids(workspace / "plain.pid", 1)
    stubborn = (
        "trap '' TERM; echo $$ >> stubborn.pid; "
        "sleep 60 & echo $! >> stubborn.pid; "
        "sh -c 'sleep 60 & echo $! >> stubborn.pid; wait' & echo $! >> stubborn.pid; "
        "wait"
    )
    second = await processes.start(stubborn, cwd=workspace)
    pids += await read_pids(workspace / "stubborn.pid", 4)
    orphan = "sleep 60 > /dev/null 2>&1 & echo $! > orphan.pid"
    third = await processes.start(orphan, cwd=workspace)
    pids += await read_pids(workspace / "orphan.pid", 1)
    assert [first, second, third] == [info.id for info in processes.list()]
    assert not any(is_gone(pid) for pid in pids)
    return pids


@pytest.mark.anyio
async def test_everything_is_gone_after_a_normal_exit(tmp_path: Path) -> None:
    processes = BackgroundProcesses()
    framework = make_framework(tmp_path, processes)
    async with framework.running():
        assert processes.active
        pids = await start_family(processes, tmp_path)
        started = time.monotonic()
    elapsed = time.monotonic() - started

    assert [pid for pid in pids if not is_gone(pid)] == []
    # The stubborn group ignored SIGTERM: it took the 3 s grace, then SIGKILL.
    assert 2.5 <= elapsed < 15
    assert not processes.active
    assert processes.list() == []


@pytest.mark.anyio
async def test_everything_is_gone_after_an_exception(tmp_path: Path) -> None:
    processes = BackgroundProcesses(stop_grace=0.5)
    framework = make_framework(tmp_path, processes)
    pids: list[int] = []
    with pytest.raises(RuntimeError, match="boom"):
        async with framework.running():
            pids = await start_family(processes, tmp_path)
            raise RuntimeError("boom")
    assert pids
    assert [pid for pid in pids if not is_gone(pid)] == []


@pytest.mark.anyio
async def test_everything_is_gone_after_cancellation(tmp_path: Path) -> None:
    processes = BackgroundProcesses(stop_grace=0.5)
    framework = make_framework(tmp_path, processes)
    pids: list[int] = []
    with anyio.CancelScope() as scope:
        async with framework.running():
            pids = await start_family(processes, tmp_path)
            scope.cancel()
            await anyio.sleep(30)
    assert scope.cancelled_caught
    assert pids
    assert [pid for pid in pids if not is_gone(pid)] == []


@pytest.mark.anyio
async def test_processes_started_through_the_environment_are_owned(tmp_path: Path) -> None:
    processes = BackgroundProcesses(stop_grace=0.5)
    env = LocalEnvironment(tmp_path, processes=processes)
    (tmp_path / "sub").mkdir()
    async with asynccontextmanager(processes.lifespan)():
        process_id = await env.start_background("echo $$ > ../bg.pid; exec sleep 60", cwd="sub")
        assert processes.get(process_id).cwd == str(tmp_path / "sub")
        [pid] = await read_pids(tmp_path / "bg.pid", 1)
        with pytest.raises(HooklineError, match="outside the workspace"):
            await env.start_background("true", cwd="..")
    assert is_gone(pid)


@pytest.mark.anyio
async def test_start_outside_the_scope_is_refused(tmp_path: Path) -> None:
    processes = BackgroundProcesses()
    with pytest.raises(HooklineError, match=r"inside framework\.running\(\)") as caught:
        await processes.start("sleep 60", cwd=tmp_path)
    assert caught.value.kind is ErrorKind.config


@pytest.mark.anyio
async def test_list_output_and_stop(tmp_path: Path) -> None:
    processes = BackgroundProcesses(stop_grace=0.5)
    async with asynccontextmanager(processes.lifespan)():
        process_id = await processes.start(
            "echo hello; echo oops >&2; echo $$ > me.pid; exec sleep 60", cwd=tmp_path
        )
        [pid] = await read_pids(tmp_path / "me.pid", 1)
        [info] = processes.list()
        assert (info.id, info.pid, info.running, info.stopped) == (process_id, pid, True, False)
        assert "running" in info.describe()
        output = await processes.output(process_id)
        assert "hello\n" in output and "oops\n" in output  # stderr is merged in

        stopped = await processes.stop(process_id)
        assert stopped.stopped and not stopped.running
        assert stopped.returncode is not None and stopped.returncode < 0
        assert "stopped" in stopped.describe()
        assert is_gone(pid)
        assert "hello" in await processes.output(process_id)  # output outlives the process

        finished = await processes.start("exit 7", cwd=tmp_path)
        with anyio.fail_after(5):
            while processes.get(finished).running:
                await anyio.sleep(0.02)
        assert processes.get(finished).describe().endswith("exited with status 7: exit 7")
        assert not processes.get(finished).stopped


@pytest.mark.anyio
async def test_output_returns_the_tail(tmp_path: Path) -> None:
    processes = BackgroundProcesses(tail_bytes=100)
    async with asynccontextmanager(processes.lifespan)():
        process_id = await processes.start("seq 1 2000", cwd=tmp_path)
        with anyio.fail_after(5):
            while processes.get(process_id).running:
                await anyio.sleep(0.02)
        output = await processes.output(process_id)
        assert output.startswith("[... earlier output omitted; last 100 bytes follow]\n")
        assert output.endswith("1999\n2000\n")
        assert (await processes.output(process_id, max_bytes=5)).endswith("2000\n")


@pytest.mark.anyio
async def test_unknown_ids_are_not_found(tmp_path: Path) -> None:
    processes = BackgroundProcesses()
    async with asynccontextmanager(processes.lifespan)():
        await processes.start("true", cwd=tmp_path)
        for call in (processes.output, processes.stop):
            with pytest.raises(HooklineError, match=r"no background process 'bg9'.*known: bg1"):
                await call("bg9")
        with pytest.raises(HooklineError) as caught:
            processes.get("bg9")
        assert caught.value.kind is ErrorKind.not_found


@pytest.mark.anyio
async def test_the_log_directory_is_removed_and_ids_stay_unique(tmp_path: Path) -> None:
    processes = BackgroundProcesses()
    async with asynccontextmanager(processes.lifespan)():
        first = await processes.start("echo one", cwd=tmp_path)
        assert processes._directory is not None
        directory = processes._directory.path
        assert os.path.isdir(directory)
    assert not os.path.exists(directory)
    async with asynccontextmanager(processes.lifespan)():
        second = await processes.start("echo two", cwd=tmp_path)
    assert (first, second) == ("bg1", "bg2")


@pytest.mark.anyio
async def test_the_lifespan_cannot_be_entered_twice(tmp_path: Path) -> None:
    processes = BackgroundProcesses()
    async with asynccontextmanager(processes.lifespan)():
        with pytest.raises(RuntimeError, match="already active"):
            async with asynccontextmanager(processes.lifespan)():
                pass
        assert processes.active
