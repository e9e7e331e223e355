"""MCP tools through real turns: the test server over stdio and over streamable HTTP, the
model a loopback OpenAI server whose request log shows what the model was sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp_support import build, call, http_server, stdio_server, tool_output, turn
from openai_server import OpenAIServer, RecordedRequest, Reply

from hookline.kernel import ToolCall, ToolCallDecision, hookimpl

pytestmark = pytest.mark.anyio

TOKEN = "t0ken-for-the-test-server"


def offered(request: RecordedRequest) -> dict[str, Any]:
    return {tool["function"]["name"]: tool["function"] for tool in request.body["tools"]}


async def test_a_stdio_tool_is_offered_called_and_its_result_reaches_the_model(
        model: OpenAIServer, workspace: Path) -> None:
    model.add(call("files__echo", {"text": "hi", "times": 3}), Reply(text="done"))
    framework, _ = build(workspace, model.base_url, {"files": stdio_server()})
    async with framework.running():
        result = await turn(framework, "echo")
    assert result.model_output == "done"
    first, second = model.requests
    tools = offered(first)
    assert tools["files__echo"]["parameters"]["required"] == ["text"]
    assert "files__code" not in tools and "files__broken" not in tools  # not enforceable
    assert tool_output(second) == "hi hi hi"


async def test_an_http_tool_is_offered_called_and_its_result_reaches_the_model(
        model: OpenAIServer, workspace: Path) -> None:
    model.add(call("web__echo", {"text": "over http"}), Reply(text="done"))
    with http_server(TOKEN) as url:
        servers = {"web": {"url": url, "headers": {"Authorization": f"Bearer {TOKEN}"}}}
        framework, _ = build(workspace, model.base_url, servers)
        async with framework.running():
            result = await turn(framework, "echo")
    assert result.model_output == "done"
    assert "web__echo" in offered(model.requests[0])
    assert tool_output(model.requests[1]) == "over http"


async def test_arguments_are_validated_before_the_server_is_called(
        model: OpenAIServer, workspace: Path) -> None:
    model.add(call("files__echo", {"text": 5}), Reply(text="bad call"))
    framework, _ = build(workspace, model.base_url, {"files": stdio_server()})
    async with framework.running():
        await turn(framework, "echo")
    error = json.loads(tool_output(model.requests[1]))
    assert error["kind"] == "invalid_input"
    assert error["message"] == "files__echo: 'text' must be a string, got integer 5"


class DenyMcp:
    @hookimpl
    def before_tool_call(self, call: ToolCall) -> ToolCallDecision | None:
        return ToolCallDecision.deny("MCP writes are off") if call.tool == "files__write" else None


async def test_a_before_tool_call_guard_denies_an_mcp_call(
        model: OpenAIServer, workspace: Path) -> None:
    model.add(call("files__write", {"path": "x.txt", "text": "no"}), Reply(text="denied"))
    framework, _ = build(workspace, model.base_url, {"files": stdio_server()}, DenyMcp())
    async with framework.running():
        await turn(framework, "write")
    assert not (workspace / "x.txt").exists()
    assert json.loads(tool_output(model.requests[1]))["message"] == "MCP writes are off"


async def test_an_image_result_reaches_the_model_as_an_image_part(
        model: OpenAIServer, workspace: Path) -> None:
    model.add(call("files__picture", {}), Reply(text="a pixel"))
    framework, _ = build(workspace, model.base_url, {"files": stdio_server()})
    async with framework.running():
        await turn(framework, "draw")
    second = model.requests[1]
    assert "image(s): they follow in the next message" in tool_output(second)
    parts = second.messages[-1]["content"]
    assert second.messages[-1]["role"] == "user"
    (image,) = [part for part in parts if part["type"] == "image_url"]
    assert image["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")


async def test_number_array_and_optional_parameters_are_offered_and_validated(
        model: OpenAIServer, workspace: Path) -> None:
    model.add(call("files__measure", {"ratio": 0.25, "names": ["a", "b"]}),
              call("files__measure", {"ratio": 2, "names": ["c"], "limit": 7}, "call_2"),
              call("files__measure", {"ratio": 0.5, "names": ["a", 3]}, "call_3"),
              call("files__measure", {"ratio": True, "names": []}, "call_4"),
              call("files__measure", {"ratio": 1.0, "names": [], "limit": "ten"}, "call_5"),
              Reply(text="measured"))
    framework, _ = build(workspace, model.base_url, {"files": stdio_server()})
    async with framework.running():
        result = await turn(framework, "measure")
    assert result.model_output == "measured"
    schema = offered(model.requests[0])["files__measure"]["parameters"]
    assert schema["properties"]["limit"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    last = model.requests[-1]
    assert json.loads(tool_output(last)) == {"ratio": 0.25, "names": ["a", "b"], "limit": None}
    assert json.loads(tool_output(last, "call_2")) == {"ratio": 2, "names": ["c"], "limit": 7}
    refusals = {call_id: json.loads(tool_output(last, call_id))
                for call_id in ("call_3", "call_4", "call_5")}
    assert {error["kind"] for error in refusals.values()} == {"invalid_input"}
    assert refusals["call_3"]["message"] == (
        "files__measure: 'names[1]' must be a string, got integer 3")
    assert refusals["call_4"]["message"] == (
        "files__measure: 'ratio' must be a number, got boolean true")
    assert refusals["call_5"]["message"] == (
        "files__measure: 'limit' must be an integer or null, got string \"ten\"")
