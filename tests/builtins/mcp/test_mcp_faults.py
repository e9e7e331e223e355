"""MCP servers that fail, and what the turn and the process table show: one line naming
the server, the turn goes on, a restart at the next use, nothing left running."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
from mcp_support import build, call, http_server, server_pids, stdio_server, tool_output, turn
from openai_server import OpenAIServer, RecordedRequest, Reply
from procs import host_pid, is_gone, wait_gone

pytestmark = pytest.mark.anyio


def offered(request: RecordedRequest) -> set[str]:
    return {tool["function"]["name"] for tool in request.body["tools"]}


def mcp_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.name.startswith("hookline.builtins.mcp")
            and record.levelno >= logging.WARNING]


async def test_a_missing_command_is_one_line_and_the_other_servers_are_offered(
        model: OpenAIServer, workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    model.add(Reply(text="fine"))
    servers = {"gone": {"command": str(workspace / "no-such-server")}, "files": stdio_server()}
    framework, _ = build(workspace, model.base_url, servers)
    async with framework.running():
        result = await turn(framework, "hello")
    assert result.model_output == "fine"
    tools = offered(model.requests[0])
    assert "files__echo" in tools and not any(name.startswith("gone__") for name in tools)
    (line,) = [line for line in mcp_lines(caplog) if "'gone'" in line]
    assert line == (f"MCP server 'gone': the command {str(workspace / 'no-such-server')!r} "
                    f"does not exist; fix command (or cwd) in [mcp_servers.gone] of config.toml")


async def test_a_crash_mid_call_fails_the_call_and_the_next_use_restarts_the_server(
        model: OpenAIServer, workspace: Path) -> None:
    model.add(call("files__crash_once", {"marker": "crashed.txt"}), Reply(text="it broke"),
              call("files__crash_once", {"marker": "crashed.txt"}, "call_2"),
              Reply(text="it works"))
    framework, _ = build(workspace, model.base_url, {"files": stdio_server()})
    async with framework.running():
        first = await turn(framework, "try")
        second = await turn(framework, "again")
    assert (first.model_output, second.model_output) == ("it broke", "it works")
    error = json.loads(tool_output(model.requests[1]))
    assert error["kind"] == "tool"
    assert error["message"].startswith(
        "MCP server 'files' stopped during the call to 'crash_once': the server process (pid ")
    assert "exited with status 3" in error["message"]
    assert error["message"].endswith("; it is restarted at its next use")
    crashed = (workspace / "crashed.txt").read_text()  # the token of the process that exited
    recovered = tool_output(model.requests[3], "call_2")
    assert recovered.startswith("recovered in process ")
    assert recovered != f"recovered in process {crashed}"


async def test_a_result_too_large_to_take_is_said_to_be_one(
        model: OpenAIServer, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line over the reader's limit ends the reading: the call says so, not only that
    the server is still running."""
    from hookline.builtins.mcp import stdio

    monkeypatch.setattr(stdio, "MAX_LINE", 2 * 1024 * 1024)  # 2 MiB: a quicker test
    model.add(call("files__echo", {"text": "x" * 1024, "times": 3 * 1024}),
              Reply(text="too big"))
    framework, _ = build(workspace, model.base_url, {"files": stdio_server()})
    async with framework.running():
        await turn(framework, "big")
    error = json.loads(tool_output(model.requests[1]))
    assert "stopped during the call to 'echo': it sent a message over 2 MiB (a result too " \
           "large to take)" in error["message"], error["message"]


async def test_a_hanging_call_times_out_and_the_server_is_replaced(
        model: OpenAIServer, workspace: Path) -> None:
    model.add(call("files__pid", {}, "p1"), call("files__hang", {}), Reply(text="too slow"),
              call("files__echo", {"text": "back"}, "call_2"), Reply(text="ok"))
    # The timeout covers the server's start too, which takes over a second on a busy
    # machine: long enough for that, short enough for the test.
    framework, _ = build(workspace, model.base_url, {"files": stdio_server(timeout=5)})
    async with framework.running():
        await turn(framework, "hang")
        hung = host_pid(int(tool_output(model.requests[1], "p1")))
        await turn(framework, "echo")
        assert await wait_gone([hung]) == []
    error = json.loads(tool_output(model.requests[2]))
    assert error["message"] == ("MCP server 'files' did not answer 'hang' within 5 s (timeout "
                                "in [mcp_servers.files]); it is restarted at its next use")
    assert tool_output(model.requests[4], "call_2") == "back"


async def test_tools_whose_schemas_cannot_be_enforced_are_skipped_with_a_warning(
        model: OpenAIServer, workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    model.add(Reply(text="fine"))
    framework, _ = build(workspace, model.base_url, {"files": stdio_server()})
    async with framework.running():
        await turn(framework, "hello")
    tools = offered(model.requests[0])
    assert {"files__echo", "files__picture", "files__write"} <= tools
    assert not {"files__broken", "files__code"} & tools
    lines = mcp_lines(caplog)
    assert ("MCP server 'files': tool 'broken' is not offered: files__broken: schema type "
            "'bogus' of 'x' is not supported") in lines
    assert any(line.startswith("MCP server 'files': tool 'code' is not offered: ")
               and "'pattern'" in line for line in lines)


async def test_an_http_401_is_one_line_naming_the_server_and_the_fix(
        model: OpenAIServer, workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    model.add(Reply(text="fine"))
    with http_server("the-right-token") as url:
        servers = {"web": {"url": url, "headers": {"Authorization": "Bearer wrong"}}}
        framework, _ = build(workspace, model.base_url, servers)
        async with framework.running():
            result = await turn(framework, "hello")
    assert result.model_output == "fine"
    assert not any(name.startswith("web__") for name in offered(model.requests[0]))
    (line,) = mcp_lines(caplog)
    assert line == (f"MCP server 'web' answered HTTP 401 at {url}: the server wants "
                    f"credentials: set headers (Authorization = \"Bearer ...\") in "
                    f"[mcp_servers.web] of config.toml")


async def test_a_server_starts_only_when_a_run_needs_tools_and_ends_with_the_scope(
        model: OpenAIServer, workspace: Path) -> None:
    model.add(call("files__linger", {}), Reply(text="left one"))
    framework, _ = build(workspace, model.base_url, {"files": stdio_server()})
    async with framework.running():
        assert server_pids() == []  # configured, not needed yet
        await turn(framework, "linger")
        running = server_pids()
        lingering = host_pid(int(tool_output(model.requests[1])))
        assert len(running) == 1 and not is_gone(lingering)
    assert await wait_gone([*running, lingering]) == []
    assert server_pids() == []


async def test_a_stdio_server_cannot_write_outside_the_workspace(
        model: OpenAIServer, workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    model.add(call("files__write", {"path": str(outside), "text": "x"}, "out"),
              call("files__write", {"path": "inside.txt", "text": "y"}, "in"),
              Reply(text="done"))
    framework, _ = build(workspace, model.base_url, {"files": stdio_server()})
    async with framework.running():
        await turn(framework, "write")
    # Under /tmp (the server's private folder there), that path is not the real one: the
    # write lands in the folder that ends with the sandbox, or is refused; never outside.
    assert not outside.exists(), tool_output(model.requests[1], "out")
    assert tool_output(model.requests[2], "in") == "written"
    assert (workspace / "inside.txt").read_text() == "y"


async def test_what_a_stdio_server_makes_in_a_later_call_is_said_after_that_run(
        model: OpenAIServer, workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The server's sandbox writes the workspace: a protected path one of its calls
    makes in the second run is named at the end of that run, not only when the servers
    end."""
    model.add(call("files__write", {"path": "first.txt", "text": "x"}, "first"),
              Reply(text="one"),
              call("files__write", {"path": ".hookline", "text": "x"}, "made"),
              Reply(text="two"))
    framework, _ = build(workspace, model.base_url, {"files": stdio_server()})
    async with framework.running():
        await turn(framework, "one")
        assert tool_output(model.requests[1], "first") == "written"
        await turn(framework, "two")
        said = [record.getMessage() for record in caplog.records
                if "commands or file tools run in this workspace made" in record.getMessage()]
    assert tool_output(model.requests[3], "made") == "written"
    assert len(said) == 1 and "made .hookline, which" in said[0], said


def test_the_python_running_the_tests_is_one_mcp_supports() -> None:
    assert sys.version_info >= (3, 11)
