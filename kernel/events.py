"""Agent events and the EventBus that delivers them.

The agent announces what it does (runs, steps, provider calls, tool calls) as events.
Handlers observe them; some events carry a decision slot, and once a handler fills it the
event reports itself stopped and later handlers do not see it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, overload

from .interception import (
    LLMCallDecision,
    LLMCallRequest,
    LLMCallResult,
    ToolCall,
    ToolCallDecision,
    ToolCallResult,
)

__all__ = [
    "AgentEvent",
    "ChatFinished",
    "CommandFinished",
    "EventBus",
    "EventHandler",
    "LLMCallFinished",
    "LLMCallStarted",
    "RunFinished",
    "RunStarted",
    "StepFinished",
    "StepStarted",
    "TapeEvent",
    "ToolCallFinished",
    "ToolCallStarted",
]

E = TypeVar("E", bound="AgentEvent")

EventHandler = Callable[[Any], Any]
"""Called with the event; may return an awaitable, which the bus awaits."""


@dataclass(kw_only=True)
class AgentEvent:
    """Base of all agent events; `state` is the turn state."""

    state: dict[str, Any] = field(default_factory=dict)

    @property
    def stopped(self) -> bool:
        """True once a handler has decided the outcome; delivery then stops."""
        return False


@dataclass(kw_only=True)
class TapeEvent(AgentEvent):
    """An event that happens within a run and carries the run's tape."""

    tape: Any = None


@dataclass(kw_only=True)
class RunStarted(TapeEvent):
    """A run begins (not emitted for commands or empty prompts)."""

    model: str
    prompt: list[Any]
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True)
class RunFinished(TapeEvent):
    """Exactly once per RunStarted, when the run's stream closes."""

    status: Literal["ok", "error", "cancelled"]
    steps: int = 0
    elapsed_ms: float = 0.0
    error: str | None = None


@dataclass(kw_only=True)
class StepStarted(TapeEvent):
    """A model step begins; `prompt` is None on continuation steps."""

    step: int
    prompt: list[Any] | None = None


@dataclass(kw_only=True)
class StepFinished(TapeEvent):
    """A model step ended; `continue` means the run goes on.

    The agent loop sets `stream_state` (the run's StreamState) so continue_prompt can see
    it; AgentPlugins sets `next_prompt`, which the loop adds as the next user message.
    """

    step: int
    status: Literal["ok", "continue", "error", "auto_handoff"]
    elapsed_ms: float = 0.0
    error: str | None = None
    stream_state: Any = None
    next_prompt: str | None = None


@dataclass(kw_only=True)
class CommandFinished(TapeEvent):
    """A command prompt ran; `line` is the command without its prefix."""

    line: str
    name: str
    status: Literal["ok", "error"]
    elapsed_ms: float = 0.0
    output: str = ""


@dataclass(kw_only=True)
class LLMCallStarted(TapeEvent):
    """Before a provider call; a handler may set `decision` to answer instead."""

    request: LLMCallRequest
    decision: LLMCallDecision | None = None

    @property
    def stopped(self) -> bool:
        return self.decision is not None


@dataclass(kw_only=True)
class LLMCallFinished(TapeEvent):
    """A provider call completed or failed with an Exception."""

    request: LLMCallRequest
    result: LLMCallResult


@dataclass(kw_only=True)
class ToolCallStarted(AgentEvent):
    """Before a tool call; a replace or deny decision stops delivery."""

    call: ToolCall
    decision: ToolCallDecision = field(default_factory=ToolCallDecision.proceed)

    @property
    def stopped(self) -> bool:
        return self.decision.action in ("replace", "deny")


@dataclass(kw_only=True)
class ToolCallFinished(AgentEvent):
    """Every terminal tool outcome: success, failure, replacement or denial."""

    call: ToolCall
    result: ToolCallResult


@dataclass(kw_only=True)
class ChatFinished(TapeEvent):
    """A step's exchange is ready to record on the tape."""

    run_id: str
    model: str = ""
    system_prompt: str | None = None
    new_messages: list[Any] = field(default_factory=list)
    response_text: str | None = None
    tool_calls: list[Any] = field(default_factory=list)
    tool_results: list[Any] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    provider: str | None = None
    assistant_fields: dict[str, Any] = field(default_factory=dict)
    error: BaseException | str | None = None
    context_error: BaseException | str | None = None


class EventBus:
    """Delivers events to handlers in registration order, by isinstance.

    Handler exceptions propagate to the emitter: handlers registered here are trusted
    code (the isolating plugin adapter is one of them).
    """

    def __init__(self) -> None:
        self._handlers: list[tuple[type[AgentEvent], EventHandler]] = []

    @overload
    def on(
        self, event_type: type[E], handler: None = None
    ) -> Callable[[EventHandler], EventHandler]: ...

    @overload
    def on(self, event_type: type[E], handler: EventHandler) -> EventHandler: ...

    def on(
        self, event_type: type[E], handler: EventHandler | None = None
    ) -> EventHandler | Callable[[EventHandler], EventHandler]:
        """Subscribe `handler` to `event_type` and its subclasses; without a handler,
        return a decorator that subscribes the decorated function."""
        if handler is None:

            def decorator(func: EventHandler) -> EventHandler:
                self._handlers.append((event_type, func))
                return func

            return decorator
        self._handlers.append((event_type, handler))
        return handler

    def off(self, event_type: type[AgentEvent], handler: EventHandler) -> None:
        """Remove one subscription of that pair; nothing happens if there is none."""
        for index, (registered_type, registered) in enumerate(self._handlers):
            if registered_type is event_type and registered == handler:
                del self._handlers[index]
                return

    async def emit(self, event: E) -> E:
        """Deliver `event` and return it, possibly modified by handlers.

        The handler list is snapshotted first, so subscribing or unsubscribing during
        delivery affects only later emits. Delivery stops as soon as the event is stopped.
        """
        for event_type, handler in list(self._handlers):
            if event.stopped:
                break
            if not isinstance(event, event_type):
                continue
            result = handler(event)
            if inspect.isawaitable(result):
                await result
        return event
