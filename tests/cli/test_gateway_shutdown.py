"""`hookline gateway`: nothing a tool does can hang a turn or stop the shutdown.

Each test starts the real console script in a subprocess (fresh hookline home, port 0, the
test's folder as workspace) and talks to it over loopback HTTP. A test plugin, installed
through a dist-info entry point on PYTHONPATH, adds a `block` tool that sleeps 600 s in a
worker thread: the kind of call cancellation cannot interrupt.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_support import Gateway, gateway_env, post, start_gateway_process
from plugin_site import install_plugin

pytestmark = pytest.mark.skipif(os.name != "posix", reason="signals and FIFOs are POSIX")

EXIT_LIMIT = 5.0
"""Seconds within which the issue requires the gateway to exit after the second signal."""

BLOCK_PLUGIN = '''
import os
import time
from pathlib import Path

import anyio

from hookline.kernel import hookimpl
from hookline.kernel.tools import Tool

MARKS = Path(os.environ["BLOCK_DIR"])


async def block():
    (MARKS / "blocking").write_text("1")
    await anyio.to_thread.run_sync(time.sleep, 600)  # not cancellable
    return "woke up"


class BlockPlugin:
    def __init__(self, framework):
        self.framework = framework

    @hookimpl
    def provide_tools(self):
        return [Tool(name="block", handler=block, description="Sleep 600 s in a thread.")]
'''


def ask(gateway: Gateway, content: str, timeout: float = 60.0) -> tuple[int, Any]:
    reply = post(gateway.url, {"content": content}, timeout=timeout)
    return reply.status, reply.json()


@pytest.fixture
def start_gateway(tmp_path: Path) -> Iterator[Any]:
    site = install_plugin(tmp_path / "site", "block_plugin", BLOCK_PLUGIN,
                          "block = block_plugin:BlockPlugin")
    environ = gateway_env(tmp_path / "home", PYTHONPATH=str(site), BLOCK_DIR=str(tmp_path))
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    started: list[Gateway] = []

    def start() -> Gateway:
        started.append(start_gateway_process(["--port", "0"], environ, workspace))
        return started[-1]

    yield start
    for gateway in started:
        if gateway.proc.poll() is None:
            gateway.proc.kill()
            gateway.proc.wait()


def is_gone(pid: int) -> bool:
    """No such process, or a zombie waiting for a reaper (PID 1 here may never reap)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except FileNotFoundError:
        return True
    return state in (b"Z", b"X")


def test_reading_a_fifo_answers_with_a_clear_error(start_gateway: Any,
                                                   tmp_path: Path) -> None:
    gateway = start_gateway()
    status, _ = ask(gateway, '/tool shell {"command": "mkfifo f"}')
    assert status == 200
    assert stat.S_ISFIFO(os.lstat(tmp_path / "workspace" / "f").st_mode)
    status, reply = ask(gateway, '/tool fs_read {"path": "f"}', timeout=30)
    assert status == 200, reply
    assert "cannot read 'f': it is a FIFO (named pipe), not a regular file" in reply["content"]
    status, reply = ask(gateway, '/tool fs_write {"path": "f", "content": "x"}', timeout=30)
    assert "cannot write 'f': it is a FIFO (named pipe)" in reply["content"]
    assert stat.S_ISFIFO(os.lstat(tmp_path / "workspace" / "f").st_mode), "left as it was"
    gateway.proc.send_signal(signal.SIGTERM)
    assert gateway.proc.wait(timeout=60) == 0


def start_blocked(start_gateway: Any, tmp_path: Path) -> tuple[Gateway, int]:
    """A gateway with a background process and a turn whose tool blocks a worker thread."""
    gateway = start_gateway()
    status, reply = ask(gateway, '/tool shell {"command": "sleep 600", "background": true}')
    assert status == 200, reply
    background = int(re.search(r"\(pid (\d+)\)", reply["content"]).group(1))
    assert not is_gone(background)
    # This turn never ends: its tool sleeps in a worker thread. Nobody reads the answer.
    threading.Thread(target=_ignore, args=(gateway, "/tool block {}"), daemon=True).start()
    deadline = time.monotonic() + 30
    while not (tmp_path / "blocking").exists():
        assert time.monotonic() < deadline, f"the block tool never ran: {gateway.stderr}"
        time.sleep(0.02)
    return gateway, background


def wait_exit(gateway: Gateway, background: int) -> tuple[int, float]:
    """The exit code and seconds since now; the background process must be gone too."""
    sent = time.monotonic()
    try:
        code = gateway.proc.wait(timeout=30)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"still running 30 s after the last signal: "
                             f"{gateway.stdout}") from exc
    elapsed = time.monotonic() - sent
    deadline = time.monotonic() + 5
    while not is_gone(background):
        assert time.monotonic() < deadline, "the background process group survived"
        time.sleep(0.05)
    return code, elapsed


@pytest.mark.parametrize(("first", "second"), [(signal.SIGTERM, signal.SIGTERM),
                                               (signal.SIGINT, signal.SIGINT)],
                         ids=["SIGTERM", "SIGINT"])
def test_a_second_signal_exits_while_a_worker_thread_blocks(
    start_gateway: Any, tmp_path: Path, first: int, second: int
) -> None:
    gateway, background = start_blocked(start_gateway, tmp_path)
    gateway.proc.send_signal(first)
    gateway.wait_for_line(f"{signal.Signals(first).name} received, stopping")
    time.sleep(0.5)
    assert gateway.proc.poll() is None, "the first signal waits for the running turn"
    gateway.proc.send_signal(second)
    code, elapsed = wait_exit(gateway, background)
    assert elapsed < EXIT_LIMIT, f"exited {elapsed:.1f} s after the second signal"
    assert code == 128 + second
    name = signal.Signals(second).name
    gateway.wait_for_line(f"not stopped 3 s after {name}; exiting now with status {code}",
                          timeout=5)


def test_a_third_signal_exits_without_the_grace(start_gateway: Any, tmp_path: Path) -> None:
    gateway, background = start_blocked(start_gateway, tmp_path)
    for expected in ("SIGTERM received, stopping", "SIGTERM received again, cancelling"):
        gateway.proc.send_signal(signal.SIGTERM)
        gateway.wait_for_line(expected)
    gateway.proc.send_signal(signal.SIGINT)
    code, elapsed = wait_exit(gateway, background)
    assert code == 128 + signal.SIGINT and elapsed < EXIT_LIMIT
    gateway.wait_for_line("SIGINT received a third time; exiting now with status 130",
                          timeout=5)


def _ignore(gateway: Gateway, content: str) -> None:
    with contextlib.suppress(OSError, http.client.HTTPException):  # no answer comes
        ask(gateway, content, timeout=120)
