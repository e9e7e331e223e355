"""Interception payloads: frozenness, constructors, validation and run ids."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta

import pytest

from hookline.kernel.interception import (
    LLMCallDecision,
    LLMCallRequest,
    LLMCallResult,
    ToolCall,
    ToolCallDecision,
    ToolCallResult,
    new_run_id,
)
from hookline.kernel.tools import ToolContext


def test_new_run_id_format() -> None:
    run_id = new_run_id()
    match = re.fullmatch(r"run-(\d{8}T\d{6})(\d{6})Z", run_id)
    assert match is not None
    stamp = datetime.strptime(match.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=UTC)
    assert abs(datetime.now(UTC) - stamp) < timedelta(minutes=1)


def test_llm_request_is_frozen_and_replaceable() -> None:
    request = LLMCallRequest("run-1", "openai:gpt", [{"role": "user"}])
    assert request.tool_names == () and request.max_tokens is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.model = "x"  # type: ignore[misc]
    rerouted = dataclasses.replace(request, model="ollama:llama", max_tokens=64)
    assert rerouted.model == "ollama:llama" and rerouted.messages is request.messages
    assert request.model == "openai:gpt"


def test_llm_result_and_decision() -> None:
    error = RuntimeError("boom")
    result = LLMCallResult("run-1", None, [], None, error, 12.5)
    assert result.error is error and result.duration_ms == 12.5
    assert LLMCallResult("run-1").tool_calls == []
    decision = LLMCallDecision.finish("cached answer")
    assert decision == LLMCallDecision("finish", "cached answer")
    with pytest.raises(ValueError):
        LLMCallDecision("skip", "x")  # type: ignore[arg-type]


def test_tool_call_context_excluded_from_repr_and_equality() -> None:
    context = ToolContext(run_id="run-1", state={"secret": "value"})
    with_context = ToolCall("run-1", "fs_read", {"path": "a"}, context)
    without = ToolCall("run-1", "fs_read", {"path": "a"})
    assert with_context == without
    assert "secret" not in repr(with_context)
    assert "context" not in repr(with_context)
    assert with_context.context is context
    assert without.context is None


def test_tool_call_decisions() -> None:
    assert ToolCallDecision.proceed() == ToolCallDecision("proceed", None, None, "")
    assert ToolCallDecision.proceed({"x": 1}).arguments == {"x": 1}
    replaced = ToolCallDecision.replace({"cached": True})
    assert (replaced.action, replaced.result) == ("replace", {"cached": True})
    denied = ToolCallDecision.deny("not allowed")
    assert (denied.action, denied.message) == ("deny", "not allowed")
    assert ToolCallDecision.deny().message == ""
    with pytest.raises(ValueError, match="action"):
        ToolCallDecision("skip")  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        denied.message = "x"  # type: ignore[misc]


def test_tool_call_result_is_mutable() -> None:
    result = ToolCallResult("run-1", "fs_read", {"path": "a"})
    assert (result.result, result.error, result.duration_ms) == (None, None, 0.0)
    result.result = "edited by a hook"
    result.error = ValueError("kept")
    assert result.result == "edited by a hook"
