"""End to end through real HTTP (see test_agent_e2e.py): continue_prompt and steered
messages keep a run going."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_e2e_support import (
    SESSION,
    build,
    of_type,
    tape_entries,
    tool_call_reply,
    turn,
    user_texts,
    watch,
)
from openai_server import OpenAIServer, Reply

from hookline.builtins.tape import starts_turn
from hookline.kernel import Framework, hookimpl
from hookline.kernel.events import RunFinished
from hookline.kernel.messages import content_text
from hookline.kernel.streaming import StreamState

pytestmark = pytest.mark.anyio


# -- (e) continue_prompt ----------------------------------------------------------------


class KeepGoing:
    def __init__(self) -> None:
        self.seen: list[tuple[Any, Any, Any]] = []

    @hookimpl
    def continue_prompt(self, prompt: Any, tape: Any, state: Any) -> str | None:
        self.seen.append((prompt, tape, state))
        return "Now check the result." if prompt is not None else None


async def test_continue_prompt_adds_a_user_message_to_the_next_request(
    server: OpenAIServer, workspace: Path
) -> None:
    server.add(
        tool_call_reply("fs_write", {"path": "a.txt", "content": "a"}),
        Reply(text="Checked."),
    )
    keep_going = KeepGoing()
    framework, _ = build(workspace, server.base_url, keep_going)
    async with framework.running():
        result = await turn(framework, "write a")
        entries = await tape_entries(framework)

    second = server.requests[1]
    assert [m["role"] for m in second.messages] == [
        "system", "user", "assistant", "tool", "user"
    ]
    assert second.messages[-1] == {"role": "user", "content": "Now check the result."}
    ((prompt, tape, stream_state),) = keep_going.seen
    assert prompt == "write a"
    assert isinstance(stream_state, StreamState)
    assert tape.context.state is result.state
    users = [e.payload["content"] for e in entries
             if e.kind == "message" and e.payload["role"] == "user"]
    assert users == ["write a", "Now check the result."]


# -- (f) steering -------------------------------------------------------------------------


class SteerAfterTool:
    def __init__(self, framework: Framework) -> None:
        self.framework = framework
        self.steered: list[bool] = []

    @hookimpl
    async def after_tool_call(self, state: dict[str, Any]) -> None:
        envelope = {"content": "also say goodbye", "session_id": SESSION}
        self.steered.append(await self.framework.steer_message(envelope, state))


async def test_a_steered_message_joins_the_next_request(
    server: OpenAIServer, workspace: Path
) -> None:
    server.add(
        tool_call_reply("fs_write", {"path": "b.txt", "content": "b"}),
        Reply(text="Goodbye."),
    )
    framework, _ = build(workspace, server.base_url)
    steerer = SteerAfterTool(framework)
    framework.registry.register(steerer, name="steerer")
    async with framework.running():
        await turn(framework, "write b")
        inbox = framework.get_steering_inbox()
        assert inbox.message_count({"session_id": SESSION}) == 0, "drained"
        entries = await tape_entries(framework)

    assert steerer.steered == [True]
    second = server.requests[1]
    assert [m["role"] for m in second.messages] == [
        "system", "user", "assistant", "tool", "user"
    ]
    assert second.messages[-1] == {"role": "user", "content": "also say goodbye"}
    assert "also say goodbye" not in json.dumps(server.requests[0].messages)
    users = [content_text(e.payload["content"]) for e in entries
             if e.kind == "message" and e.payload["role"] == "user"]
    assert users == ["write b", "also say goodbye"]
    # The steered message is part of the turn it joined (a retry of the turn's request
    # finds its run event past it), not a turn of its own.
    assert [content_text(e.payload["content"]) for e in entries if starts_turn(e)] == [
        "write b"]


class SteerAfterFirstCall:
    def __init__(self, framework: Framework) -> None:
        self.framework = framework

    @hookimpl
    async def after_llm_call(self, state: dict[str, Any]) -> None:
        if not state.get("_steered"):
            state["_steered"] = True
            await self.framework.steer_message({"content": "one more thing",
                                                "session_id": SESSION}, state)


async def test_a_pending_steered_message_keeps_a_finished_run_going(
    server: OpenAIServer, workspace: Path
) -> None:
    server.add(Reply(text="First answer."), Reply(text="And the other thing."))
    framework, builtin = build(workspace, server.base_url)
    framework.registry.register(SteerAfterFirstCall(framework), name="steerer")
    events = watch(builtin)
    async with framework.running():
        result = await turn(framework, "one thing")

    assert len(server.requests) == 2
    assert user_texts(server.requests[1]) == ["one thing", "one more thing"]
    assert server.requests[1].messages[-2] == {"role": "assistant", "content": "First answer."}
    assert result.model_output == "First answer.\n\nAnd the other thing."
    (finished,) = of_type(events, RunFinished)
    assert (finished.status, finished.steps) == ("ok", 2)
