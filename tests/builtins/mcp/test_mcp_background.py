"""MCP servers started in the background: a server whose tools were listed before (kept in
the hookline home) is offered at once while it starts, a call waits for it, a changed list
is kept, and a server that cannot start says what it wrote on stderr."""

from __future__ import annotations

import json
import logging
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_support import SERVER, build, call, stdio_server, tool_output, turn
from openai_server import OpenAIServer, RecordedRequest, Reply

from hookline.builtins.mcp import parse_server
from hookline.builtins.mcp.cache import CACHE_FOLDER, ListedTool, ToolCache
from hookline.kernel import ToolCall, hookimpl

pytestmark = pytest.mark.anyio


def offered(request: RecordedRequest) -> set[str]:
    return {tool["function"]["name"] for tool in request.body["tools"]}


def gated(gate: str = "", extra: str = "") -> dict[str, Any]:
    """The test server; the environment's values change, its cache key does not."""
    return stdio_server(env={"MCP_GATE": gate, "MCP_EXTRA": extra})


def cached(workspace: Path, table: dict[str, Any]) -> list[str] | None:
    """The tool names kept in the home for the server of `table`."""
    cache = ToolCache(workspace.parent / "home" / CACHE_FOLDER)
    tools = cache.load(parse_server("files", table))
    return None if tools is None else [tool.name for tool in tools]


async def list_once(model: OpenAIServer, workspace: Path, table: dict[str, Any]) -> None:
    """A first run with no list kept: it waits for the server's list, which is then kept."""
    model.add(Reply(text="listed"))
    framework, _ = build(workspace, model.base_url, {"files": table})
    async with framework.running():
        await turn(framework, "hello")
    assert "files__echo" in offered(model.requests[-1])


async def until(check: Callable[[], bool]) -> None:
    with anyio.fail_after(60):
        while not check():
            await anyio.sleep(0.05)


class Calls:
    """The tool calls about to be made, in order."""

    def __init__(self) -> None:
        self.tools: list[str] = []

    @hookimpl
    def before_tool_call(self, call: ToolCall) -> None:
        self.tools.append(call.tool)


async def test_kept_tools_are_offered_at_once_and_a_call_waits_for_the_server(
        model: OpenAIServer, workspace: Path) -> None:
    await list_once(model, workspace, gated())
    folder = workspace.parent / "home" / CACHE_FOLDER
    (kept,) = folder.iterdir()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    gate = workspace / "gate"

    model.add(Reply(text="offered"), call("files__echo", {"text": "waited"}), Reply(text="ok"))
    calls = Calls()
    framework, builtin = build(workspace, model.base_url, {"files": gated(str(gate))}, calls)
    async with framework.running():
        result = await turn(framework, "hello")
        # The run is over, and the server has not served yet: it waits for the gate.
        assert result.model_output == "offered"
        assert {"files__echo", "files__grow"} <= offered(model.requests[1])
        assert not Path(f"{gate}.up").exists()
        servers = builtin.mcp_servers()
        assert servers is not None and servers.connections["files"].state == "starting"

        async with anyio.create_task_group() as group:
            group.start_soon(turn, framework, "echo")
            await until(lambda: calls.tools == ["files__echo"])  # it is being made
            gate.touch()
        assert tool_output(model.requests[3]) == "waited"
        assert Path(f"{gate}.up").exists()


async def test_a_tool_gone_from_the_server_is_a_clear_error_and_the_kept_list_follows(
        model: OpenAIServer, workspace: Path) -> None:
    await list_once(model, workspace, gated(extra="1"))
    assert "retired" in (cached(workspace, gated()) or [])

    model.add(call("files__retired", {}), Reply(text="gone"), Reply(text="fine"))
    framework, _ = build(workspace, model.base_url, {"files": gated()})
    async with framework.running():
        await turn(framework, "retired")
        await turn(framework, "again")
    first, second, third = model.requests[1:]
    assert "files__retired" in offered(first)  # as kept: the server was not asked yet
    error = json.loads(tool_output(second))
    assert (error["kind"], error["message"]) == ("tool", (
        "MCP server 'files' no longer offers the tool 'retired' (its tools changed since "
        "they were listed); the next run offers its current tools"))
    assert "files__retired" not in offered(third)
    assert "retired" not in (cached(workspace, gated()) or [])


async def test_a_tools_list_changed_notification_lists_and_keeps_the_tools_again(
        model: OpenAIServer, workspace: Path) -> None:
    model.add(call("files__grow", {}), Reply(text="grown"), Reply(text="fine"))
    framework, _ = build(workspace, model.base_url, {"files": gated()})
    async with framework.running():
        await turn(framework, "grow")
        assert tool_output(model.requests[1]) == "grown"
        await until(lambda: "grown" in (cached(workspace, gated()) or []))
        await turn(framework, "again")
    assert "files__grown" not in offered(model.requests[0])
    assert "files__grown" in offered(model.requests[2])


def failing() -> dict[str, Any]:
    return {"command": stdio_server()["command"], "args": [SERVER, "fail"]}


def warning_of(caplog: pytest.LogCaptureFixture) -> str:
    (line,) = [record.getMessage() for record in caplog.records
               if record.name.startswith("hookline.builtins.mcp")
               and record.levelno >= logging.WARNING and "'files'" in record.getMessage()]
    return line


def assert_shows_its_stderr(warning: str) -> None:
    head, _, tail = warning.partition("; its stderr ended with:\n")
    assert head.startswith("MCP server 'files' could not start: the server process (pid ")
    assert head.endswith(") exited with status 1")
    lines = tail.split("\n")
    assert lines == [f"    step {step:02d} of the start" for step in range(3, 12)] + [
        "    error: cannot reach postgresql://***@db.example/x"]


async def test_a_server_that_fails_at_its_first_start_shows_its_stderr(
        model: OpenAIServer, workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    model.add(Reply(text="fine"))
    framework, _ = build(workspace, model.base_url, {"files": failing()})
    async with framework.running():
        result = await turn(framework, "hello")
    assert result.model_output == "fine"
    assert not any(name.startswith("files__") for name in offered(model.requests[0]))
    assert_shows_its_stderr(warning_of(caplog))


async def test_a_kept_server_that_fails_shows_its_stderr_in_the_warning_and_the_call(
        model: OpenAIServer, workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    ToolCache(workspace.parent / "home" / CACHE_FOLDER).store(
        parse_server("files", failing()), [ListedTool("echo", "Repeat.", {"type": "object"})])
    model.add(Reply(text="fine"), call("files__echo", {}), Reply(text="it failed"))
    framework, builtin = build(workspace, model.base_url, {"files": failing()})
    async with framework.running():
        await turn(framework, "hello")
        assert "files__echo" in offered(model.requests[0])
        servers = builtin.mcp_servers()
        assert servers is not None
        await until(lambda: servers.connections["files"].state == "failed")
        assert_shows_its_stderr(warning_of(caplog))
        caplog.clear()
        await turn(framework, "echo")  # the call starts it again, and says why it failed
    error = json.loads(tool_output(model.requests[2]))
    assert error["kind"] == "tool"
    assert_shows_its_stderr(error["message"])
    assert_shows_its_stderr(warning_of(caplog))
