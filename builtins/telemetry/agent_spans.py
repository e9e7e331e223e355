"""Model call and tool call spans, read from the agent's event bus (GenAI conventions).

Subscribed last, after the interception plugins: a model call a plugin answered itself
(an `LLMCallDecision`) never reaches us, which is right, as no model was called; a tool
call we see start ran, and one that finishes unseen was replaced or denied by a plugin.
Message content goes on spans only with `otel_capture_content`, as prompts, replies and
tool arguments hold private data.
"""

from __future__ import annotations

import json
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from hookline.kernel.events import (
    EventBus,
    LLMCallFinished,
    LLMCallStarted,
    RunFinished,
    ToolCallFinished,
    ToolCallStarted,
)
from hookline.kernel.turn import RUNTIME_TOOL_NAMES

from ..agent.compacting import COMPACTION_STATE
from ..approval.question import APPROVAL_RECORD
from .metrics import Metrics

NOT_OFFERED = "(not offered)"
"""The tool label of a call to a tool the turn did not offer."""

RUN_FAILURES: ContextVar[list[str] | None] = ContextVar("hookline_run_failures", default=None)
"""Where the turn's span collects the errors its runs ended with: the pipeline answers a
failed run with an error reply, not an exception, and the turn must still count as one."""


@dataclass
class _OpenCall:
    span: trace.Span
    spec: str
    state_id: int


@dataclass
class _RunCalls:
    """Per step (`run_id`): the call ids the model asked for, and the call now running."""

    call_ids: list[tuple[str, str]] = field(default_factory=list)
    proceeding: bool = False


class AgentSpans:
    """The spans of one agent's model and tool calls, on `tracer`."""

    def __init__(self, tracer: trace.Tracer, metrics: Metrics, capture_content: bool) -> None:
        self.tracer = tracer
        self.metrics = metrics
        self.capture_content = capture_content
        self._open: dict[str, _OpenCall] = {}
        self._runs: dict[str, _RunCalls] = {}
        self._handlers: list[tuple[type[Any], Any]] = [
            (LLMCallStarted, self._llm_started), (LLMCallFinished, self._llm_finished),
            (ToolCallStarted, self._tool_started), (ToolCallFinished, self._tool_finished),
            (RunFinished, self._run_finished)]

    def attach(self, bus: EventBus) -> None:
        for event_type, handler in self._handlers:
            bus.on(event_type, handler)

    def detach(self, bus: EventBus) -> None:
        for event_type, handler in self._handlers:
            bus.off(event_type, handler)

    # -- model calls -----------------------------------------------------------------

    def _llm_started(self, event: LLMCallStarted) -> None:
        request = event.request
        provider, colon, model = request.model.partition(":")  # ollama:llama3:8b
        if not colon:
            provider, model = "", request.model
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "hookline.model.spec": request.model,
        }
        if provider:
            attributes["gen_ai.provider.name"] = provider
        if request.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = request.max_tokens
        if self.capture_content:
            attributes["gen_ai.input.messages"] = _json([_message(m) for m in request.messages])
        compacting = event.state.get(COMPACTION_STATE)
        if isinstance(compacting, str):  # a summary call, and why
            attributes["hookline.compaction.reason"] = compacting
        span = self.tracer.start_span(f"chat {model}", kind=SpanKind.CLIENT,
                                      attributes=attributes)
        self._open[request.run_id] = _OpenCall(span, request.model, id(event.state))

    def _llm_finished(self, event: LLMCallFinished) -> None:
        result = event.result
        opened = self._open.pop(event.request.run_id, None)
        if opened is None:
            return
        span = opened.span
        usage = result.usage or {}
        input_tokens = int(usage.get("input_tokens") or 0)
        output_tokens = int(usage.get("output_tokens") or 0)
        if result.usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
            self.metrics.tokens(opened.spec, input_tokens, output_tokens)
        if result.error is not None:
            span.set_attribute("gen_ai.response.finish_reasons", ["error"])
            span.set_attribute("error.type", type(result.error).__name__)
            span.record_exception(result.error)
            span.set_status(Status(StatusCode.ERROR, str(result.error)))
        else:
            reason = "tool_calls" if result.tool_calls else "stop"
            span.set_attribute("gen_ai.response.finish_reasons", [reason])
        if self.capture_content and result.error is None:
            reply: dict[str, Any] = {"role": "assistant", "content": result.text or ""}
            if result.tool_calls:
                reply["tool_calls"] = result.tool_calls
            span.set_attribute("gen_ai.output.messages", _json([reply]))
        span.end()
        if result.tool_calls:
            self._runs.setdefault(event.request.run_id, _RunCalls()).call_ids = [
                (str(call.get("id", "")), str(call.get("name", "")))
                for call in result.tool_calls]

    def _run_finished(self, event: RunFinished) -> None:
        """A failed run is the turn's failure (`RUN_FAILURES`); a call still open when its
        run ends was cancelled (no finished event came)."""
        failures = RUN_FAILURES.get()
        if event.status == "error" and failures is not None:
            failures.append(event.error or "the run failed")
        for run_id, opened in list(self._open.items()):
            if opened.state_id == id(event.state):
                del self._open[run_id]
                opened.span.set_attribute("gen_ai.response.finish_reasons", ["cancelled"])
                opened.span.set_status(Status(StatusCode.ERROR, "cancelled"))
                opened.span.end()

    # -- tool calls ------------------------------------------------------------------

    def _tool_started(self, event: ToolCallStarted) -> None:
        self._runs.setdefault(event.call.run_id, _RunCalls()).proceeding = True

    def _tool_finished(self, event: ToolCallFinished) -> None:
        call, result = event.call, event.result
        run = self._runs.setdefault(call.run_id, _RunCalls())
        proceeded, run.proceeding = run.proceeding, False
        call_id = run.call_ids.pop(0)[0] if run.call_ids else ""
        if not run.call_ids:  # the step's last call: nothing more to pair
            del self._runs[call.run_id]
        if proceeded:
            outcome = "failed" if result.error is not None else "ran"
        else:
            outcome = "denied" if result.error is not None else "replaced"
        end = time.time_ns()
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.tool,
            "gen_ai.tool.call.id": call_id,
            "hookline.tool.outcome": outcome,
            "hookline.tool.duration_ms": result.duration_ms,
        }
        approval = event.state.get(APPROVAL_RECORD)
        if isinstance(approval, dict) and approval.get("run_id") == call.run_id \
                and approval.get("tool") == call.tool:
            attributes["hookline.approval.decision"] = str(approval.get("decision"))
            attributes["hookline.approval.by"] = str(approval.get("by"))
            if approval.get("rule"):
                attributes["hookline.approval.rule"] = str(approval["rule"])
            if approval.get("escalate"):
                attributes["hookline.approval.escalate"] = str(approval["escalate"])
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = _json(call.arguments)
            if result.result is not None:
                attributes["gen_ai.tool.call.result"] = _json(result.result)
        span = self.tracer.start_span(f"execute_tool {call.tool}", kind=SpanKind.INTERNAL,
                                      attributes=attributes,
                                      start_time=end - int(result.duration_ms * 1_000_000))
        if result.error is not None:
            span.set_attribute("error.type", type(result.error).__name__)
            span.record_exception(result.error)
            span.set_status(Status(StatusCode.ERROR, str(result.error)))
        span.end(end_time=end)
        offered = event.state.get(RUNTIME_TOOL_NAMES)
        known = not isinstance(offered, list) or call.tool.replace(".", "_") in offered
        # A label holds a name this process offered: a model's made-up names (any text,
        # any length) would grow every scrape for the process's life.
        self.metrics.tool_call(call.tool if known else NOT_OFFERED, outcome)


def _message(message: Any) -> Any:
    """A message as JSON data, media replaced by its type (never the bytes)."""
    data = message.to_dict() if hasattr(message, "to_dict") else message
    if isinstance(data, dict) and isinstance(data.get("content"), list):
        data = {**data, "content": [
            {"type": item.get("type"), "media_type": item.get("media_type")}
            if isinstance(item, dict) and "url" in item else item
            for item in data["content"]]}
    return data


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
