"""The model stage run alone through ``HookRuntime.run_model`` / ``run_model_stream``
(rules runtime.run-model, runtime.run-model-stream; the spec fixture
turn/runtime-run-model.toml covers the choice of hook)."""

from __future__ import annotations

import gc
import warnings
from pathlib import Path
from typing import Any

import pytest

from hookline.kernel import hookimpl
from hookline.kernel.framework.core import Framework
from hookline.kernel.streaming import TextAnswerStream

pytestmark = pytest.mark.anyio


class Counting:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls = 0

    @hookimpl
    def run_model(self, prompt: Any) -> Any:
        self.calls += 1
        return self.answer


class BadStream:
    @hookimpl
    def run_model_stream(self) -> Any:
        return ["not", "a", "stream"]


def framework_with(tmp_path: Path, plugin: object, name: str) -> Framework:
    framework = Framework(workspace=tmp_path)
    framework.registry.register(plugin, name=name)
    return framework


async def test_a_text_answer_stream_that_is_never_read_never_runs_the_model(
    tmp_path: Path,
) -> None:
    plugin = Counting("hello")
    runtime = framework_with(tmp_path, plugin, "counting").runtime
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited" would fail here
        stream = await runtime.run_model_stream("hi", "s", {})
        assert isinstance(stream, TextAnswerStream)
        await stream.aclose()
        del stream
        gc.collect()
    assert plugin.calls == 0


async def test_a_none_answer_is_an_empty_stream_that_says_it_was_not_answered(
    tmp_path: Path,
) -> None:
    runtime = framework_with(tmp_path, Counting(None), "silent").runtime
    stream = await runtime.run_model_stream("hi", "s", {})
    assert isinstance(stream, TextAnswerStream)
    assert [event async for event in stream] == []
    assert stream.answered is False


async def test_a_wrong_stream_type_names_the_plugin_and_the_fix(tmp_path: Path) -> None:
    runtime = framework_with(tmp_path, BadStream(), "bad").runtime
    with pytest.raises(TypeError) as raised:
        await runtime.run_model_stream("hi", "s", {})
    message = str(raised.value)
    assert message.startswith("hook.run_model_stream must return AsyncStreamEvents or None; ")
    assert "plugin 'bad', function 'BadStream.run_model_stream'" in message
    assert "returned list; wrap an async generator in AsyncStreamEvents(...)" in message
