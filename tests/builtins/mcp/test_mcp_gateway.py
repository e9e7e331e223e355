"""A real `hookline gateway` with a stdio MCP server, SIGKILLed after a turn that started
the server. Sandboxed, the server and what it started end with the gateway (its helper's
pid namespace goes with it). With sandbox = off they stay running, and the next gateway on
the same home ends them from the process record the first one kept (Linux: /proc)."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from gateway_support import Gateway, gateway_env, post, start_gateway_process
from mcp_support import SERVER
from procs import host_pid, is_gone, wait_gone

from hookline.builtins.host.proctable import HAS_PROC, read_proc

pytestmark = pytest.mark.skipif(not HAS_PROC, reason="process records need /proc (Linux)")


@pytest.fixture
def gateways() -> Iterator[list[Gateway]]:
    started: list[Gateway] = []
    yield started
    for gateway in started:
        gateway.end()


def pid_from(gateway: Gateway, name: str) -> int:
    """Run an MCP tool that answers a pid, through the offline model's `/tool` line (whose
    reply shows the tool's result in a fenced block)."""
    response = post(gateway.url, {"content": f"/tool {name} {{}}", "chat_id": "mcp"})
    assert response.status == 200, response.body
    content = str(response.json()["content"])
    (pid,) = [line for line in content.splitlines() if line.strip().isdigit()] or [content]
    return int(pid)


def records(home: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in (home / "processes").glob("*.json")]


def start_first(tmp_path: Path, gateways: list[Gateway], **extra: str
                ) -> tuple[Gateway, dict[str, str], Path, Path]:
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    home.mkdir(mode=0o700)
    workspace.mkdir()
    (home / "config.toml").write_text(
        f'[mcp_servers.files]\ncommand = {json.dumps(sys.executable)}\n'
        f'args = [{json.dumps(SERVER)}, "stdio-stay"]\n')
    (home / "config.toml").chmod(0o600)
    env = gateway_env(home, HOOKLINE_MODEL="offline", **extra)
    first = start_gateway_process(["--port", "0"], env, workspace)
    gateways.append(first)
    return first, env, home, workspace


def test_a_sigkilled_gateways_sandboxed_mcp_server_ends_with_it(
        tmp_path: Path, gateways: list[Gateway]) -> None:
    first, _, _, _ = start_first(tmp_path, gateways)
    server = host_pid(pid_from(first, "files__pid"))
    lingering = host_pid(pid_from(first, "files__linger"))  # left the server's session
    assert not is_gone(server) and not is_gone(lingering)
    first.proc.kill()
    first.proc.wait()
    assert anyio.run(wait_gone, [server, lingering]) == []


def test_a_sigkilled_gateways_unsandboxed_mcp_server_is_ended_by_the_next_start(
        tmp_path: Path, gateways: list[Gateway]) -> None:
    first, env, home, workspace = start_first(tmp_path, gateways, HOOKLINE_SANDBOX="off")
    server = pid_from(first, "files__pid")
    lingering = pid_from(first, "files__linger")  # left the server's session (setsid)
    info = read_proc(server)
    assert info is not None and info.ppid == first.proc.pid
    [record] = records(home)
    assert [server, info.start] in record["sessions"]  # the record names the server

    first.proc.kill()
    first.proc.wait()
    # Its stdin closed, the server stays (stdio-stay), as a server that ignores EOF would;
    # the process it started stays too.
    assert not is_gone(server) and not is_gone(lingering)

    second = start_gateway_process(["--port", "0"], env, workspace)
    gateways.append(second)
    line = second.wait_for_line("processes.leftovers_ended")
    assert f"left running by hookline pid {first.proc.pid}" in line
    assert str(server) in line and str(lingering) in line
    assert anyio.run(wait_gone, [server, lingering]) == []
    assert [r["pid"] for r in records(home)] == [second.proc.pid]

    # The next server is the second gateway's, and ends with it.
    again = pid_from(second, "files__pid")
    assert again != server and not is_gone(again)
    assert second.stop(signal.SIGTERM) == 0
    assert anyio.run(wait_gone, [again]) == []
    assert records(home) == []
