"""What one model step asks and produced, and what a tool call's record keeps of what
happened: the agent loop's bookkeeping, apart from its control flow."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.interception import LLMCallResult, ToolCall, ToolCallResult
from hookline.kernel.messages import ModelMessage, ToolCallSpec
from hookline.kernel.streaming import StreamEvent

from ..models.base import Finished, Retrying, TextDelta, ToolCallEvent, Usage
from ..store.entries import valid_values
from ..tape.spill import model_text

__all__ = ["StepOutcome", "StepRequest", "as_hookline_error", "error_dict", "requested_arguments",
           "tool_record", "what_ran"]


@dataclass(slots=True)
class StepRequest:
    """What one model step sends, as it stands: a compaction starts it again with a new
    context, the messages that are new in the step stay (recorded on the tape once)."""

    prompt: list[Any] | None
    """The prompt `StepStarted` announces (the run's, on its first step)."""
    started: float
    """When the step (or its restart after a compaction) started: `time.perf_counter()`."""
    run_id: str
    system: str
    context: list[ModelMessage]
    """The tape's context, read before the step's new messages are recorded."""
    messages: list[ModelMessage]
    """The step's new messages: its prompt, then the steered ones."""
    reason: str | None
    """Why the context is compacted before the next call (`budget`, `overflow`), if it is."""
    recorded: bool = False
    """Whether `messages` are on the tape already."""
    resumes: bool = False
    """Whether `messages` resume the turn after a compaction's anchor (`RESUMES`)."""
    steered: int = 0
    """How many of `messages`, the last ones, were steered into the running turn."""

    def conversation(self) -> list[ModelMessage]:
        return self.context + self.messages


@dataclass
class StepOutcome:
    """What one model call produced so far."""

    text: str = ""
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    usage: dict[str, Any] | None = None

    def result(self, run_id: str, error: BaseException | None, opened: float) -> LLMCallResult:
        """The call as `after_llm_call` sees it; `opened` is when it started
        (`time.perf_counter()`)."""
        return LLMCallResult(
            run_id=run_id, text=self.text or None,
            tool_calls=[call.to_dict() for call in self.tool_calls], usage=self.usage,
            error=error, duration_ms=(time.perf_counter() - opened) * 1000)

    def take(self, event: Any) -> StreamEvent | None:
        """Fold a model event in; return the stream event to pass on, if any."""
        if isinstance(event, TextDelta) and event.text:
            self.text += event.text
            return StreamEvent("text", {"delta": event.text})
        if isinstance(event, ToolCallEvent):
            self.tool_calls.append(event.call)
            return StreamEvent("tool_call", {"tool_calls": [event.call.to_dict()]})
        if isinstance(event, Retrying):
            return StreamEvent("retry", {"reason": event.reason, "wait": event.wait,
                                         "attempt": event.attempt, "attempts": event.attempts})
        if isinstance(event, Usage):
            self.usage = event.data
        elif isinstance(event, Finished):
            self.usage = event.usage or self.usage
            if not self.tool_calls:
                self.tool_calls = list(event.tool_calls)
            if not self.text and event.text:  # a client that sent no deltas
                self.text = event.text
                return StreamEvent("text", {"delta": event.text})
        return None


def error_dict(error: BaseException) -> dict[str, Any]:
    if isinstance(error, HooklineError):
        return error.as_dict()
    return {"kind": "tool", "message": f"{type(error).__name__}: {error}"}


def as_hookline_error(exc: Exception, model: str) -> HooklineError:
    if isinstance(exc, HooklineError):
        return exc
    return HooklineError(ErrorKind.provider, f"model {model!r} failed: {type(exc).__name__}: "
                                             f"{exc}")


def what_ran(action: str, requested: dict[str, Any], call: ToolCall,
              result: ToolCallResult) -> dict[str, Any]:
    """What a tool_result record keeps of what really happened: the outcome (`ran`,
    `denied`, `replaced` or `failed`), the arguments that ran, and the model's own when a
    plugin rewrote them, and the error message."""
    outcome = {"deny": "denied", "replace": "replaced"}.get(action, "ran")
    if outcome == "ran" and result.error is not None:
        outcome = "failed"
    ran = dict(call.arguments)
    what: dict[str, Any] = {"outcome": outcome, "arguments": ran}
    if ran != requested:
        what["requested_arguments"] = requested
    if result.error is not None:
        what["error"] = str(getattr(result.error, "message", result.error))
    return what


def requested_arguments(spec: ToolCallSpec) -> tuple[dict[str, Any], str | None]:
    """The arguments a call requested, as one object (the model's text under `_raw`, a
    value that is no object under `_value`), and why they are invalid, if they are: the
    call is refused with that unless a hook fixes them."""
    invalid = None
    try:
        arguments = spec.args
    except ValueError as exc:
        arguments = {"_raw": spec.arguments}
        invalid = f"arguments are not valid JSON ({exc}); send one JSON object"
    if not isinstance(arguments, dict):
        invalid = invalid or "arguments must be one JSON object"
        arguments = {"_value": arguments}
    # Whatever model sent them: half an emoji is valid JSON but no character a file, a
    # command or an MCP server's stream can take.
    return valid_values(arguments), invalid


def tool_record(spec: ToolCallSpec, action: str, requested: dict[str, Any], call: ToolCall,
                result: ToolCallResult) -> dict[str, Any]:
    """The tool_result record of a call: its output as the model reads it (the error, as
    JSON, when there is no output) and what ran."""
    output = result.result
    if output is None and result.error is not None:
        output = json.dumps(error_dict(result.error), ensure_ascii=False)
    return {"call_id": spec.id, "name": spec.name, "output": model_text(output),
            "is_error": result.error is not None and result.result is None,
            **what_ran(action, requested, call, result)}
