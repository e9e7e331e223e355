"""Payloads of the agent interception hooks (before/after LLM and tool calls).

Hooks receive these values and answer with a new request or a decision; the frozen
types make every change explicit (`dataclasses.replace`), except ToolCallResult, which
after_tool_call implementations share and may edit on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, get_args

if TYPE_CHECKING:
    from typing import Self  # a subclass's constructors return the subclass

from .tools import ToolContext

__all__ = [
    "LLMCallDecision",
    "LLMCallRequest",
    "LLMCallResult",
    "ToolCall",
    "ToolCallAction",
    "ToolCallDecision",
    "ToolCallResult",
    "new_run_id",
]

ToolCallAction: TypeAlias = Literal["proceed", "replace", "deny"]

_TOOL_CALL_ACTIONS: tuple[ToolCallAction, ...] = get_args(ToolCallAction)


def new_run_id() -> str:
    """A fresh id for one model call, sortable by time: `run-<UTC stamp><microseconds>Z`."""
    return datetime.now(UTC).strftime("run-%Y%m%dT%H%M%S%fZ")


@dataclass(frozen=True)
class LLMCallRequest:
    """A provider call about to be made. `tool_names` is informational only."""

    run_id: str
    model: str
    messages: list[Any]
    tool_names: tuple[str, ...] = ()
    max_tokens: int | None = None


@dataclass(frozen=True)
class LLMCallResult:
    """What a provider call produced, or how it failed (`error` is the original)."""

    run_id: str
    text: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    error: BaseException | None = None
    duration_ms: float = 0.0


@dataclass(frozen=True)
class LLMCallDecision:
    """Answer the step without calling the provider."""

    action: Literal["finish"] = "finish"
    text: str = ""

    def __post_init__(self) -> None:
        if self.action != "finish":
            raise ValueError(f"LLMCallDecision.action must be 'finish', got {self.action!r}")

    @classmethod
    def finish(cls, text: str) -> Self:
        return cls("finish", text)


@dataclass(frozen=True)
class ToolCall:
    """A tool call about to run; `tool` is the name as invoked (model alias included)."""

    run_id: str
    tool: str
    arguments: dict[str, Any]
    context: ToolContext | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class ToolCallDecision:
    """A before_tool_call answer: change arguments, substitute a result, or refuse."""

    action: ToolCallAction = "proceed"
    arguments: dict[str, Any] | None = None
    result: Any = None
    message: str = ""

    def __post_init__(self) -> None:
        if self.action not in _TOOL_CALL_ACTIONS:
            raise ValueError(
                f"ToolCallDecision.action must be one of {', '.join(_TOOL_CALL_ACTIONS)}, "
                f"got {self.action!r}"
            )

    @classmethod
    def proceed(cls, arguments: dict[str, Any] | None = None) -> Self:
        """Run the tool, with these arguments when given."""
        return cls("proceed", arguments=arguments)

    @classmethod
    def replace(cls, result: Any) -> Self:
        """Do not run the tool; use `result` as its successful result."""
        return cls("replace", result=result)

    @classmethod
    def deny(cls, message: str = "") -> Self:
        """Do not run the tool; fail the call with `message`."""
        return cls("deny", message=message)


@dataclass
class ToolCallResult:
    """Outcome of a tool call, shared (and editable) across after_tool_call hooks."""

    run_id: str
    tool: str
    arguments: dict[str, Any]
    result: Any = None
    error: BaseException | None = None
    duration_ms: float = 0.0
