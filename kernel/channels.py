"""Channels, admission decisions and the steering inbox.

A channel moves envelopes between the outside world and the framework. Admission decides
what happens to an inbound message while its session may already be busy; steering lets a
message join a running turn instead of waiting for the next one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, TypeAlias, runtime_checkable

from .streaming import AsyncStreamEvents

__all__ = [
    "AdmitAction",
    "AdmitDecision",
    "Channel",
    "Interface",
    "Lifecycle",
    "MessageHandler",
    "SteeringInbox",
    "StopEvent",
    "TurnSnapshot",
]

MessageHandler: TypeAlias = Callable[[Any], Awaitable[None]]
"""Where a channel delivers each inbound envelope."""

AdmitAction: TypeAlias = Literal["process", "drop", "follow_up", "steer"]

_ADMIT_ACTIONS = ("process", "drop", "follow_up", "steer")


class StopEvent(Protocol):
    """The event a channel watches to know it should stop (asyncio, trio or anyio Event)."""

    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


@dataclass(frozen=True)
class TurnSnapshot:
    """How busy a session is when a new message arrives for it."""

    session_id: str
    running_count: int = 0
    pending_count: int = 0
    steering_count: int = 0

    @property
    def is_running(self) -> bool:
        return self.running_count > 0


@dataclass(frozen=True)
class AdmitDecision:
    """What to do with an inbound message; None from every hook means `process`."""

    action: AdmitAction
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.action not in _ADMIT_ACTIONS:
            raise ValueError(
                f"AdmitDecision.action must be one of {', '.join(_ADMIT_ACTIONS)}, "
                f"got {self.action!r}"
            )

    @classmethod
    def process(cls) -> AdmitDecision:
        """Run the message now, concurrently with any running turn."""
        return cls("process")

    @classmethod
    def drop(cls, reason: str | None = None) -> AdmitDecision:
        """Discard the message."""
        return cls("drop", reason)

    @classmethod
    def follow_up(cls, reason: str | None = None) -> AdmitDecision:
        """Queue the message behind the session's running turn."""
        return cls("follow_up", reason)

    @classmethod
    def steer(cls, reason: str | None = None) -> AdmitDecision:
        """Feed the message into the running turn (falls back to follow_up)."""
        return cls("steer", reason)


class Channel(ABC):
    """A source and destination of envelopes (CLI, chat service, webhook, ...)."""

    name: ClassVar[str] = "base"
    needs_debounce: bool = False
    enabled: bool = True

    @abstractmethod
    async def start(self, stop_event: StopEvent) -> None:
        """Begin receiving; may return at once or run until `stop_event` is set."""

    @abstractmethod
    async def stop(self) -> None:
        """Release everything `start` acquired."""

    async def send(self, message: Any) -> None:
        """Deliver an outbound envelope; channels that only receive keep the no-op."""
        return None

    def stream_events(self, message: Any, stream: AsyncStreamEvents) -> AsyncStreamEvents:
        """Let the channel observe or wrap a model stream meant for it; default unchanged."""
        return stream

    async def admit_message(
        self, session_id: str, message: Any, turn: TurnSnapshot
    ) -> AdmitDecision | None:
        """The channel's own admission opinion, consulted by the builtin hook."""
        return None


class Interface(Channel, ABC):
    """A user-facing channel: runs only when named explicitly."""


class Lifecycle(Channel, ABC):
    """A background channel: runs unless excluded."""


@runtime_checkable
class SteeringInbox(Protocol):
    """Messages waiting to join a running turn; keyed by whatever the state says."""

    async def enqueue_message(self, message: Any, state: dict[str, Any]) -> None:
        """Store a message for the turn the state identifies."""
        ...

    async def drain_messages(self, state: dict[str, Any]) -> list[Any]:
        """Remove and return the waiting messages, oldest first."""
        ...

    def message_count(self, state: dict[str, Any]) -> int:
        """How many messages wait for the turn the state identifies."""
        ...
