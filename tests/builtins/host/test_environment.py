"""LocalEnvironment: real processes, process groups, timeouts, output limits, files and the
workspace boundary."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from procs import host_pid, pids_while_running, wait_gone

from hookline.builtins.host.commands import CommandResult, run_command
from hookline.builtins.host.environment import LocalEnvironment
from hookline.builtins.host.processes import LocalProcess
from hookline.kernel.environment import Environment, Process
from hookline.kernel.errors import ErrorKind, HooklineError

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX")


# -- helpers -----------------------------------------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def env(workspace: Path) -> Iterator[LocalEnvironment]:
    """After the test its sandbox ends, and with it whatever the test left running there
    (synchronously: the fixture serves sync tests too, outside any event loop)."""
    environment = LocalEnvironment(workspace)
    yield environment
    environment._confinement.close()


# -- run ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_run_returns_exit_code_and_both_streams(env: LocalEnvironment) -> None:
    result = await env.run("echo out; echo err >&2; exit 3")
    assert result == CommandResult(3, "out\n", "err\n", timed_out=False, truncated=False)


@pytest.mark.anyio
async def test_run_argv_stdin_env_and_cwd(env: LocalEnvironment, workspace: Path) -> None:
    (workspace / "sub").mkdir()
    script = "import os, sys; print(sys.stdin.read(), os.getcwd(), os.environ['HOOK_X'])"
    result = await env.run(
        [sys.executable, "-c", script], cwd="sub", env={"HOOK_X": "42"}, stdin=b"piped"
    )
    assert result.returncode == 0
    assert result.stdout.split() == ["piped", str(workspace / "sub"), "42"]
    # The default working directory is the workspace, and PATH is still inherited.
    assert (await env.run("pwd")).stdout.strip() == str(workspace)


@pytest.mark.anyio
async def test_run_refuses_cwd_outside_workspace(env: LocalEnvironment) -> None:
    with pytest.raises(HooklineError) as caught:
        await env.run("true", cwd="..")
    assert caught.value.kind is ErrorKind.invalid_input


@pytest.mark.anyio
async def test_timeout_kills_the_whole_process_group(
    env: LocalEnvironment, workspace: Path
) -> None:
    # The shell starts a child that would sleep for a minute, then sleeps itself.
    command = "echo $$ > leader.pid; sleep 60 & echo $! > child.pid; echo started; sleep 60"
    started = time.monotonic()
    result, pids = await pids_while_running(lambda: env.run(command, timeout=1),
                                            workspace / "leader.pid", workspace / "child.pid")
    elapsed = time.monotonic() - started

    assert result.timed_out
    assert result.returncode is not None and result.returncode < 0
    assert result.stdout == "started\n"  # output written before the kill is kept
    assert elapsed < 10
    assert await wait_gone(pids) == []


@pytest.mark.anyio
async def test_child_holding_the_pipe_is_killed_at_timeout(
    env: LocalEnvironment, workspace: Path
) -> None:
    # The shell exits at once, but its child keeps stdout open: the command is not done.
    result, pids = await pids_while_running(
        lambda: env.run("sleep 60 & echo $! > child.pid", timeout=1), workspace / "child.pid")
    assert result.timed_out
    assert await wait_gone(pids) == []


@pytest.mark.anyio
async def test_leftovers_of_a_finished_command_are_killed(
    env: LocalEnvironment, workspace: Path
) -> None:
    result, pids = await pids_while_running(
        lambda: env.run("sleep 60 > /dev/null 2>&1 & echo $! > child.pid; sleep 0.5; echo done"),
        workspace / "child.pid")
    assert result.stdout == "done\n"
    assert not result.timed_out
    assert await wait_gone(pids) == []


@pytest.mark.anyio
async def test_cancelling_run_kills_the_process_group(
    env: LocalEnvironment, workspace: Path
) -> None:
    command = "echo $$ > leader.pid; sleep 60 & echo $! > child.pid; wait"
    pids: list[int] = []

    async def cancelled_run() -> None:
        # Cancelled once both processes run (not after a fixed time: a loaded machine may
        # take longer than that to start the sandbox).
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as group:
                async def cancel_once_started() -> None:
                    with anyio.fail_after(30):
                        while not (workspace / "child.pid").exists():
                            await anyio.sleep(0.02)
                    scope.cancel()

                group.start_soon(cancel_once_started)
                await env.run(command, timeout=60)
        assert scope.cancelled_caught

    _, pids = await pids_while_running(cancelled_run, workspace / "leader.pid",
                                       workspace / "child.pid")
    assert await wait_gone(pids) == []


@pytest.mark.anyio
async def test_output_limits_keep_the_head_and_drain_the_rest(env: LocalEnvironment) -> None:
    # 1 MB on each stream: far more than a pipe buffer, so the command would block if the
    # rest were not read.
    script = (
        "import sys; sys.stdout.write('a' * 1_000_000); sys.stdout.flush(); "
        "sys.stderr.write('b' * 1_000_000)"
    )
    result = await env.run([sys.executable, "-c", script], max_output=1000, timeout=30)
    assert result.returncode == 0
    assert not result.timed_out
    assert result.truncated
    assert result.stdout == "a" * 1000
    assert result.stderr == "b" * 1000


@pytest.mark.anyio
async def test_output_exactly_at_the_limit_is_not_truncated(env: LocalEnvironment) -> None:
    result = await env.run("printf 12345", max_output=5)
    assert (result.stdout, result.truncated) == ("12345", False)


@pytest.mark.anyio
async def test_truncation_that_splits_a_character_decodes(env: LocalEnvironment) -> None:
    result = await env.run("printf 'aé'", max_output=2)  # 'é' is two bytes in UTF-8
    assert result.truncated
    assert result.stdout == "a\ufffd"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"timeout": 0}, "timeout must be positive"),
        ({"max_output": -1}, "max_output must not be negative"),
    ],
)
async def test_run_rejects_bad_limits(env: LocalEnvironment, kwargs: dict, fragment: str) -> None:
    with pytest.raises(HooklineError, match=fragment) as caught:
        await env.run("true", **kwargs)
    assert caught.value.kind is ErrorKind.invalid_input


@pytest.mark.anyio
async def test_empty_commands_are_refused(env: LocalEnvironment) -> None:
    for command in ("  ", []):
        with pytest.raises(HooklineError) as caught:
            await env.spawn(command)
        assert caught.value.kind is ErrorKind.invalid_input


# -- spawn and the Process adapter -------------------------------------------------------


@pytest.mark.anyio
async def test_spawn_gives_a_kernel_process(env: LocalEnvironment) -> None:
    process = await env.spawn("cat; echo bye >&2")
    assert isinstance(process, LocalProcess)
    typed: Process = process  # the kernel protocol, checked statically
    members = ("stdout", "stderr", "returncode", "wait", "write_stdin", "close_stdin", "signal")
    assert all(hasattr(typed, member) for member in members)
    assert process.is_running()
    assert process.returncode is None
    await process.write_stdin(b"hello ")
    await process.write_stdin(b"world")
    await process.close_stdin()
    assert await process.stdout.read() == b"hello world"
    assert await process.stderr.read(-1) == b"bye\n"
    assert await process.stdout.read(10) == b""  # end of stream, no exception
    assert await process.wait() == 0
    assert process.returncode == 0
    assert not process.is_running()
    await process.signal(False)  # already gone: no error
    await process.signal(True)
    await env.close()


@pytest.mark.anyio
async def test_signal_reaches_the_whole_group(env: LocalEnvironment) -> None:
    process = await env.spawn("sleep 60 & echo $!; wait")
    child = host_pid(int((await process.stdout.read(64)).decode().strip()))
    await process.signal(False)
    assert await process.wait() < 0
    assert await wait_gone([process.pid, child]) == []
    await process.signal(True)  # everything is gone now: still no error
    await env.close()


@pytest.mark.anyio
async def test_write_to_a_finished_process_is_a_broken_pipe(env: LocalEnvironment) -> None:
    process = await env.spawn("exec 0<&-; exit 0")
    await process.wait()
    with pytest.raises(BrokenPipeError):
        for _ in range(100):  # the pipe may accept a first write into its buffer
            await process.write_stdin(b"x" * 65536)
    await env.close()


@pytest.mark.anyio
async def test_close_stops_processes_still_running(env: LocalEnvironment) -> None:
    first = await env.spawn("sleep 60")
    second = await env.spawn(["sleep", "60"])
    await env.close()
    assert await wait_gone([first.pid, second.pid]) == []
    assert first.closed and second.closed


@pytest.mark.anyio
async def test_run_command_works_with_any_environment(workspace: Path) -> None:
    class Wrapped(Environment):
        """An environment that only knows spawn: run_command must not need more."""

        def __init__(self) -> None:
            super().__init__(workspace)
            self.inner = LocalEnvironment(workspace)

        async def spawn(self, command, *, cwd=None, env=None):  # type: ignore[override]
            process = await self.inner.spawn(command, cwd=cwd, env=env)

            class Plain:  # the bare Process protocol, no aclose()
                stdout, stderr = process.stdout, process.stderr
                returncode = property(lambda self: process.returncode)
                wait, write_stdin = process.wait, process.write_stdin
                close_stdin, signal = process.close_stdin, process.signal
                is_running = process.is_running

            return Plain()

        async def read_text(self, path):  # type: ignore[override]
            raise NotImplementedError

        async def write_text(self, path, content):  # type: ignore[override]
            raise NotImplementedError

        async def run_code(self, code, *, tools, call_tool, write):  # type: ignore[override]
            raise NotImplementedError

    wrapped = Wrapped()
    assert (await run_command(wrapped, "echo hi")).stdout == "hi\n"
    result = await run_command(wrapped, "sleep 60", timeout=0.5)
    assert result.timed_out
    await wrapped.inner.close()


# -- files -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_write_and_read_text_round_trip(env: LocalEnvironment, workspace: Path) -> None:
    content = "héllo\r\nwörld\n"
    await env.write_text("deep/er/notes.txt", content)  # parents are created
    assert (workspace / "deep/er/notes.txt").read_bytes() == content.encode("utf-8")
    assert await env.read_text("deep/er/notes.txt") == content  # \r\n kept as is
    assert await env.read_bytes("deep/er/notes.txt") == content.encode("utf-8")
    assert await env.read_text(workspace / "deep/er/notes.txt") == content  # absolute inside


@pytest.mark.anyio
async def test_file_errors_are_os_errors(env: LocalEnvironment, workspace: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await env.read_text("missing.txt")
    (workspace / "binary").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UnicodeDecodeError):
        await env.read_text("binary")


@pytest.mark.anyio
async def test_file_io_runs_off_the_event_loop_thread(
    env: LocalEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from hookline.builtins.host import environment as module

    loop_thread = threading.get_ident()
    seen: list[int] = []
    original = module.LocalEnvironment.resolve_path

    def spy(self: LocalEnvironment, path: object) -> str:
        seen.append(threading.get_ident())
        return original(self, path)  # type: ignore[arg-type]

    monkeypatch.setattr(module.LocalEnvironment, "resolve_path", spy)
    await env.write_text("a.txt", "x")
    await env.read_text("a.txt")
    assert seen and all(ident != loop_thread for ident in seen)


# -- the workspace boundary --------------------------------------------------------------


def test_relative_paths_resolve_against_the_workspace(
    env: LocalEnvironment, workspace: Path
) -> None:
    assert env.workspace == os.path.realpath(workspace)
    assert env.resolve_path("a/b.txt") == str(workspace / "a" / "b.txt")
    assert env.resolve_path("a/../b.txt") == str(workspace / "b.txt")
    assert env.resolve_path(".") == str(workspace)
    assert env.resolve_path(str(workspace / "x")) == str(workspace / "x")


@pytest.mark.parametrize(
    "path",
    [
        "..",
        "../outside.txt",
        "sub/../../outside.txt",
        "/etc/passwd",
    ],
)
def test_paths_escaping_the_workspace_are_refused(env: LocalEnvironment, path: str) -> None:
    with pytest.raises(HooklineError) as caught:
        env.resolve_path(path)
    error = caught.value
    assert error.kind is ErrorKind.invalid_input
    assert repr(path) in error.message
    assert env.workspace not in error.message, "no absolute path of the machine"
    assert "resolves to '.." in error.message
    assert "outside the workspace" in error.message


def test_sibling_with_the_workspace_as_prefix_is_outside(
    env: LocalEnvironment, workspace: Path
) -> None:
    sibling = workspace.parent / (workspace.name + "-other")
    with pytest.raises(HooklineError):
        env.resolve_path(str(sibling / "f.txt"))


@pytest.mark.anyio
async def test_symlinks_pointing_outside_are_refused(
    env: LocalEnvironment, workspace: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (workspace / "link.txt").symlink_to(secret)
    (workspace / "linkdir").symlink_to(tmp_path)
    (workspace / "dangling").symlink_to(tmp_path / "not-yet.txt")
    for path in ("link.txt", "linkdir/secret.txt", "dangling"):
        with pytest.raises(HooklineError, match="outside the workspace"):
            await env.read_text(path)
    with pytest.raises(HooklineError, match="outside the workspace"):
        await env.write_text("dangling", "escape")
    with pytest.raises(HooklineError, match="outside the workspace"):
        await env.write_text("linkdir/new.txt", "escape")
    assert not (tmp_path / "not-yet.txt").exists()
    assert not (tmp_path / "new.txt").exists()
    assert secret.read_text() == "top secret"


@pytest.mark.anyio
async def test_symlinks_inside_the_workspace_are_fine(
    env: LocalEnvironment, workspace: Path
) -> None:
    (workspace / "real.txt").write_text("data")
    (workspace / "alias.txt").symlink_to(workspace / "real.txt")
    assert await env.read_text("alias.txt") == "data"


def test_a_workspace_reached_through_a_symlink_works(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    env = LocalEnvironment(tmp_path / "alias")
    assert env.workspace == str(real)
    assert env.resolve_path("f.txt") == str(real / "f.txt")
    assert env.resolve_path(str(tmp_path / "alias" / "f.txt")) == str(real / "f.txt")


@pytest.mark.parametrize("path", ["", "a\0b"])
def test_malformed_paths_are_invalid_input(env: LocalEnvironment, path: str) -> None:
    with pytest.raises(HooklineError) as caught:
        env.resolve_path(path)
    assert caught.value.kind is ErrorKind.invalid_input


# -- code mode and background ------------------------------------------------------------


@pytest.mark.anyio
async def test_code_mode_is_not_supported(env: LocalEnvironment) -> None:
    async def call_tool(name: str, kwargs: dict) -> None:
        raise AssertionError("never called")

    with pytest.raises(HooklineError, match="code mode is not supported") as caught:
        await env.run_code("print(1)", tools=[], call_tool=call_tool, write=print)
    assert caught.value.kind is ErrorKind.config


@pytest.mark.anyio
async def test_start_background_needs_a_registry(env: LocalEnvironment) -> None:
    with pytest.raises(HooklineError, match="BackgroundProcesses") as caught:
        await env.start_background("sleep 1")
    assert caught.value.kind is ErrorKind.config
