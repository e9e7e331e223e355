"""The model stage of the turn pipeline: which model hook kind is chosen, the streaming and
non-streaming paths, and the fallback when no model answers."""

from __future__ import annotations

import types
from collections.abc import AsyncIterator
from typing import Any

import pytest
import republic
from pipeline_support import PNG_DATA_URL, Recorder, StreamModel, TextModel, errors, events, text
from recorders import Answering

from hookline.kernel import hookimpl
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.framework.core import Framework
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent

# -- model kind selection --------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("stream_output", [False, True])
async def test_model_kind_selection_contract_example(
    framework: Framework, stream_output: bool
) -> None:
    class A:
        def __init__(self) -> None:
            self.calls = 0

        @hookimpl(tryfirst=True)
        def run_model_stream(self, prompt, session_id, state):
            self.calls += 1
            return events(*text("from A"))

    a = A()
    b = TextModel("from B")
    framework.registry.register(a, "A")
    framework.registry.register(b, "B")
    result = await framework.process_inbound({"content": "hi"}, stream_output=stream_output)
    assert result.model_output == "from B"
    assert len(b.calls) == 1
    assert a.calls == 0


@pytest.mark.anyio
@pytest.mark.parametrize("stream_output", [False, True])
async def test_unmarked_model_attribute_does_not_select(
    framework: Framework, stream_output: bool
) -> None:
    helper_calls: list[Any] = []

    class WithHelper:
        def run_model(self, prompt, session_id, state):  # not marked: not a hook
            helper_calls.append(prompt)
            return "from helper"

        @hookimpl
        def load_state(self, message, session_id):
            return {"helper": True}

    stream = StreamModel(lambda: events(*text("streamed")))
    framework.registry.register(stream, "stream")
    framework.registry.register(WithHelper(), "helper")
    result = await framework.process_inbound({"content": "hi"}, stream_output=stream_output)
    assert result.model_output == "streamed"
    assert len(stream.calls) == 1
    assert helper_calls == []
    assert result.state["helper"] is True


@pytest.mark.anyio
@pytest.mark.parametrize(("stream_output", "expected"), [(False, "text"), (True, "stream")])
async def test_plugin_with_both_model_hooks_uses_the_path_preference(
    framework: Framework, stream_output: bool, expected: str
) -> None:
    class Both:
        @hookimpl
        def run_model(self, prompt, session_id, state):
            return "text"

        @hookimpl
        def run_model_stream(self, prompt, session_id, state):
            return events(*text("str", "eam"))

    framework.registry.register(TextModel("older plugin"), "older")
    framework.registry.register(Both(), "both")
    result = await framework.process_inbound({"content": "hi"}, stream_output=stream_output)
    assert result.model_output == expected


@pytest.mark.anyio
async def test_chosen_name_dispatches_over_all_implementations(framework: Framework) -> None:
    old = TextModel("from the older plugin")
    framework.registry.register(old, "old")
    framework.registry.register(TextModel(None), "new")  # selects run_model, answers None
    result = await framework.process_inbound({"content": "hi"})
    assert result.model_output == "from the older plugin"
    assert len(old.calls) == 1


@pytest.mark.anyio
async def test_model_hook_receives_session_and_state(framework: Framework) -> None:
    model = TextModel("ok")
    framework.registry.register(Answering("load_state", {"model": "p:m"}), "state")
    framework.registry.register(model, "model")
    result = await framework.process_inbound({"content": "hi", "session_id": "s9"})
    call = model.calls[0]
    assert call["session_id"] == "s9"
    assert call["state"] is result.state
    assert call["state"]["model"] == "p:m"


# -- model paths -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_stream_path_collects_text_and_reports_error_events(
    framework: Framework,
) -> None:
    log: list[Any] = []
    recorder = Recorder(log)
    stream_log: list[str] = []
    streams: list[AsyncStreamEvents] = []

    def make() -> AsyncStreamEvents:
        stream = events(
            ("text", {"delta": "Hel"}),
            ("error", {"kind": "provider", "message": "rate limited", "details": {"n": 1}}),
            ("usage", {"tokens": 3}),
            ("text", {"delta": 5}),
            ("error", {"message": "odd"}),
            ("error", {"kind": "no-such-kind", "message": "weird"}),
            ("text", {"delta": "lo"}),
            ("final", {}),
            log=stream_log,
        )
        streams.append(stream)
        return stream

    framework.registry.register(recorder, "recorder")
    framework.registry.register(StreamModel(make), "model")
    inbound = {"content": "hi"}
    result = await framework.process_inbound(inbound, stream_output=True)

    assert result.model_output == "Hel5lo"
    reported = errors(recorder, "run_model")
    assert [type(c["error"]) for c in reported] == [HooklineError] * 3
    assert [(c["error"].kind, c["error"].message) for c in reported] == [
        (ErrorKind.provider, "rate limited"),
        (ErrorKind.unknown, "odd"),
        (ErrorKind.unknown, "weird"),
    ]
    assert reported[0]["error"].details == {"n": 1}
    assert all(c["message"] is inbound for c in reported)
    assert errors(recorder, "turn") == []
    assert streams[0].closed
    assert stream_log == ["stream source closed"]
    # Error events are reported as they arrive, before save_state.
    assert log.index("save_state") > log.index("on_error")


@pytest.mark.anyio
async def test_non_stream_path_with_a_stream_hook_drains_text_only(
    framework: Framework,
) -> None:
    log: list[Any] = []
    recorder = Recorder(log)
    streams: list[AsyncStreamEvents] = []

    def make() -> AsyncStreamEvents:
        stream = events(
            ("text", {"delta": "a"}),
            ("error", {"kind": "provider", "message": "ignored"}),
            ("tool_call", {"name": "t"}),
            ("text", {"delta": "b"}),
        )
        streams.append(stream)
        return stream

    framework.registry.register(recorder, "recorder")
    framework.registry.register(StreamModel(make), "model")
    result = await framework.process_inbound({"content": "hi"})
    assert result.model_output == "ab"
    assert errors(recorder) == []
    assert streams[0].closed


@pytest.mark.anyio
async def test_stream_path_with_run_model_wraps_the_text(framework: Framework) -> None:
    model = TextModel("whole answer")
    framework.registry.register(model, "model")
    result = await framework.process_inbound({"content": "hi"}, stream_output=True)
    assert result.model_output == "whole answer"
    assert len(model.calls) == 1


@pytest.mark.anyio
async def test_empty_stream_is_empty_output_not_missing_output(framework: Framework) -> None:
    log: list[Any] = []
    recorder = Recorder(log, {"build_prompt": "prompt text"})
    framework.registry.register(recorder, "recorder")
    framework.registry.register(StreamModel(lambda: events(("usage", {}))), "model")
    for stream_output in (False, True):
        result = await framework.process_inbound({"content": "c"}, stream_output=stream_output)
        assert result.model_output == ""
    assert errors(recorder) == []


@pytest.mark.anyio
async def test_stream_is_read_through_the_bound_router(framework: Framework) -> None:
    seen: list[Any] = []
    originals: list[AsyncStreamEvents] = []

    class Router:
        def wrap_stream(self, message: Any, stream: AsyncStreamEvents) -> Any:
            async def wrapped() -> AsyncIterator[StreamEvent]:
                async for event in stream:
                    seen.append(event.kind)
                    yield event
                yield StreamEvent("text", {"delta": "+router"})

            return wrapped()

    def make() -> AsyncStreamEvents:
        stream = events(*text("model"))
        originals.append(stream)
        return stream

    framework.router = Router()
    framework.registry.register(StreamModel(make), "model")
    result = await framework.process_inbound({"content": "hi"}, stream_output=True)
    assert result.model_output == "model+router"
    assert seen == ["text"]
    assert originals[0].closed
    # The non-stream path does not involve the router.
    plain = await framework.process_inbound({"content": "hi"})
    assert plain.model_output == "model"


def no_model(framework: Framework) -> None:
    pass


def none_text(framework: Framework) -> None:
    framework.registry.register(TextModel(None), "none_text")


def none_stream(framework: Framework) -> None:
    framework.registry.register(Answering("run_model_stream"), "none_stream")


def unmarked_only(framework: Framework) -> None:
    class Unmarked:
        def run_model(self, prompt, session_id, state):  # pragma: no cover - not a hook
            return "never"

        def run_model_stream(self, prompt, session_id, state):  # pragma: no cover
            return events(*text("never"))

    framework.registry.register(Unmarked(), "unmarked")


@pytest.mark.anyio
@pytest.mark.parametrize("setup", [no_model, none_text, none_stream, unmarked_only])
@pytest.mark.parametrize("stream_output", [False, True])
async def test_no_model_output_reports_and_falls_back_to_the_prompt(
    framework: Framework, setup: Any, stream_output: bool
) -> None:
    log: list[Any] = []
    recorder = Recorder(log, {"build_prompt": "the prompt"})
    framework.registry.register(recorder, "recorder")
    setup(framework)
    inbound = {"content": "raw content", "channel": "cli"}
    result = await framework.process_inbound(inbound, stream_output=stream_output)

    assert result.model_output == "the prompt"
    reported = errors(recorder)
    assert len(reported) == 1
    assert reported[0]["stage"] == "run_model"
    assert isinstance(reported[0]["error"], RuntimeError)
    assert "no model skill returned output" in str(reported[0]["error"])
    assert reported[0]["message"] is inbound
    # The turn continues: save_state, render and dispatch still run with the echo.
    assert recorder.calls["save_state"][0]["model_output"] == "the prompt"
    assert result.outbounds == [
        {"content": "the prompt", "session_id": "cli:default", "channel": "cli"}
    ]
    assert log.count("dispatch_outbound") == 1


@pytest.mark.anyio
@pytest.mark.parametrize("stream_output", [False, True])
async def test_no_model_output_with_a_media_prompt_falls_back_to_the_content(
    framework: Framework, stream_output: bool
) -> None:
    log: list[Any] = []
    recorder = Recorder(log, {"build_prompt": ["look", republic.image(PNG_DATA_URL)]})
    framework.registry.register(recorder, "recorder")
    result = await framework.process_inbound(
        types.SimpleNamespace(content="raw content"), stream_output=stream_output
    )
    assert result.model_output == "raw content"
    assert [c["stage"] for c in errors(recorder)] == ["run_model"]


@pytest.mark.anyio
async def test_model_kind_is_selected_again_after_plugins_change(framework: Framework) -> None:
    framework.registry.register(StreamModel(lambda: events(*text("stream"))), "stream")
    assert (await framework.process_inbound({"content": "hi"})).model_output == "stream"
    framework.registry.register(TextModel("text"), "text")
    assert (await framework.process_inbound({"content": "hi"})).model_output == "text"
    framework.registry.unregister("text")
    assert (await framework.process_inbound({"content": "hi"})).model_output == "stream"
    framework.registry.unregister("stream")
    assert (await framework.process_inbound({"content": "hi"})).model_output == "hi"
