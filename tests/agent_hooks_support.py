"""Agent hook requests and tool calls for the agent hook tests
(tests/kernel/framework/test_agent_hooks*.py)."""

from __future__ import annotations

from typing import Any

from hookline.kernel.interception import LLMCallRequest, ToolCall


def _request(model: str = "openai:gpt") -> LLMCallRequest:
    return LLMCallRequest("run-1", model, [{"role": "user", "content": "hi"}])


def _call(**arguments: Any) -> ToolCall:
    return ToolCall("run-1", "search", dict(arguments))
