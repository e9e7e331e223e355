"""No process outlives its owner: descendants that leave their process group (`setsid`, a
double fork, a daemonising script) are ended with the scope, and what a hookline killed
with SIGKILL leaves behind is ended by the next start (Linux: /proc and the subreaper).

Every check is made in the process table: pids written by the processes themselves, their
parents, and their absence (or zombie state) afterwards.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from gateway_support import TEST_TOKEN, gateway_env
from procs import is_gone, read_pids, wait_gone

from hookline.builtins.config import Settings
from hookline.builtins.host.background import BackgroundProcesses
from hookline.builtins.host.environment import LocalEnvironment
from hookline.builtins.host.proctable import boot_id, read_proc
from hookline.builtins.host.records import OWNER_ENV, end_leftovers
from hookline.builtins.host.sandbox import SandboxPolicy
from hookline.builtins.plugin import BuiltinPlugin
from hookline.kernel.framework.core import Framework

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the subreaper and /proc are Linux only")

DAEMON = """\
import os, sys, time
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
os.chdir("/")
os.umask(0)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
with open(sys.argv[1], "w") as handle:
    handle.write(str(os.getpid()))
time.sleep(300)
"""

QUIET = "> /dev/null 2>&1 < /dev/null"


def escapes(workspace: Path) -> str:
    """A shell script that leaves its process group in four ways and records each pid."""
    (workspace / "daemon.py").write_text(DAEMON)
    return "\n".join([
        f"setsid sleep 300 {QUIET} & echo $! > setsid.pid",
        f"(setsid sh -c 'sleep 300 & echo $! > {workspace}/double.pid' {QUIET} &)",
        f"setsid sh -c \"trap '' TERM; echo \\$\\$ > {workspace}/stubborn.pid; "
        f"while :; do sleep 1; done\" {QUIET} &",
        f"{sys.executable} daemon.py {workspace}/daemon.pid",
    ])


ESCAPE_FILES = ("setsid.pid", "double.pid", "stubborn.pid", "daemon.pid")


async def escaped_pids(workspace: Path) -> list[int]:
    return [(await read_pids(workspace / name, 1))[0] for name in ESCAPE_FILES]


def subreaper_flag() -> int:
    value = ctypes.c_int(-1)
    ctypes.CDLL(None).prctl(37, ctypes.byref(value), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
    return value.value


# -- the scope ends what escaped ----------------------------------------------------------


@pytest.mark.anyio
async def test_escaped_descendants_end_with_the_scope(tmp_path: Path) -> None:
    processes = BackgroundProcesses(stop_grace=0.5)
    # Unsandboxed: a sandbox's helper is the reaper of what its commands leave (tested in
    # test_sandbox_attacks.py); this is the registry's own net, for sandbox = "off".
    env = LocalEnvironment(tmp_path, processes=processes, sandbox=SandboxPolicy(mode="off"))
    assert subreaper_flag() == 0
    async with asynccontextmanager(processes.lifespan)():
        assert subreaper_flag() == 1
        await processes.start(f"{escapes(tmp_path)}\nexec sleep 300", cwd=tmp_path)
        background = await escaped_pids(tmp_path)
        # A foreground command too: its process group is killed when it finishes, the
        # escaped sleep is not in it. The command waits until the sleep has its own session
        # (the pid file is written after setsid()); otherwise the group could be killed
        # while the background child is still in it.
        result = await env.run(
            f"setsid sh -c 'echo $$ > {tmp_path}/foreground.pid; exec sleep 300' {QUIET} &\n"
            f"while [ ! -s {tmp_path}/foreground.pid ]; do sleep 0.01; done\n"
            f"cat {tmp_path}/foreground.pid")
        foreground = int(result.stdout)
        pids = [*background, foreground]
        names = [*ESCAPE_FILES, "foreground"]
        gone = {name: read_proc(pid) for name, pid in zip(names, pids, strict=True)
                if is_gone(pid)}
        assert gone == {}, "every escaped process is alive inside the scope"
        # Orphans were re-parented to this process, not to init.
        for pid in (background[1], background[3], foreground):
            info = read_proc(pid)
            assert info is not None and info.ppid == os.getpid(), info
        sessions = {read_proc(pid).session for pid in pids}  # type: ignore[union-attr]
        assert os.getsid(0) not in sessions and len(sessions) == len(pids)
    assert subreaper_flag() == 0, "the attribute is restored with the scope"
    assert [pid for pid in pids if not is_gone(pid)] == []
    # Ended and reaped: not even a zombie remains of those re-parented to us.
    assert [pid for pid in pids[1:] if read_proc(pid) is not None] == []


@pytest.mark.anyio
async def test_escaped_descendants_end_when_the_scope_fails(tmp_path: Path) -> None:
    processes = BackgroundProcesses(stop_grace=0.5)
    pids: list[int] = []
    with pytest.raises(LookupError, match="body failed"):
        async with asynccontextmanager(processes.lifespan)():
            await processes.start(f"{escapes(tmp_path)}\nexec sleep 300", cwd=tmp_path)
            pids = await escaped_pids(tmp_path)
            raise LookupError("body failed")
    assert len(pids) == 4
    assert [pid for pid in pids if not is_gone(pid)] == []


@pytest.mark.anyio
async def test_processes_of_another_owner_are_left_alone(tmp_path: Path) -> None:
    """A child of this process that hookline did not start (no owner token, own session)
    survives the scope, even though it is a child of the subreaper."""
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        processes = BackgroundProcesses(stop_grace=0.5)
        async with asynccontextmanager(processes.lifespan)():
            await processes.start(f"setsid sleep 300 {QUIET} & echo $! > mine.pid",
                                  cwd=tmp_path)
            [mine] = await read_pids(tmp_path / "mine.pid", 1)
        assert is_gone(mine)
        assert not is_gone(stranger.pid)
    finally:
        stranger.kill()
        stranger.wait()


# -- the builtin lifespan: record, sweep, idle environments -------------------------------


def builtin_framework(tmp_path: Path, sweep: float = 0.1) -> tuple[Framework, BuiltinPlugin]:
    # The home beside the workspace, not in it: the sandbox refuses a home commands can reach.
    (tmp_path / "workspace").mkdir()
    framework = Framework(workspace=tmp_path / "workspace")
    plugin = BuiltinPlugin(framework, settings=Settings(home=tmp_path / "home"))
    plugin.sweep_seconds = sweep
    plugin.processes.stop_grace = 0.5
    framework.registry.register(plugin, name="builtin")
    return framework, plugin


def records(home: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in (home / "processes").glob("*.json")]


async def until(predicate: Any, timeout: float = 20.0) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_the_builtin_lifespan_records_sweeps_and_cleans_up(tmp_path: Path) -> None:
    framework, plugin = builtin_framework(tmp_path)
    framework.environments.idle_seconds = 0.5
    home = tmp_path / "home"
    async with framework.running():
        [record] = records(home)
        assert (record["pid"], record["sessions"]) == (os.getpid(), [])
        assert record["boot_id"] == boot_id() and record["start"] == read_proc(os.getpid()).start

        process_id = await plugin.processes.start("exec sleep 300", cwd=tmp_path)
        leader = plugin.processes.get(process_id).pid
        [record] = records(home)
        assert record["sessions"] == [[leader, read_proc(leader).start]]

        # A short-lived escaped process: adopted by a sweep, reaped once it exits.
        await plugin.processes.start(
            f"(setsid sh -c 'echo $$ > short.pid; sleep 1' {QUIET} &)", cwd=tmp_path)
        [short] = await read_pids(tmp_path / "short.pid", 1)
        await until(lambda: [short, read_proc(short).start] in records(home)[0]["adopted"])
        await until(lambda: read_proc(short) is None)  # exited and reaped, not a zombie

        # An idle environment is closed by the sweep, with the process it spawned. It is
        # held while it spawns, as a turn holds its own: starting the sandbox's helper may
        # take longer than the idle time, and the sweep closes only what nobody holds.
        framework.environments.take("idle-session")
        env = await framework.get_environment("idle-session")
        spawned = await env.spawn("sleep 300")
        assert framework.environments.sessions() == ["idle-session"]
        framework.environments.let_go("idle-session")
        await until(lambda: len(framework.environments) == 0)
        await until(lambda: spawned.closed)  # LocalEnvironment.close stopped it
        assert is_gone(spawned.pid)
    assert records(home) == []
    assert is_gone(leader)


@pytest.mark.anyio
async def test_the_builtin_lifespan_keeps_errors_and_cancellation_as_they_are(
    tmp_path: Path,
) -> None:
    framework, _ = builtin_framework(tmp_path)
    with pytest.raises(KeyError, match="plain"):  # not wrapped in an exception group
        async with framework.running():
            await anyio.sleep(0.3)  # a few sweeps
            raise KeyError("plain")
    with anyio.CancelScope() as scope:
        async with framework.running():
            scope.cancel()
            await anyio.sleep(30)
    assert scope.cancelled_caught
    assert records(tmp_path / "home") == []


# -- leftovers of an instance that died ---------------------------------------------------


def dead_pid() -> int:
    finished = subprocess.Popen(["true"])
    finished.wait()
    return finished.pid


def write_record(directory: Path, **fields: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    data = {"version": 1, "boot_id": boot_id(), "sessions": [], "adopted": [], **fields}
    path = directory / f"{data['pid']}-{data['owner']}.json"
    path.write_text(json.dumps(data))
    return path


def spawn(command: str, owner: str | None = None) -> subprocess.Popen[bytes]:
    env = {**os.environ, OWNER_ENV: owner} if owner else None
    return subprocess.Popen(["sh", "-c", command], env=env, start_new_session=True)


def test_the_next_start_ends_what_a_dead_instance_left(tmp_path: Path) -> None:
    directory = tmp_path / "processes"
    dead, alive = uuid.uuid4().hex, uuid.uuid4().hex
    marked = spawn("exec sleep 300", owner=dead)  # carries the dead owner's token
    leader = spawn("env -i sleep 300 & wait")  # a recorded session; its child has no env
    stranger = spawn("exec sleep 300")  # recorded as adopted, but with another start time
    adopted = spawn("exec sleep 300")  # recorded as adopted, start time matches
    other = spawn("exec sleep 300", owner=alive)  # belongs to a live instance
    children = [marked, leader, stranger, adopted, other]
    try:
        deadline = time.monotonic() + 10
        while len(_session_members(leader.pid)) < 2:
            assert time.monotonic() < deadline, "the session's child never started"
            time.sleep(0.02)
        [child] = [pid for pid in _session_members(leader.pid) if pid != leader.pid]
        start = {p.pid: read_proc(p.pid).start for p in children}  # type: ignore[union-attr]
        gone_owner = dead_pid()
        dead_record = write_record(
            directory, pid=gone_owner, start=1, owner=dead,
            sessions=[[leader.pid, start[leader.pid]]],
            adopted=[[stranger.pid, start[stranger.pid] + 1], [adopted.pid, start[adopted.pid]]])
        me = read_proc(os.getpid())
        live_record = write_record(directory, pid=os.getpid(), start=me.start, owner=alive)
        old_boot = write_record(directory, pid=gone_owner, start=1, owner="old",
                                boot_id="another-boot")

        lines = end_leftovers(directory, grace=0.5)

        ended = sorted([marked.pid, leader.pid, child, adopted.pid])
        assert lines == [
            f"processes.leftovers_ended count=4 pid={gone_owner}: ended 4 process(es) left "
            f"running by hookline pid {gone_owner}, which died without closing its scope "
            f"(pids {' '.join(map(str, ended))})"
        ]
        assert [pid for pid in ended if not is_gone(pid)] == []
        assert not is_gone(stranger.pid), "a recycled pid (other start time) is spared"
        assert not is_gone(other.pid), "a live instance's processes are its own"
        assert not dead_record.exists() and not old_boot.exists()
        assert live_record.exists()
    finally:
        for process in children:
            process.kill()
            process.wait()


def _session_members(session: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            info = read_proc(int(name))
            if info is not None and info.session == session and not info.zombie:
                found.append(info.pid)
    return found


# -- a real gateway ------------------------------------------------------------------------

HOOKLINE = shutil.which("hookline", path=str(Path(sys.executable).parent))

AUTH_HEADERS: dict[str, str] = {"authorization": f"Bearer {TEST_TOKEN}"}
"""Headers every request to the gateway carries."""


class GatewayProcess:
    """`hookline gateway --port 0` in a subprocess, its output collected line by line."""

    def __init__(self, workspace: Path, home: Path) -> None:
        assert HOOKLINE, "the hookline console script is not installed in this environment"
        # Unsandboxed: what ends processes that left their group is the process records
        # tested here (a sandboxed command's family ends with its sandbox's namespace, and
        # its pids are the namespace's, not this machine's).
        self.proc = subprocess.Popen([HOOKLINE, "gateway", "--port", "0"], cwd=workspace,
                                     env=gateway_env(home, HOOKLINE_SANDBOX="off"), text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: list[str] = []
        for stream in (self.proc.stdout, self.proc.stderr):
            threading.Thread(target=self._collect, args=(stream,), daemon=True).start()
        line = self.wait_for("listening on http://")
        self.url = line.split("listening on ", 1)[1].split()[0]

    def _collect(self, stream: Any) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            found = next((line for line in self.lines if text in line), None)
            if found is not None:
                return found
            exited = self.proc.poll() is not None
            assert not exited and time.monotonic() < deadline, (
                f"no line with {text!r} (exit status {self.proc.poll()}): {self.lines}")
            time.sleep(0.05)

    def post(self, payload: Mapping[str, Any], headers: Mapping[str, str] | None = None
             ) -> dict[str, Any]:
        import http.client
        from urllib.parse import urlsplit

        parts = urlsplit(self.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        try:
            conn.request("POST", "/v1/messages", body=json.dumps(payload), headers={
                "content-type": "application/json", **AUTH_HEADERS, **(headers or {})})
            response = conn.getresponse()
            body = response.read()
            assert response.status == 200, body
            return json.loads(body)
        finally:
            conn.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def gateways(tmp_path: Path) -> Iterator[list[GatewayProcess]]:
    started: list[GatewayProcess] = []
    yield started
    for gateway in started:
        gateway.close()


def start_family(gateway: GatewayProcess, workspace: Path) -> list[int]:
    """A background shell (through the offline model's /tool line) that leaves its group
    in every way, plus a plain member of its group; returns every pid, waiting for them."""
    command = f"{escapes(workspace)}\necho $$ > leader.pid; exec sleep 300"
    reply = gateway.post({"content": "/tool shell " + json.dumps(
        {"command": command, "background": True})})
    assert "started background process bg1" in reply["content"], reply
    return anyio.run(_family_pids, workspace)


async def _family_pids(workspace: Path) -> list[int]:
    return [*await escaped_pids(workspace), *await read_pids(workspace / "leader.pid", 1)]


def test_a_gateway_stopped_with_sigterm_ends_its_escaped_descendants(
    tmp_path: Path, gateways: list[GatewayProcess]
) -> None:
    gateway = GatewayProcess(tmp_path, tmp_path / "home")
    gateways.append(gateway)
    pids = start_family(gateway, tmp_path)
    assert not any(is_gone(pid) for pid in pids)
    gateway.proc.send_signal(signal.SIGTERM)
    assert gateway.proc.wait(timeout=60) == 0
    assert anyio.run(wait_gone, pids) == []
    assert records(tmp_path / "home") == []


def test_what_a_sigkilled_gateway_left_is_ended_by_the_next_start(
    tmp_path: Path, gateways: list[GatewayProcess]
) -> None:
    home = tmp_path / "home"
    first = GatewayProcess(tmp_path, home)
    gateways.append(first)
    pids = start_family(first, tmp_path)
    first.proc.kill()
    first.proc.wait()
    time.sleep(0.5)
    assert [pid for pid in pids if is_gone(pid)] == [], "SIGKILL leaves every child running"
    [record] = records(home)
    assert record["pid"] == first.proc.pid

    second = GatewayProcess(tmp_path, home)
    gateways.append(second)
    line = second.wait_for("processes.leftovers_ended")
    assert f"left running by hookline pid {first.proc.pid}" in line
    assert sum("leftovers_ended" in entry for entry in second.lines) == 1
    assert anyio.run(wait_gone, pids) == []
    assert [r["pid"] for r in records(home)] == [second.proc.pid]
    second.proc.send_signal(signal.SIGTERM)
    assert second.proc.wait(timeout=60) == 0
    assert records(home) == []
