"""Recording plugins and stream helpers for the turn pipeline tests
(tests/kernel/framework/test_pipeline*.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from hookline.kernel import hookimpl
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent

PNG_DATA_URL = "data:image/png;base64,iVBORw0KGgo="


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
