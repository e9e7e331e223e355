"""End to end through real HTTP: the builtin plugin's agent loop against a loopback server.

Every test builds a Framework with the builtin plugin registered first (settings pointing
at the loopback OpenAI-compatible server of `openai_server.py`), registers its test plugins
after it, and runs turns with `process_inbound(..., stream_output=True)` inside `running()`.
The model calls go through republic over HTTP; the tools really run in a temporary
workspace; the tape is read back from the SQLite store under a temporary HOOKLINE_HOME.
This file holds the loop itself, provider errors, the per-turn model, the step limit and
cancellation; interception plugins are in test_agent_e2e_interception.py, continue_prompt
and steering in test_agent_e2e_steering.py.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from agent_e2e_support import (
    KEY,
    SESSION,
    SPEC,
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
from openai_server import OpenAIServer, RecordedRequest, Reply, closed_port_url

from hookline.builtins.models import ModelOpener
from hookline.builtins.models.base import Finished
from hookline.builtins.store import SQLiteTapeStore
from hookline.builtins.tape.naming import session_tape_name
from hookline.builtins.tape.tape import Tape
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.events import RunFinished, RunStarted, StepStarted

pytestmark = pytest.mark.anyio


# -- (a) the real loop: a tool call over HTTP, then the answer ---------------------------


async def test_tool_call_runs_and_its_result_reaches_the_next_request(
    server: OpenAIServer, workspace: Path
) -> None:
    server.add(
        Reply(
            text="Writing the file.",
            tool_calls=[{"id": "call_w", "name": "fs_write",
                         "arguments": {"path": "notes/hello.txt", "content": "hello there"}}],
            usage={"prompt_tokens": 30, "completion_tokens": 12},
        ),
        Reply(text="I wrote notes/hello.txt for you.",
              usage={"prompt_tokens": 50, "completion_tokens": 9}),
    )
    recorder = Recorder()
    framework, builtin = build(workspace, server.base_url, recorder)
    events = watch(builtin)
    async with framework.running():
        result = await turn(framework, "please write hello")
        entries = await tape_entries(framework)

    # The tool really ran in the workspace, and the two steps' text is the output.
    assert (workspace / "notes" / "hello.txt").read_text() == "hello there"
    assert result.model_output == "Writing the file.\n\nI wrote notes/hello.txt for you."
    assert result.outbounds[0]["content"] == result.model_output

    # First request: system prompt, the user's message, the tools (model-facing names).
    first, second = server.requests
    assert first.headers["authorization"] == f"Bearer {KEY}"
    assert first.body["model"] == "test-model" and first.body["stream"] is True
    assert first.messages[0]["role"] == "system"
    assert first.messages[1:] == [{"role": "user", "content": "please write hello"}]
    assert {"shell", "fs_read", "fs_write", "fs_edit"} <= set(first.tool_names)
    assert all("." not in name for name in first.tool_names)

    # Second request: the conversation so far, the tool result included.
    assert [m["role"] for m in second.messages] == ["system", "user", "assistant", "tool"]
    assistant = second.messages[2]
    assert assistant["content"] == "Writing the file."
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_w"]
    assert assistant["tool_calls"][0]["function"]["name"] == "fs_write"
    assert tool_message(second, "call_w")["content"] == "wrote 11 bytes to 'notes/hello.txt'"

    # after_llm_call saw each provider call: text, tool calls, usage, matching run ids.
    assert [request.run_id for request, _ in recorder.llm_results] == [
        request.run_id for request in recorder.llm_requests
    ]
    (req1, res1), (req2, res2) = recorder.llm_results
    assert req1.model == SPEC and "fs_write" in req1.tool_names
    assert res1.run_id == req1.run_id and res1.run_id.startswith("run-")
    assert res2.run_id == req2.run_id and res2.run_id != res1.run_id
    assert res1.text == "Writing the file."
    assert [(c["id"], c["name"], json.loads(c["arguments"])) for c in res1.tool_calls] == [
        ("call_w", "fs_write", {"path": "notes/hello.txt", "content": "hello there"})
    ]
    assert res1.usage is not None
    assert (res1.usage["input_tokens"], res1.usage["output_tokens"]) == (30, 12)
    assert res1.error is None and res1.duration_ms >= 0
    assert res2.text == "I wrote notes/hello.txt for you." and res2.tool_calls == []

    # before/after_tool_call saw the call with the step's run id and its result.
    (call,) = recorder.tool_calls
    assert (call.tool, call.run_id) == ("fs_write", res1.run_id)
    assert call.arguments == {"path": "notes/hello.txt", "content": "hello there"}
    (seen,) = recorder.tool_results
    assert seen["run_id"] == res1.run_id and seen["has_tape"]
    assert seen["result"] == "wrote 11 bytes to 'notes/hello.txt'" and seen["error"] is None

    # The tape: user message, tool call, tool result, assistant message, run event.
    recorded = run_entries(entries)
    assert [entry.kind for entry in recorded] == [
        "message", "tool_call", "tool_result", "message", "event"
    ]
    user, tool_call, tool_result, answer, run = recorded
    assert user.payload == {"role": "user", "content": "please write hello"}
    assert tool_call.payload["content"] == "Writing the file."
    assert [(c["id"], c["name"]) for c in tool_call.payload["calls"]] == [("call_w", "fs_write")]
    assert tool_result.payload["results"] == [{
        "call_id": "call_w", "name": "fs_write",
        "output": "wrote 11 bytes to 'notes/hello.txt'", "is_error": False,
        "outcome": "ran", "arguments": {"path": "notes/hello.txt", "content": "hello there"},
    }]
    assert answer.payload == {"role": "assistant",
                              "content": "I wrote notes/hello.txt for you."}
    assert run.payload["name"] == "run"
    assert run.payload["data"]["status"] == "ok" and run.payload["data"]["steps"] == 2
    assert run.payload["data"]["model"] == SPEC
    assert run.payload["data"]["usage"]["input_tokens"] == 50
    # run_id correlation: one id per model call, on every entry recorded for that step.
    assert all(entry.meta.get("run_id", "").startswith("run-") for entry in recorded)
    assert {user.meta["run_id"], tool_call.meta["run_id"], tool_result.meta["run_id"]} == {
        res1.run_id
    }
    assert answer.meta["run_id"] == run.meta["run_id"] == res2.run_id
    assert tool_call.meta["model"] == answer.meta["model"] == SPEC
    assert [entry.id for entry in entries] == list(range(1, len(entries) + 1))

    # The agent events tell the same story.
    assert [e.step for e in of_type(events, StepStarted)] == [1, 2]
    (started,) = of_type(events, RunStarted)
    assert started.model == SPEC and started.prompt == ["please write hello"]
    (finished,) = of_type(events, RunFinished)
    assert (finished.status, finished.steps, finished.error) == ("ok", 2, None)


async def test_the_tape_survives_the_scope_in_the_sqlite_file(
    server: OpenAIServer, workspace: Path
) -> None:
    server.add(Reply(text="Stored."))
    framework, builtin = build(workspace, server.base_url)
    async with framework.running():
        await turn(framework, "remember this")
    path = builtin.get_settings().tape_store
    assert path is not None and path.is_file()
    with SQLiteTapeStore(path) as store:
        tape = Tape(store, session_tape_name(SESSION, workspace))
        entries = await tape.entries()
    assert [(e.kind, e.payload.get("content")) for e in entries if e.kind == "message"] == [
        ("message", "remember this"), ("message", "Stored.")
    ]


async def test_envelope_media_is_sent_as_an_image_part(
    server: OpenAIServer, workspace: Path
) -> None:
    png = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n-tiny").decode()
    server.add(Reply(text="A tiny picture."))
    framework, _ = build(workspace, server.base_url)
    async with framework.running():
        result = await turn(framework, "what is this?",
                            media=[{"type": "image", "mime_type": "image/png", "url": png}])
    assert result.model_output == "A tiny picture."
    (request,) = server.requests
    assert request.messages[-1] == {"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": png}},
    ]}


# -- (c) provider errors ------------------------------------------------------------------


async def test_a_rejected_key_is_a_clear_error_naming_provider_model_and_setting(
    server: OpenAIServer, workspace: Path
) -> None:
    recorder = Recorder()
    framework, builtin = build(workspace, server.base_url, recorder, api_key="sk-wrong")
    events = watch(builtin)
    async with framework.running():
        result = await turn(framework, "hello")
        entries = await tape_entries(framework)

    assert len(server.requests) == 1, "authentication failures are not retried"
    assert result.model_output == ""
    ((stage, error, message),) = recorder.errors
    assert stage == "run_model"
    assert message["content"] == "hello"
    assert isinstance(error, HooklineError) and error.kind is ErrorKind.config
    assert SPEC in error.message and "HTTP 401" in error.message
    assert "the API key was rejected" in error.message
    assert "HOOKLINE_API_KEY" in error.message
    assert error.details is not None
    assert (error.details["provider"], error.details["model"]) == ("openai-compatible",
                                                                    "test-model")
    assert "Traceback" not in str(error)
    # The failed provider call is reported to after_llm_call with its error.
    ((_, failed),) = recorder.llm_results
    assert isinstance(failed.error, HooklineError) and "HTTP 401" in failed.error.message
    (finished,) = of_type(events, RunFinished)
    assert finished.status == "error" and "HTTP 401" in (finished.error or "")
    (run,) = [e for e in entries if e.kind == "event" and e.payload["name"] == "run"]
    assert run.payload["data"]["status"] == "error"
    assert "HOOKLINE_API_KEY" in run.payload["data"]["error"]


async def test_a_closed_port_is_a_clear_connection_error(workspace: Path) -> None:
    url = closed_port_url()
    recorder = Recorder()
    framework, builtin = build(workspace, url, recorder)
    # Same client as the default, without the pauses between retries.
    builtin.get_agent().open_model = ModelOpener(builtin.get_settings(), retry_delay=0.0)
    events = watch(builtin)
    async with framework.running():
        result = await turn(framework, "hello")

    assert result.model_output == ""
    ((stage, error, _),) = recorder.errors
    assert stage == "run_model"
    assert isinstance(error, HooklineError) and error.kind is ErrorKind.provider
    assert SPEC in error.message and url in error.message
    assert "connection failed" in error.message
    assert "HOOKLINE_API_BASE" in error.message
    assert "Traceback" not in str(error)
    (finished,) = of_type(events, RunFinished)
    assert finished.status == "error"


# -- (d) a per-turn model override ------------------------------------------------------


async def test_state_model_from_the_envelope_context_picks_the_model_for_that_turn(
    server: OpenAIServer, workspace: Path, tmp_path: Path
) -> None:
    script = tmp_path / "turns.json"
    script.write_text(json.dumps([{"text": "from the script"}]))
    spec = f"scripted:{script}"
    server.add(Reply(text="from the server"))
    recorder = Recorder()
    framework, _ = build(workspace, server.base_url, recorder)
    async with framework.running():
        scripted = await turn(framework, "hi", context={"model": spec})
        assert server.requests == [], "the scripted turn made no HTTP request"
        configured = await turn(framework, "hi again")
        entries = await tape_entries(framework)

    assert scripted.state["model"] == spec
    assert scripted.model_output == "from the script"
    assert configured.model_output == "from the server"
    assert len(server.requests) == 1
    assert [request.model for request in recorder.llm_requests] == [spec, SPEC]
    answers = [e for e in entries if e.kind == "message" and e.payload["role"] == "assistant"]
    assert [(e.payload["content"], e.meta["model"]) for e in answers] == [
        ("from the script", spec), ("from the server", SPEC)
    ]


# -- (g) the step limit -------------------------------------------------------------------


async def test_a_model_that_never_stops_calling_tools_hits_max_steps(
    server: OpenAIServer, workspace: Path
) -> None:
    def always_a_tool(request: RecordedRequest) -> Reply:
        number = len(server.requests)
        return tool_call_reply("fs_write", {"path": "loop.txt", "content": str(number)},
                               call_id=f"call_{number}")

    server.responder = always_a_tool
    recorder = Recorder()
    framework, builtin = build(workspace, server.base_url, recorder, max_steps=3)
    events = watch(builtin)
    async with framework.running():
        await turn(framework, "loop forever")
        entries = await tape_entries(framework)

    assert len(server.requests) == 3
    assert (workspace / "loop.txt").read_text() == "3", "every step's tool ran"
    ((stage, error, _),) = recorder.errors
    assert stage == "run_model"
    assert isinstance(error, HooklineError)
    assert "3 model steps" in error.message and "HOOKLINE_MAX_STEPS" in error.message
    assert len(of_type(events, StepStarted)) == 3
    (finished,) = of_type(events, RunFinished)
    assert finished.status == "error" and "HOOKLINE_MAX_STEPS" in (finished.error or "")
    assert finished.steps == 3, "RunFinished.steps counts the steps that ran"
    assert [e.kind for e in entries].count("tool_result") == 3
    (run,) = [e for e in entries if e.kind == "event" and e.payload["name"] == "run"]
    assert run.payload["data"]["status"] == "error"


# -- (h) cancellation ---------------------------------------------------------------------


class CancelOnFirstText:
    """A channel router whose stream wrapper cancels the turn when text first arrives."""

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.texts: list[str] = []

    def wrap_stream(self, inbound: Any, stream: Any) -> Any:
        async def wrapped() -> Any:
            async for event in stream:
                yield event
                if event.kind == "text":
                    self.texts.append(event.data["delta"])
                    self.scope.cancel()

        return wrapped()

    async def dispatch(self, message: Any) -> bool:
        return False


async def test_cancelling_the_turn_mid_stream_ends_the_run_as_cancelled(
    server: OpenAIServer, workspace: Path
) -> None:
    server.add(
        tool_call_reply("fs_write", {"path": "c.txt", "content": "c"}),
        Reply(text="partial answer", hold=True),
    )
    recorder = Recorder()
    framework, builtin = build(workspace, server.base_url, recorder)
    events = watch(builtin)
    router = framework.router = CancelOnFirstText()
    async with framework.running():
        with router.scope:
            await turn(framework, "write c then talk")
        assert router.scope.cancelled_caught
        entries = await tape_entries(framework)

    assert router.texts == ["partial answer"]
    assert await anyio.to_thread.run_sync(server.disconnected.wait, 5), "connection released"
    (finished,) = of_type(events, RunFinished)
    assert (finished.status, finished.steps) == ("cancelled", 2)
    # The first call finished and was reported; the cancelled one was not.
    assert len(recorder.llm_requests) == 2
    ((request, _),) = recorder.llm_results
    assert request.run_id == recorder.llm_requests[0].run_id
    assert recorder.errors == [], "cancellation is not an error"
    # The tape keeps what the run recorded before it was cancelled.
    recorded = run_entries(entries)
    assert [e.kind for e in recorded] == [
        "message", "tool_call", "tool_result", "message", "event"]
    # The text shown before the cancellation is kept, marked interrupted.
    partial = recorded[3]
    assert partial.payload == {"role": "assistant", "content": "partial answer"}
    assert partial.meta["interrupted"] is True
    assert recorded[-1].payload["data"]["status"] == "cancelled"
    assert (workspace / "c.txt").read_text() == "c"


class CancelOnToolCall(CancelOnFirstText):
    """Cancels the turn once the model asked for a tool, before the tool ran."""

    def wrap_stream(self, inbound: Any, stream: Any) -> Any:
        async def wrapped() -> Any:
            async for event in stream:
                yield event
                if event.kind == "tool_call":
                    self.scope.cancel()

        return wrapped()


async def test_a_call_cut_by_a_cancel_gets_a_result_and_the_next_request_says_so(
    server: OpenAIServer, workspace: Path
) -> None:
    server.add(tool_call_reply("shell", {"command": "echo ran > ran.txt"}, text="On it."),
               Reply(text="noted"))
    framework, _ = build(workspace, server.base_url, Recorder())
    router = framework.router = CancelOnToolCall()
    async with framework.running():
        with router.scope:
            await turn(framework, "run it")
        framework.router = None
        await turn(framework, "what happened?")
        entries = await tape_entries(framework)

    assert not (workspace / "ran.txt").exists(), "the cancel came before the tool ran"
    (cut,) = [e for e in entries if e.kind == "tool_result"]
    (result,) = cut.payload["results"]
    assert (result["outcome"], result["is_error"]) == ("cancelled", True)
    assert "before this call ran" in result["output"] and "it did not run" in result["output"]
    sent = server.requests[1].messages
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "tool", "assistant", "user"]
    assert tool_message(server.requests[1])["content"] == result["output"]
    assert sent[-2]["content"] == "[turn interrupted: the user cancelled it before it finished]"


async def test_a_message_sent_again_after_an_error_reads_as_a_second_try(
    server: OpenAIServer, workspace: Path
) -> None:
    """A client retries a message whose turn failed (a 429 the gateway passed on): the
    model sees the failed turn marked, then the message again, not the message twice."""
    server.add(Reply.failure(400, "the request was refused"), Reply(text="done"))
    framework, _ = build(workspace, server.base_url, Recorder())
    async with framework.running():
        await turn(framework, "do it")
        await turn(framework, "do it")
    sent = server.requests[-1].messages
    assert [(m["role"], m["content"]) for m in sent[1:]] == [
        ("user", "do it"), ("assistant", "[turn failed: an error ended it before it finished]"),
        ("user", "do it")]


async def test_closing_the_stream_early_ends_the_run_as_cancelled(
    server: OpenAIServer, workspace: Path
) -> None:
    server.add(Reply(text="partial answer", hold=True))
    recorder = Recorder()
    framework, builtin = build(workspace, server.base_url, recorder)
    events = watch(builtin)
    async with framework.running():
        state = await framework.build_state({"content": "hi"}, SESSION)
        stream = await framework.runtime.call_first(
            "run_model_stream", prompt="hi", session_id=SESSION, state=state
        )
        kinds = []
        async for event in stream:
            kinds.append(event.kind)
            if event.kind == "text":
                break
        await stream.aclose()
        entries = await tape_entries(framework)

    assert kinds == ["text"]
    assert await anyio.to_thread.run_sync(server.disconnected.wait, 5), "connection released"
    (finished,) = of_type(events, RunFinished)
    assert finished.status == "cancelled"
    assert recorder.llm_results == [], "no after_llm_call for a call closed early"
    recorded = run_entries(entries)
    assert [e.kind for e in recorded] == ["message", "message", "event"]
    assert recorded[0].payload == {"role": "user", "content": "hi"}
    # What the client was shown before it stopped reading is kept, marked interrupted.
    assert recorded[1].payload == {"role": "assistant", "content": "partial answer"}
    assert recorded[1].meta["interrupted"] is True
    assert recorded[2].payload["data"]["status"] == "cancelled"


def test_finished_text_without_deltas_is_the_reply() -> None:
    from hookline.builtins.agent.outcome import StepOutcome

    outcome = StepOutcome()
    event = outcome.take(Finished(text="whole reply"))
    assert outcome.text == "whole reply"
    assert event is not None and event.data == {"delta": "whole reply"}
