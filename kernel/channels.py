"""Channels, the channel router, admission decisions and the steering inbox.

A channel moves envelopes between the outside world and the framework. The router is what
the framework sends outbound envelopes and model streams through (the channel manager, or
the command line's printer). Admission decides what happens to an inbound message while
its session may already be busy; steering lets a message join a running turn instead of
waiting for the next one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Literal,
    Protocol,
    TypeAlias,
    get_args,
    runtime_checkable,
)

if TYPE_CHECKING:
    from typing import Self  # a subclass's constructors return the subclass

from .streaming import AsyncStreamEvents, StreamEvent

__all__ = [
    "ADMIT_ACTIONS",
    "AdmitAction",
    "AdmitDecision",
    "AdmitOutcome",
    "ApprovalRouter",
    "Channel",
    "ChannelRouter",
    "Interface",
    "Lifecycle",
    "MessageHandler",
    "SteeringInbox",
    "StopEvent",
    "TurnSnapshot",
]

MessageHandler: TypeAlias = Callable[[Any], Awaitable[None]]
"""Where a channel delivers each inbound envelope."""

AdmitAction: TypeAlias = Literal["follow_up", "process", "steer", "drop"]

ADMIT_ACTIONS: tuple[AdmitAction, ...] = get_args(AdmitAction)
"""Every admission action, in the order messages list them (`http_busy_session`'s too)."""

AdmitOutcome: TypeAlias = Literal["process", "queued", "steer", "drop"]
"""What became of an admitted message, as `Channel.message_admitted` is told: its turn
started (`process`), it waits behind the session's running turn (`queued`), it was fed
into the running turn (`steer`), or it was discarded (`drop`)."""


class StopEvent(Protocol):
    """The event a channel watches to know it should stop (asyncio, trio or anyio Event)."""

    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


_DERIVED: Any = object()
"""Default of `TurnSnapshot.is_running`: derive it from `running_count`."""


@dataclass(frozen=True)
class TurnSnapshot:
    """How busy a session is when a new message arrives for it."""

    session_id: str
    running_count: int = 0
    pending_count: int = 0
    steering_count: int = 0
    is_running: bool = _DERIVED
    """`running_count > 0`. A field, as in the reference, so it can be given and appears in
    `asdict`; left out it is derived, and given it must agree with `running_count`."""

    def __post_init__(self) -> None:
        running = self.running_count > 0
        if self.is_running is _DERIVED:
            object.__setattr__(self, "is_running", running)
        elif bool(self.is_running) is not running:
            raise ValueError(f"TurnSnapshot(is_running={self.is_running!r}) contradicts "
                             f"running_count={self.running_count}")


@dataclass(frozen=True)
class AdmitDecision:
    """What to do with an inbound message; None from every hook means `process`."""

    action: AdmitAction
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.action not in ADMIT_ACTIONS:
            raise ValueError(
                f"AdmitDecision.action must be one of {', '.join(ADMIT_ACTIONS)}, "
                f"got {self.action!r}"
            )

    @classmethod
    def process(cls) -> Self:
        """Run the message now, concurrently with any running turn."""
        return cls("process")

    @classmethod
    def drop(cls, reason: str | None = None) -> Self:
        """Discard the message."""
        return cls("drop", reason)

    @classmethod
    def follow_up(cls, reason: str | None = None) -> Self:
        """Queue the message behind the session's running turn."""
        return cls("follow_up", reason)

    @classmethod
    def steer(cls, reason: str | None = None) -> Self:
        """Feed the message into the running turn (falls back to follow_up)."""
        return cls("steer", reason)


class Channel(ABC):
    """A source and destination of envelopes (CLI, chat service, webhook, ...).

    Besides `start`, `stop` and the overridable `send`, `stream_events` and
    `admit_message`, a channel has the callbacks through which a channel manager tells it
    what became of the messages it handed over (`manager_attached`, `message_admitted`,
    `turn_started`, `turn_finished`) and through which a host tells it that it cancelled
    turns (`turns_cancelled`). Each default does nothing, so a channel overrides only those
    it needs. Callbacks are plain methods, called synchronously; when one the manager
    calls raises, the manager logs it and goes on scheduling.
    """

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

    def stream_events(self, message: Any, stream: AsyncStreamEvents
                      ) -> AsyncIterable[StreamEvent]:
        """Let the channel observe or wrap a model stream meant for it; default unchanged."""
        return stream

    async def admit_message(
        self, session_id: str, message: Any, turn: TurnSnapshot
    ) -> AdmitDecision | None:
        """The channel's own admission opinion, consulted by the builtin hook."""
        return None

    # -- what a channel manager tells the channel ---------------------------------------

    def manager_attached(self) -> None:
        """A channel manager took this channel (once, when the manager is built).

        From then on the manager reports every message the channel hands to its handler:
        `message_admitted` once the message is admitted, before the handler returns (a
        message a debounce buffer holds is reported later, as the merged message of its
        batch), and `turn_started` / `turn_finished` around its turn. A message for which
        the handler returns without `message_admitted` and that no buffer holds was not
        taken: the manager is not running or is stopping, the envelope names a channel the
        manager does not know, or resolving its session failed (reported to `on_error`,
        whose error outbound comes back through `send`).
        """
        return None

    def message_admitted(self, message: Any, outcome: AdmitOutcome,
                         reason: str | None = None) -> None:
        """`message`, handed over by this channel, was admitted with `outcome` (see
        `AdmitOutcome`; `reason` from the decision or the manager). A `queued` message may
        be reported again as `drop` when the manager stops before its turn starts; a
        `steer` message the running turn did not take later gets a turn of its own."""
        return None

    def turn_started(self, message: Any) -> None:
        """The turn for `message` starts; called in the task that runs it, which also sends
        the turn's outbounds (and reads its model stream)."""
        return None

    def turn_finished(self, message: Any) -> None:
        """The turn for `message` ended (normally, failed or cancelled), after its outbounds
        were sent; called in the task that ran it."""
        return None

    # -- what a host tells the channel --------------------------------------------------

    def turns_cancelled(self, session_ids: Iterable[str]) -> None:
        """The host cancelled the running turns of these sessions on the user's request
        (`hookline chat` on Ctrl-C, after `ChannelManager.quit_session`)."""
        return None

    def approval_asker(self, message: Any) -> Any:
        """Who asks a person about the tool calls of the turn for `message`, handed over
        by this channel: an object with `async ask(question) -> answer` (the builtin
        approval gate's asker), or None when nobody can answer here."""
        return None


class Interface(Channel, ABC):
    """A user-facing channel: runs only when named explicitly."""


class Lifecycle(Channel, ABC):
    """A background channel: runs unless excluded."""


@runtime_checkable
class ChannelRouter(Protocol):
    """What the framework sends model streams and outbound envelopes through
    (`Framework.router`): the channel manager while it runs, the command line's printer
    for `hookline run`."""

    def wrap_stream(self, message: Any, stream: AsyncStreamEvents
                    ) -> AsyncIterable[StreamEvent]:
        """Observe or wrap the model stream of the turn for inbound `message`; the pipeline
        reads what this returns (stream path only) and closes `stream` itself."""
        ...

    async def dispatch(self, message: Any) -> bool:
        """Deliver one outbound envelope (the builtin `dispatch_outbound` and `on_error`);
        False when nothing could take it."""
        ...


@runtime_checkable
class ApprovalRouter(Protocol):
    """A router that knows who can answer a question about a turn's tool calls (the
    channel manager: the message's channel; `hookline run`'s printer: its terminal)."""

    def approval_asker(self, message: Any) -> Any:
        """The asker for the turn of inbound `message`, or None."""
        ...


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
