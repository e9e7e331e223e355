"""The turn pipeline end to end: ``Framework.process_inbound`` with recording plugins
(contract 2.1-2.10, 2.23 and the hookline choices listed in the module docstrings of
kernel/framework/pipeline.py)."""

from __future__ import annotations

import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import republic
from recorders import Answering, AsyncAnswering, FakeEnvironment

from hookline.kernel import hookimpl
from hookline.kernel.framework.core import Framework
from hookline.kernel.streaming import (
    AsyncStreamEvents,
    ErrorKind,
    HooklineError,
    StreamEvent,
)
from hookline.kernel.turn import TurnResult

PNG_DATA_URL = "data:image/png;base64,iVBORw0KGgo="


@pytest.fixture
def framework(tmp_path: Path) -> Framework:
    return Framework(workspace=tmp_path)


def events(*items: tuple[str, dict[str, Any]], log: list[str] | None = None) -> AsyncStreamEvents:
    """A stream of the given events; ``log`` records when its source is closed."""

    async def source() -> AsyncIterator[StreamEvent]:
        try:
            for kind, data in items:
                yield StreamEvent(kind, data)
        finally:
            if log is not None:
                log.append("stream source closed")

    return AsyncStreamEvents(source())


def text(*parts: str) -> list[tuple[str, dict[str, Any]]]:
    return [("text", {"delta": part}) for part in parts]


class Recorder:
    """Every turn hook, recording its calls; answers are configurable per hook."""

    def __init__(self, log: list[Any], answers: dict[str, Any] | None = None) -> None:
        self.log = log
        self.answers = answers or {}
        self.calls: dict[str, list[dict[str, Any]]] = {}

    def _record(self, hook: str, **kwargs: Any) -> Any:
        self.log.append(hook)
        self.calls.setdefault(hook, []).append(kwargs)
        answer = self.answers.get(hook)
        if isinstance(answer, BaseException):
            raise answer
        return answer(**kwargs) if callable(answer) else answer

    @hookimpl
    def resolve_session(self, message):
        return self._record("resolve_session", message=message)

    @hookimpl
    async def load_state(self, message, session_id):
        return self._record("load_state", message=message, session_id=session_id)

    @hookimpl
    def build_prompt(self, message, session_id, state):
        return self._record("build_prompt", message=message, session_id=session_id,
                            state=state)

    @hookimpl
    async def save_state(self, session_id, state, message, model_output):
        return self._record("save_state", session_id=session_id, state=state,
                            message=message, model_output=model_output)

    @hookimpl
    def render_outbound(self, message, session_id, state, model_output):
        return self._record("render_outbound", message=message, session_id=session_id,
                            state=state, model_output=model_output)

    @hookimpl
    async def dispatch_outbound(self, message):
        return self._record("dispatch_outbound", message=message)

    @hookimpl
    def on_error(self, stage, error, message):
        return self._record("on_error", stage=stage, error=error, message=message)


class TextModel:
    def __init__(self, answer: Any, log: list[Any] | None = None) -> None:
        self.answer, self.log = answer, log
        self.calls: list[dict[str, Any]] = []

    @hookimpl
    async def run_model(self, prompt, session_id, state):
        self.calls.append({"prompt": prompt, "session_id": session_id, "state": state})
        if self.log is not None:
            self.log.append("run_model")
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


class StreamModel:
    def __init__(self, make: Any, log: list[Any] | None = None) -> None:
        self.make, self.log = make, log
        self.calls: list[dict[str, Any]] = []

    @hookimpl
    def run_model_stream(self, prompt, session_id, state):
        self.calls.append({"prompt": prompt, "session_id": session_id, "state": state})
        if self.log is not None:
            self.log.append("run_model_stream")
        return self.make() if callable(self.make) else self.make


def errors(recorder: Recorder, stage: str | None = None) -> list[dict[str, Any]]:
    return [c for c in recorder.calls.get("on_error", []) if stage in (None, c["stage"])]


# -- stage order and results ----------------------------------------------------------------


@pytest.mark.anyio
async def test_stage_order_and_turn_result(framework: Framework) -> None:
    log: list[Any] = []
    recorder = Recorder(log, {"resolve_session": "s1", "load_state": {"k": "v"},
                              "build_prompt": "the prompt"})

    class Env:
        @hookimpl
        def provide_environment(self, session_id, workspace):
            log.append("provide_environment")

    framework.registry.register(recorder, "recorder")
    framework.registry.register(Env(), "env")
    framework.registry.register(TextModel("the answer", log), "model")
    inbound = {"content": "hello", "channel": "cli", "chat_id": "1"}

    async with framework.running():
        result = await framework.process_inbound(inbound)

    assert log == [
        "resolve_session", "provide_environment", "load_state", "build_prompt", "run_model",
        "save_state", "render_outbound", "dispatch_outbound",
    ]
    assert isinstance(result, TurnResult)
    assert result.session_id == "s1"
    assert result.prompt == ["the prompt"]
    assert result.model_output == "the answer"
    assert result.outbounds == [
        {"content": "the answer", "session_id": "s1", "channel": "cli", "chat_id": "1"}
    ]
    assert result.state["k"] == "v"
    saved = recorder.calls["save_state"][0]
    assert saved == {"session_id": "s1", "state": result.state, "message": inbound,
                     "model_output": "the answer"}
    assert saved["state"] is result.state
    assert recorder.calls["build_prompt"][0]["state"] is result.state
    assert recorder.calls["render_outbound"][0]["model_output"] == "the answer"
    assert recorder.calls["dispatch_outbound"] == [{"message": result.outbounds[0]}]
    assert "on_error" not in recorder.calls


# -- resolve_session -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_resolve_session_first_result_wins(framework: Framework) -> None:
    low = Answering("resolve_session", "low")
    framework.registry.register(low, "low")
    framework.registry.register(Answering("resolve_session", None), "abstains")
    framework.registry.register(Answering("resolve_session", "high"), "high")
    result = await framework.process_inbound({"content": "x", "session_id": "envelope"})
    assert result.session_id == "high"
    assert low.calls == 0


@pytest.mark.anyio
async def test_resolve_session_result_is_converted_to_text(framework: Framework) -> None:
    framework.registry.register(Answering("resolve_session", 42), "number")
    assert (await framework.process_inbound({"content": "x"})).session_id == "42"


@pytest.mark.anyio
@pytest.mark.parametrize("falsy", ["", 0, False])
async def test_falsy_resolve_session_falls_back_and_hides_lower_ones(
    framework: Framework, falsy: Any
) -> None:
    low = Answering("resolve_session", "low")
    framework.registry.register(low, "low")
    framework.registry.register(Answering("resolve_session", falsy), "falsy")
    inbound = {"content": "x", "channel": "tg", "chat_id": 9}
    assert (await framework.process_inbound(inbound)).session_id == "tg:9"
    assert low.calls == 0


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("inbound", "expected"),
    [
        ({"content": "x", "session_id": "given", "channel": "c"}, "given"),
        ({"content": "x", "channel": "cli"}, "cli:default"),
        ({"content": "x", "chat_id": "42"}, "default:42"),
        ({"content": "x"}, "default:default"),
        ({"content": "x", "session_id": "", "channel": "cli", "chat_id": "7"}, "cli:7"),
        ({"content": "x", "session_id": "   ", "channel": "cli"}, "cli:default"),
        ({"content": "x", "session_id": None, "channel": None, "chat_id": "7"}, "default:7"),
        (types.SimpleNamespace(content="x", session_id="obj"), "obj"),
        (types.SimpleNamespace(content="x", session_id=" ", channel="web"), "web:default"),
        (types.SimpleNamespace(content="x"), "default:default"),
        (types.SimpleNamespace(), "default:default"),
    ],
)
async def test_default_session_id(framework: Framework, inbound: Any, expected: str) -> None:
    result = await framework.process_inbound(inbound)
    assert result.session_id == expected


@pytest.mark.anyio
async def test_dict_inbound_gets_the_resolved_session_id(framework: Framework) -> None:
    framework.registry.register(Answering("resolve_session", "resolved"), "resolver")
    inbound = {"content": "x", "session_id": "stale"}
    await framework.process_inbound(inbound)
    assert inbound["session_id"] == "resolved"

    blank = {"content": "x", "session_id": " ", "channel": "cli"}
    framework.registry.unregister("resolver")
    await framework.process_inbound(blank)
    assert blank["session_id"] == "cli:default"


@pytest.mark.anyio
async def test_object_inbound_is_not_touched(framework: Framework) -> None:
    framework.registry.register(Answering("resolve_session", "resolved"), "resolver")
    inbound = types.SimpleNamespace(content="x", session_id="stale")
    result = await framework.process_inbound(inbound)
    assert result.session_id == "resolved"
    assert inbound.session_id == "stale"
    bare = types.SimpleNamespace(content="x")
    await framework.process_inbound(bare)
    assert not hasattr(bare, "session_id")


# -- load_state ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_load_state_merges_fragments_higher_priority_wins(framework: Framework) -> None:
    seen: list[Any] = []
    framework.registry.register(Answering("load_state", {"a": "low", "b": "low"}, seen), "low")
    framework.registry.register(Answering("load_state", None), "none")
    framework.registry.register(Answering("load_state", ["not", "a", "dict"]), "list")
    framework.registry.register(Answering("load_state", {"b": "mid", "c": "mid"}), "mid")

    class High:
        @hookimpl(tryfirst=True)
        async def load_state(self, message, session_id):
            return {"c": "high", "_runtime_workspace": "overridden"}

    framework.registry.register(High(), "high")
    inbound = {"content": "x", "session_id": "s"}
    result = await framework.process_inbound(inbound)
    state = result.state
    assert state["a"] == "low"
    assert state["b"] == "mid"
    assert state["c"] == "high"
    assert state["_runtime_workspace"] == "overridden"
    assert seen == [(inbound, "s")]


@pytest.mark.anyio
async def test_runtime_keys_are_pre_seeded(framework: Framework) -> None:
    inbox = object()
    environment = FakeEnvironment()
    seen_states: list[dict[str, Any]] = []

    class Resources:
        @hookimpl
        def provide_steering_inbox(self):
            return inbox

        @hookimpl
        def provide_environment(self, session_id):
            return environment if session_id == "with-env" else None

        @hookimpl
        def build_prompt(self, state):
            seen_states.append(dict(state))

    framework.registry.register(Resources(), "resources")

    # Outside running(): no inbox, no environment key unless one exists.
    result = await framework.process_inbound({"content": "x", "session_id": "plain"})
    assert result.state == {
        "_runtime_workspace": str(framework.workspace),
        "_runtime_steering_inbox": None,
    }

    async with framework.running():
        with_env = await framework.process_inbound({"content": "x", "session_id": "with-env"})
        without = await framework.process_inbound({"content": "x", "session_id": "no-env"})
    assert with_env.state == {
        "_runtime_workspace": str(framework.workspace),
        "_runtime_steering_inbox": inbox,
        "_runtime_environment": environment,
    }
    assert "_runtime_environment" not in without.state
    assert without.state["_runtime_steering_inbox"] is inbox
    assert seen_states[1] == with_env.state


# -- build_prompt ----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("falsy", ["", []])
async def test_falsy_build_prompt_falls_back_to_content(
    framework: Framework, falsy: Any
) -> None:
    low = Answering("build_prompt", "from low")
    model = TextModel("ok")
    framework.registry.register(low, "low")
    framework.registry.register(Answering("build_prompt", falsy), "falsy")
    framework.registry.register(model, "model")
    result = await framework.process_inbound({"content": "raw content"})
    assert result.prompt == ["raw content"]
    assert model.calls[0]["prompt"] == "raw content"
    assert low.calls == 0


@pytest.mark.anyio
async def test_no_build_prompt_uses_content_or_empty(framework: Framework) -> None:
    model = TextModel("ok")
    framework.registry.register(model, "model")
    assert (await framework.process_inbound({"content": 12})).prompt == ["12"]
    assert (await framework.process_inbound(types.SimpleNamespace())).prompt == [""]
    assert [c["prompt"] for c in model.calls] == ["12", ""]


@pytest.mark.anyio
async def test_build_prompt_first_result_wins_and_text_lists_are_joined(
    framework: Framework,
) -> None:
    low = Answering("build_prompt", "low")
    model = TextModel("ok")
    framework.registry.register(low, "low")
    framework.registry.register(Answering("build_prompt", ["line one", "line two"]), "high")
    framework.registry.register(model, "model")
    result = await framework.process_inbound({"content": "raw"})
    assert result.prompt == ["line one", "line two"]
    assert model.calls[0]["prompt"] == "line one\nline two"
    assert low.calls == 0


@pytest.mark.anyio
async def test_media_prompt_reaches_run_model_as_legacy_blocks(framework: Framework) -> None:
    image = republic.image(PNG_DATA_URL)
    model = TextModel("a picture")
    framework.registry.register(Answering("build_prompt", ["describe this", image]), "prompter")
    framework.registry.register(model, "model")
    result = await framework.process_inbound({"content": "raw"})
    assert result.prompt == ["describe this", image]
    assert model.calls[0]["prompt"] == [
        {"type": "text", "text": "describe this"},
        {"type": "image", "media_type": "image/png", "url": PNG_DATA_URL},
    ]
    assert result.model_output == "a picture"


@pytest.mark.anyio
async def test_legacy_media_blocks_from_build_prompt_are_normalised(
    framework: Framework,
) -> None:
    model = TextModel("ok")
    blocks = [
        {"type": "text", "text": "look"},
        {"type": "image", "media_type": "image/png", "url": PNG_DATA_URL},
    ]
    framework.registry.register(Answering("build_prompt", blocks), "prompter")
    framework.registry.register(model, "model")
    result = await framework.process_inbound({"content": "raw"})
    assert result.prompt[0] == "look"
    assert isinstance(result.prompt[1], republic.Image)
    assert model.calls[0]["prompt"] == blocks


@pytest.mark.anyio
async def test_unsupported_prompt_raises_invalid_input_without_save_state(
    framework: Framework,
) -> None:
    log: list[Any] = []
    recorder = Recorder(log)
    framework.registry.register(recorder, "recorder")
    framework.registry.register(Answering("build_prompt", {"not": "a prompt"}), "bad")
    with pytest.raises(HooklineError) as info:
        await framework.process_inbound({"content": "x"})
    assert info.value.kind == ErrorKind.invalid_input
    assert "save_state" not in log
    assert [c["stage"] for c in errors(recorder)] == ["turn"]


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


# -- failures and save_state -----------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("stream_output", [False, True])
async def test_save_state_runs_after_a_model_failure_and_the_error_propagates(
    framework: Framework, stream_output: bool
) -> None:
    log: list[Any] = []
    recorder = Recorder(log)
    failure = ConnectionError("model down")
    framework.registry.register(recorder, "recorder")
    framework.registry.register(TextModel(failure, log), "model")
    inbound = {"content": "hi"}
    with pytest.raises(ConnectionError) as info:
        await framework.process_inbound(inbound, stream_output=stream_output)

    assert info.value is failure
    assert log == [
        "resolve_session", "load_state", "build_prompt", "run_model", "save_state", "on_error",
    ]
    assert recorder.calls["save_state"][0]["model_output"] == ""
    assert recorder.calls["on_error"] == [
        {"stage": "turn", "error": failure, "message": inbound}
    ]


@pytest.mark.anyio
async def test_save_state_runs_when_the_stream_fails_midway(framework: Framework) -> None:
    log: list[Any] = []
    recorder = Recorder(log)
    stream_log: list[str] = []
    streams: list[AsyncStreamEvents] = []

    def make() -> AsyncStreamEvents:
        async def source() -> AsyncIterator[StreamEvent]:
            try:
                yield StreamEvent("text", {"delta": "partial"})
                raise TimeoutError("stream broke")
            finally:
                stream_log.append("closed")

        stream = AsyncStreamEvents(source())
        streams.append(stream)
        return stream

    framework.registry.register(recorder, "recorder")
    framework.registry.register(StreamModel(make), "model")
    with pytest.raises(TimeoutError, match="stream broke"):
        await framework.process_inbound({"content": "hi"}, stream_output=True)
    assert recorder.calls["save_state"][0]["model_output"] == ""
    assert [c["stage"] for c in errors(recorder)] == ["turn"]
    assert streams[0].closed
    assert stream_log == ["closed"]
    assert "render_outbound" not in log


@pytest.mark.anyio
async def test_save_state_failure_replaces_the_model_error(framework: Framework) -> None:
    log: list[Any] = []
    save_failure = OSError("disk full")
    recorder = Recorder(log, {"save_state": save_failure})
    model_failure = ConnectionError("model down")
    framework.registry.register(recorder, "recorder")
    framework.registry.register(TextModel(model_failure), "model")
    with pytest.raises(OSError) as info:
        await framework.process_inbound({"content": "hi"})
    assert info.value is save_failure
    assert info.value.__context__ is model_failure
    assert [c["error"] for c in errors(recorder, "turn")] == [save_failure]


@pytest.mark.anyio
@pytest.mark.parametrize("failing", ["resolve_session", "load_state", "build_prompt"])
async def test_save_state_not_called_when_preparation_fails(
    framework: Framework, failing: str
) -> None:
    log: list[Any] = []
    failure = LookupError(f"{failing} failed")
    recorder = Recorder(log, {failing: failure})
    model = TextModel("never")
    framework.registry.register(recorder, "recorder")
    framework.registry.register(model, "model")
    inbound = {"content": "hi"}
    with pytest.raises(LookupError) as info:
        await framework.process_inbound(inbound)
    assert info.value is failure
    assert "save_state" not in log
    assert model.calls == []
    assert recorder.calls["on_error"] == [{"stage": "turn", "error": failure, "message": inbound}]


@pytest.mark.anyio
async def test_failing_on_error_observer_does_not_hide_the_turn_error(
    framework: Framework,
) -> None:
    seen: list[str] = []

    class BrokenObserver:
        @hookimpl(tryfirst=True)
        def on_error(self, stage, error, message):
            raise RuntimeError("observer broke")

    class Observer:
        @hookimpl
        async def on_error(self, stage, error, message):
            seen.append(stage)

    framework.registry.register(Observer(), "observer")
    framework.registry.register(BrokenObserver(), "broken")
    framework.registry.register(TextModel(KeyError("model")), "model")
    with pytest.raises(KeyError):
        await framework.process_inbound({"content": "hi"})
    assert seen == ["turn"]


# -- result type checks ----------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("stream_output", [False, True])
@pytest.mark.parametrize("bad", [42, b"bytes", ["a"]])
async def test_run_model_wrong_type_is_a_type_error(
    framework: Framework, stream_output: bool, bad: Any
) -> None:
    log: list[Any] = []
    recorder = Recorder(log)
    framework.registry.register(recorder, "recorder")
    framework.registry.register(TextModel(bad), "model")
    with pytest.raises(TypeError, match=r"hook\.run_model must return str or None"):
        await framework.process_inbound({"content": "hi"}, stream_output=stream_output)
    assert recorder.calls["save_state"][0]["model_output"] == ""
    assert [c["stage"] for c in errors(recorder)] == ["turn"]


async def _bare_generator() -> AsyncIterator[StreamEvent]:
    yield StreamEvent("text", {"delta": "bare"})


@pytest.mark.anyio
@pytest.mark.parametrize("stream_output", [False, True])
@pytest.mark.parametrize("bad", [_bare_generator, lambda: "text", lambda: [StreamEvent("text")]])
async def test_run_model_stream_wrong_type_is_a_type_error(
    framework: Framework, stream_output: bool, bad: Any
) -> None:
    log: list[Any] = []
    recorder = Recorder(log)
    framework.registry.register(recorder, "recorder")
    framework.registry.register(StreamModel(bad), "model")
    with pytest.raises(TypeError, match=r"hook\.run_model_stream must return AsyncStreamEvents"):
        await framework.process_inbound({"content": "hi"}, stream_output=stream_output)
    assert "save_state" in log
    assert [c["stage"] for c in errors(recorder)] == ["turn"]


# -- outbound --------------------------------------------------------------------------------


class Dispatcher:
    def __init__(self, name: str, log: list[Any], answer: Any = True) -> None:
        self.name, self.log, self.answer = name, log, answer

    @hookimpl
    def dispatch_outbound(self, message):
        self.log.append((self.name, message))
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


@pytest.mark.anyio
async def test_render_outbound_batches_are_concatenated_in_priority_order(
    framework: Framework,
) -> None:
    log: list[Any] = []
    framework.registry.register(AsyncAnswering("render_outbound", ["list-1", "list-2"]), "lists")
    framework.registry.register(AsyncAnswering("render_outbound", None), "none")
    framework.registry.register(AsyncAnswering("render_outbound", ("tuple-1",)), "tuples")
    framework.registry.register(AsyncAnswering("render_outbound", {"single": True}), "single")
    framework.registry.register(AsyncAnswering("render_outbound", []), "empty")
    framework.registry.register(Dispatcher("first", log), "d1")
    framework.registry.register(Dispatcher("second", log, answer=False), "d2")
    result = await framework.process_inbound({"content": "hi", "channel": "cli"})

    expected = [{"single": True}, "tuple-1", "list-1", "list-2"]
    assert result.outbounds == expected
    # Every dispatch implementation sees every outbound, in outbound order.
    assert log == [
        (name, outbound) for outbound in expected for name in ("second", "first")
    ]


@pytest.mark.anyio
async def test_render_outbound_receives_the_turn(framework: Framework) -> None:
    log: list[Any] = []
    recorder = Recorder(log, {"render_outbound": lambda **kw: [kw["model_output"].upper()]})
    framework.registry.register(recorder, "recorder")
    framework.registry.register(TextModel("answer"), "model")
    inbound = {"content": "hi", "session_id": "s"}
    result = await framework.process_inbound(inbound)
    call = recorder.calls["render_outbound"][0]
    assert call == {"message": inbound, "session_id": "s", "state": result.state,
                    "model_output": "answer"}
    assert result.outbounds == ["ANSWER"]
    assert recorder.calls["dispatch_outbound"] == [{"message": "ANSWER"}]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("inbound", "extra"),
    [
        ({"content": "hi"}, {}),
        ({"content": "hi", "channel": "cli", "chat_id": 0}, {"channel": "cli", "chat_id": 0}),
        ({"content": "hi", "channel": None, "chat_id": "7"}, {"chat_id": "7"}),
        (types.SimpleNamespace(content="hi", channel="web"), {"channel": "web"}),
        (types.SimpleNamespace(content="hi", channel="web", chat_id=None,
                               output_channel="elsewhere"), {"channel": "web"}),
        (types.SimpleNamespace(content="hi"), {}),
    ],
)
async def test_fallback_outbound(framework: Framework, inbound: Any, extra: dict) -> None:
    log: list[Any] = []
    framework.registry.register(AsyncAnswering("render_outbound", None), "none")
    framework.registry.register(Answering("resolve_session", "sid"), "resolver")
    framework.registry.register(TextModel("answer"), "model")
    framework.registry.register(Dispatcher("d", log), "dispatcher")
    result = await framework.process_inbound(inbound)
    expected = {"content": "answer", "session_id": "sid", **extra}
    assert result.outbounds == [expected]
    assert log == [("d", expected)]


@pytest.mark.anyio
async def test_dispatch_failure_fails_the_turn_after_save_state(framework: Framework) -> None:
    log: list[Any] = []
    recorder = Recorder(log, {"render_outbound": ["one", "two"]})
    failure = BrokenPipeError("channel gone")
    framework.registry.register(recorder, "recorder")
    framework.registry.register(Dispatcher("broken", log, answer=failure), "broken")
    framework.registry.register(TextModel("answer"), "model")
    with pytest.raises(BrokenPipeError):
        await framework.process_inbound({"content": "hi"})
    # The failing (newer) dispatcher runs first: the recorder never sees an outbound and
    # the second outbound is never dispatched.
    assert ("broken", "one") in log
    assert ("broken", "two") not in log
    assert "dispatch_outbound" not in log
    assert log.index("save_state") < log.index(("broken", "one"))
    assert [c["error"] for c in errors(recorder, "turn")] == [failure]


# -- envelope forms --------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("stream_output", [False, True])
async def test_plain_object_envelope_end_to_end(
    framework: Framework, stream_output: bool
) -> None:
    log: list[Any] = []
    recorder = Recorder(log)
    framework.registry.register(recorder, "recorder")
    framework.registry.register(TextModel("reply"), "model")
    inbound = types.SimpleNamespace(content="hello", channel="web", chat_id="c1")
    result = await framework.process_inbound(inbound, stream_output=stream_output)
    assert result.session_id == "web:c1"
    assert result.prompt == ["hello"]
    assert result.model_output == "reply"
    assert result.outbounds == [
        {"content": "reply", "session_id": "web:c1", "channel": "web", "chat_id": "c1"}
    ]
    assert recorder.calls["resolve_session"][0]["message"] is inbound
    assert recorder.calls["save_state"][0]["message"] is inbound


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


@pytest.mark.anyio
async def test_cancellation_runs_save_state_and_is_not_reported(framework: Framework) -> None:
    log: list[Any] = []
    recorder = Recorder(log)

    class Hanging:
        def __init__(self) -> None:
            self.scope: anyio.CancelScope | None = None

        @hookimpl
        async def run_model(self, prompt, session_id, state):
            assert self.scope is not None
            self.scope.cancel()
            await anyio.sleep_forever()

    hanging = Hanging()
    framework.registry.register(recorder, "recorder")
    framework.registry.register(hanging, "model")
    with anyio.CancelScope() as scope:
        hanging.scope = scope
        await framework.process_inbound({"content": "hi"})
    assert scope.cancelled_caught
    assert recorder.calls["save_state"][0]["model_output"] == ""
    assert "on_error" not in log
    assert "render_outbound" not in log


class _Explodes:
    @hookimpl
    def build_prompt(self, message, session_id, state):
        return self._deeper()

    def _deeper(self) -> Any:
        raise RuntimeError("the prompt plugin broke")


class _Innocent:
    @hookimpl
    def load_state(self, message, session_id):
        return {"fine": True}


@pytest.mark.anyio
async def test_a_failed_turn_is_logged_once_at_error_naming_the_plugin(
        framework: Framework, caplog: pytest.LogCaptureFixture) -> None:
    framework.registry.register(_Innocent(), "innocent")
    framework.registry.register(_Explodes(), "exploder")
    with caplog.at_level("DEBUG", logger="hookline"), pytest.raises(RuntimeError):
        await framework.process_inbound({"content": "hi", "session_id": "s"})
    failed = [r for r in caplog.records if r.getMessage().startswith("turn.failed")]
    assert len(failed) == 1
    [record] = failed
    assert record.levelname == "ERROR"
    assert record.exc_info is not None and record.exc_info[1] is not None
    message = record.getMessage()
    assert "plugin=exploder hook=build_prompt" in message
    assert "_Explodes.build_prompt" in message
    assert "error=RuntimeError: the prompt plugin broke" in message


@pytest.mark.anyio
async def test_a_failing_dispatch_outbound_is_blamed_on_its_own_plugin(
        framework: Framework, caplog: pytest.LogCaptureFixture) -> None:
    framework.registry.register(_Innocent(), "innocent")

    class Courier:
        @hookimpl
        def dispatch_outbound(self, message):
            raise ValueError("cannot deliver")

    framework.registry.register(Courier(), "courier")
    with caplog.at_level("ERROR", logger="hookline"), pytest.raises(ValueError):
        await framework.process_inbound({"content": "hi", "session_id": "s"})
    [record] = [r for r in caplog.records if r.getMessage().startswith("turn.failed")]
    assert "plugin=courier hook=dispatch_outbound" in record.getMessage()
