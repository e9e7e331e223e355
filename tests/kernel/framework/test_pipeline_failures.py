"""Failing turns in the pipeline: save_state still runs, the right error propagates, wrong
result types are type errors, cancellation is not reported, and a failure is logged once
naming the plugin to blame."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from pipeline_support import Recorder, StreamModel, TextModel, errors

from hookline.kernel import hookimpl
from hookline.kernel.framework.core import Framework
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent

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
