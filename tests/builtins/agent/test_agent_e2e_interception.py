"""End to end through real HTTP (see test_agent_e2e.py): interception plugins registered
after the builtin deny, rewrite, replace or finish tool and model calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_e2e_support import (
    Recorder,
    build,
    of_type,
    run_entries,
    tape_entries,
    tool_call_reply,
    tool_message,
    turn,
    watch,
)
from openai_server import OpenAIServer, Reply

from hookline.kernel import (
    LLMCallDecision,
    LLMCallRequest,
    ToolCall,
    ToolCallDecision,
    ToolCallResult,
    hookimpl,
)
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.events import LLMCallFinished, RunFinished

pytestmark = pytest.mark.anyio


# -- (b) interception plugins registered after the builtin ---------------------------------


class DenyWrites:
    @hookimpl
    def before_tool_call(self, call: ToolCall) -> ToolCallDecision | None:
        return ToolCallDecision.deny("no") if call.tool == "fs_write" else None


async def test_a_denied_tool_does_not_run_and_the_model_sees_the_denial(
    server: OpenAIServer, workspace: Path
) -> None:
    server.add(
        tool_call_reply("fs_write", {"path": "secret.txt", "content": "leak"}),
        Reply(text="I was not allowed to write."),
    )
    recorder = Recorder()
    framework, _ = build(workspace, server.base_url, DenyWrites(), recorder)
    async with framework.running():
        result = await turn(framework, "write the secret")
        entries = await tape_entries(framework)

    assert not (workspace / "secret.txt").exists()
    assert result.model_output == "I was not allowed to write."
    denial = tool_message(server.requests[1])
    assert json.loads(denial["content"]) == {"kind": "tool", "message": "no"}
    (seen,) = recorder.tool_results
    assert seen["result"] is None
    assert isinstance(seen["error"], HooklineError)
    assert seen["error"].kind is ErrorKind.tool and seen["error"].message == "no"
    (recorded,) = [e for e in entries if e.kind == "tool_result"]
    assert recorded.payload["results"][0]["is_error"] is True
    assert json.loads(recorded.payload["results"][0]["output"])["message"] == "no"


class RewriteWrites:
    @hookimpl
    def before_tool_call(self, call: ToolCall) -> ToolCallDecision | None:
        if call.tool != "fs_write":
            return None
        return ToolCallDecision.proceed({"path": "safe/out.txt", "content": "rewritten"})


async def test_rewritten_arguments_are_the_ones_the_tool_runs_with(
    server: OpenAIServer, workspace: Path
) -> None:
    server.add(
        tool_call_reply("fs_write", {"path": "original.txt", "content": "as asked"}),
        Reply(text="Done."),
    )
    recorder = Recorder()
    framework, _ = build(workspace, server.base_url, RewriteWrites(), recorder)
    async with framework.running():
        await turn(framework, "write something")
        entries = await tape_entries(framework)

    assert not (workspace / "original.txt").exists()
    assert (workspace / "safe" / "out.txt").read_text() == "rewritten"
    assert tool_message(server.requests[1])["content"] == "wrote 9 bytes to 'safe/out.txt'"
    (seen,) = recorder.tool_results
    assert seen["arguments"] == {"path": "safe/out.txt", "content": "rewritten"}
    assert seen["call"].arguments == {"path": "safe/out.txt", "content": "rewritten"}
    # The tape keeps what the model asked for and what actually happened.
    (asked,) = [e for e in entries if e.kind == "tool_call"]
    assert json.loads(asked.payload["calls"][0]["arguments"])["path"] == "original.txt"
    (happened,) = [e for e in entries if e.kind == "tool_result"]
    assert "safe/out.txt" in happened.payload["results"][0]["output"]


class ServeFromCache:
    @hookimpl
    def before_tool_call(self, call: ToolCall) -> ToolCallDecision | None:
        return ToolCallDecision.replace("from the cache") if call.tool == "shell" else None


async def test_a_replace_decision_skips_the_tool_and_feeds_its_value(
    server: OpenAIServer, workspace: Path
) -> None:
    server.add(
        tool_call_reply("shell", {"command": "touch ran.txt"}),
        Reply(text="ok"),
    )
    recorder = Recorder()
    framework, _ = build(workspace, server.base_url, ServeFromCache(), recorder)
    async with framework.running():
        await turn(framework, "run it")
    assert not (workspace / "ran.txt").exists()
    assert tool_message(server.requests[1])["content"] == "from the cache"
    (seen,) = recorder.tool_results
    assert (seen["result"], seen["error"]) == ("from the cache", None)


class FinishEarly:
    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def before_llm_call(self, request: LLMCallRequest) -> LLMCallDecision:
        self.calls += 1
        return LLMCallDecision.finish("cached")


async def test_a_finish_decision_answers_without_calling_the_provider(
    server: OpenAIServer, workspace: Path
) -> None:
    recorder = Recorder()
    finisher = FinishEarly()
    framework, builtin = build(workspace, server.base_url, finisher, recorder)
    events = watch(builtin)
    async with framework.running():
        result = await turn(framework, "anything")
        entries = await tape_entries(framework)

    assert server.requests == []
    assert result.model_output == "cached"
    assert result.outbounds[0]["content"] == "cached"
    assert finisher.calls == 1
    assert len(recorder.llm_requests) == 1, "the recorder runs first and sees the request"
    assert recorder.llm_results == [], "no after_llm_call after a finish decision"
    assert of_type(events, LLMCallFinished) == []
    kinds = [(e.kind, e.payload.get("role"), e.payload.get("content"))
             for e in run_entries(entries)]
    assert kinds[:2] == [("message", "user", "anything"), ("message", "assistant", "cached")]
    (finished,) = of_type(events, RunFinished)
    assert finished.status == "ok"


class ReplaceResult:
    @hookimpl
    def after_tool_call(self, result: ToolCallResult) -> None:
        result.result = "X"


async def test_a_result_replaced_in_after_tool_call_is_what_the_model_sees(
    server: OpenAIServer, workspace: Path
) -> None:
    server.add(
        tool_call_reply("shell", {"command": "echo $((6 * 7))"}),
        Reply(text="The tool said X."),
    )
    recorder = Recorder()
    # Registered last, the recorder runs first: it sees the real output, then it is replaced.
    framework, _ = build(workspace, server.base_url, ReplaceResult(), recorder)
    async with framework.running():
        await turn(framework, "echo something")
        entries = await tape_entries(framework)

    (seen,) = recorder.tool_results
    assert "exit code: 0" in seen["result"] and "42" in seen["result"], "the tool ran"
    assert tool_message(server.requests[1])["content"] == "X"
    assert "exit code" not in json.dumps(server.requests[1].messages)
    (recorded,) = [e for e in entries if e.kind == "tool_result"]
    assert recorded.payload["results"][0]["output"] == "X"
