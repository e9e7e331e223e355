"""The channel manager: runs channels, admits their messages, schedules turns, routes replies.

While it runs it is the framework's router. Each message a channel hands over gets its
session and an admission decision, then runs as a turn, waits as a follow-up, is steered
into the running turn or is dropped, and its channel is told which. The rules, and how
shutdown drains the turns, are in docs/channels.md ("The channel manager").
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import anyio
from anyio.abc import TaskGroup, TaskStatus

from hookline.builtins.channels.debounce import (
    DEFAULT_ACTIVE_WINDOW_SECONDS,
    DEFAULT_DEBOUNCE_SECONDS,
    DebounceBuffer,
)
from hookline.kernel.channels import (
    AdmitDecision,
    AdmitOutcome,
    Channel,
    StopEvent,
    TurnSnapshot,
)
from hookline.kernel.envelope import get_field, set_field
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent

from ..agent.steering import scope_inbox
from ..store.budget import turn_store_budget
from .envelopes import admission_state, channel_message, output_name, tell
from .selection import select_channels

__all__ = ["DEFAULT_SHUTDOWN_TIMEOUT", "ChannelManager"]

logger = logging.getLogger(__name__)

_Applied: TypeAlias = AdmitOutcome | Literal["stopping"]
"""What applying a decision did; `stopping`: the manager is stopping and did not take the
message (its channel is not told: the handler returns without `message_admitted`)."""

STOPPING_REASON = "the channels are stopping"

DEFAULT_SHUTDOWN_TIMEOUT = 30.0
"""Seconds running turns get to finish once the manager is asked to stop."""

_CANCEL_GRACE = 5.0
"""Seconds cancelled turns get to unwind (save state, merge their tape) before channels stop."""


@dataclass(eq=False)
class _Turn:
    """One scheduled `process_inbound` call."""

    session_id: str
    message: Any
    scope: anyio.CancelScope
    task_id: int | None = None
    ending: bool = False
    """`process_inbound` returned: the turn reads no more steering messages."""
    answered: bool = False
    """Its model stream ended, or it sent an outbound to a channel: the turn is past its
    model and tools, only finishing."""

    @property
    def live(self) -> bool:
        """Not cancelled: a cancelled turn is only unwinding and takes no more messages."""
        return not self.scope.cancel_called

    @property
    def steerable(self) -> bool:
        return self.live and not self.ending


@dataclass(eq=False)
class _Session:
    """The turns a session runs and the messages waiting for them to end."""

    running: list[_Turn] = field(default_factory=list)
    pending: deque[Any] = field(default_factory=deque)
    steered: int = 0
    """How many of the first pending messages are steers their turn did not take."""
    steering: int = 0
    """Steers being put into the inbox: the next turn waits for them."""


class ChannelManager:
    """Runs channels and the turns their messages start (see the module docstring).

    `channels` maps names to channels; when None, the channels come from the
    `provide_channels` hook, with this manager's `receive` as their message handler.
    `enabled_channels` selects which of them `run` starts (the rules of `enabled`).
    `stream_output` is passed to every turn, so channels can show streamed output.
    `debounce_seconds` and `active_window_seconds` configure the debounce buffer of the
    channels whose `needs_debounce` is true.
    """

    def __init__(
        self,
        framework: Any,
        channels: Mapping[str, Channel] | None = None,
        *,
        stream_output: bool = True,
        enabled_channels: str | Iterable[str] = "all",
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
        debounce_seconds: float = DEFAULT_DEBOUNCE_SECONDS,
        active_window_seconds: float = DEFAULT_ACTIVE_WINDOW_SECONDS,
        store_deadline: float | None = None,
    ) -> None:
        self.framework = framework
        self.stream_output = stream_output
        self.enabled_channels = enabled_channels
        self.shutdown_timeout = shutdown_timeout
        self.debounce_seconds = debounce_seconds
        self.active_window_seconds = active_window_seconds
        self.store_deadline = store_deadline
        """Seconds each turn may wait on the tape store in all (None: unbounded)."""
        if channels is None:
            channels = framework.get_channels(self.receive)
        self.channels: dict[str, Channel] = dict(channels)
        """Every channel the manager knows, by name (messages from others are dropped)."""
        self.active: dict[str, Channel] = {}
        """The channels `run` started; outbound messages go only to these."""
        self._sessions: dict[str, _Session] = {}
        self._turns: set[_Turn] = set()
        self._task_group: TaskGroup | None = None
        self._debounce: DebounceBuffer | None = None
        self._accepting = False
        self._scheduling = False
        self._halt: anyio.Event | None = None
        self._idle: anyio.Event | None = None
        self._started: list[tuple[str, Channel]] = []
        self._failure: tuple[str, BaseException] | None = None
        for channel in self.channels.values():
            tell(channel.manager_attached)

    # -- selection ---------------------------------------------------------------------

    def enabled(self, names: str | Iterable[str] = "all") -> dict[str, Channel]:
        """The channels to run for a selection (the `provide_channels` rules, `selection.py`)."""
        return select_channels(self.channels, names)

    # -- inbound -----------------------------------------------------------------------

    async def receive(self, message: Any) -> None:
        """The message handler given to channels: admit one inbound envelope."""
        if not self._accepting:
            logger.warning("channel.message_dropped reason=%s channel=%s",
                           "stopping" if self._task_group is not None else "not running",
                           get_field(message, "channel"))
            return
        name = get_field(message, "channel")
        if name is None or str(name) not in self.channels:
            logger.warning("channel.message_dropped reason=unknown channel=%s", name)
            return
        if self._debounce is not None and self.channels[str(name)].needs_debounce:
            if await self._debounce.submit(message) == "ignored":
                self._admitted(message, "drop", "inactive message outside the active window")
            return
        await self._admit(message)

    async def _admit(self, message: Any) -> None:
        """Resolve the session, ask admission and apply the decision."""
        name = get_field(message, "channel")
        try:
            session_id = await self.framework.resolve_session(message)
        except Exception as exc:
            logger.warning("channel.resolve_session_failed channel=%s error=%s: %s", name,
                           type(exc).__name__, exc)
            await self.framework.notify_error("resolve_session", exc, message)
            return
        set_field(message, "session_id", session_id)
        state = admission_state(session_id, message)
        snapshot = self.snapshot(session_id, state)
        try:
            decision = await self.framework.admit_message(session_id, message, snapshot)
            if decision is None:  # no plugin decided: the channel it came from does
                decision = await self._channel_opinion(session_id, message, snapshot)
        except Exception as exc:
            logger.warning("channel.admit_message_failed session=%s error=%s: %s; processing "
                           "the message", session_id, type(exc).__name__, exc)
            await self.framework.notify_error("admit_message", exc, message)
            decision = None
        await self._apply(session_id, message, state, decision)

    def snapshot(self, session_id: str, state: dict[str, Any] | None = None) -> TurnSnapshot:
        """How busy a session is now; `state` keys the steering count (default: session)."""
        session = self._sessions.get(session_id)
        steering = 0
        try:
            if (inbox := scope_inbox(self.framework)) is not None:
                steering = int(inbox.message_count(state or {"session_id": session_id}))
        except Exception as exc:
            logger.warning("channel.steering_count_failed session=%s error=%s: %s",
                           session_id, type(exc).__name__, exc)
        if session is None:
            return TurnSnapshot(session_id, steering_count=steering)
        running = sum(1 for turn in session.running if turn.live)
        return TurnSnapshot(session_id, running, len(session.pending), steering)

    async def _apply(self, session_id: str, message: Any, state: dict[str, Any],
                     decision: AdmitDecision | None) -> None:
        """Carry out the admission decision, then tell the message's channel the outcome
        (``message_admitted(message, outcome, reason)`` with outcome ``process``,
        ``queued``, ``steer`` or ``drop``), so channels that answer a sender can."""
        action = "process" if decision is None else decision.action
        reason = None if decision is None else decision.reason
        outcome: _Applied
        if action == "drop":
            logger.info("channel.message_dropped session=%s reason=%s", session_id,
                        reason or "admit_message decided drop")
            outcome = "drop"
        elif action == "follow_up":
            outcome = self._follow_up(session_id, message)
        elif action == "steer":
            outcome = await self._steer(session_id, message, state, reason)
        else:
            if action != "process":
                logger.warning("channel.unknown_admit_action action=%r session=%s; processing "
                               "the message", action, session_id)
            outcome = self._start(session_id, message)
        if outcome == "stopping":
            logger.warning("channel.message_refused reason=stopping session=%s", session_id)
            return
        self._admitted(message, outcome, reason)

    def _source(self, message: Any) -> Channel | None:
        """The channel a message came from: the one told what became of it."""
        return self.channels.get(str(get_field(message, "channel")))

    def _admitted(self, message: Any, outcome: AdmitOutcome, reason: str | None) -> None:
        channel = self._source(message)
        if channel is not None:
            tell(channel.message_admitted, message, outcome, reason)

    def busy_sessions(self) -> list[str]:
        """Ids of the sessions that have a running (not cancelled) turn."""
        return [session_id for session_id, session in self._sessions.items()
                if any(turn.live for turn in session.running)]

    def unanswered_sessions(self) -> list[str]:
        """Ids of the sessions with a message still to answer: a running turn that has not
        sent its answer, or a pending message. A turn past its answer is only finishing
        (`save_state`, the rest of `dispatch_outbound`, the steering leftovers)."""
        return [session_id for session_id, session in self._sessions.items()
                if session.pending or any(turn.live and not turn.answered
                                          for turn in session.running)]

    def _follow_up(self, session_id: str, message: Any) -> _Applied:
        if not self._scheduling:
            return "stopping"  # a queued message would never start
        session = self._sessions.get(session_id)
        if session is not None and (session.running or session.pending or session.steering):
            pending = session.pending
            pending.append(message)
            logger.info("channel.message_queued session=%s position=%d", session_id,
                        len(pending))
            return "queued"
        return self._start(session_id, message)

    async def _steer(self, session_id: str, message: Any, state: dict[str, Any],
                     reason: str | None) -> _Applied:
        session = self._sessions.get(session_id)
        targets = [turn for turn in session.running if turn.steerable] if session else []
        if session is None or not targets or self.framework.get_steering_inbox() is None:
            if session is not None and any(turn.live for turn in session.running):
                self._queue_steered(session_id, [message])  # its turn is ending: next
                return "queued"
            return self._follow_up(session_id, message)
        session.steering += 1
        try:
            steered = await self.framework.steer_message(message, state, reason)
        except Exception as exc:
            logger.warning("channel.steer_failed session=%s error=%s: %s; queueing the message "
                           "as a follow-up", session_id, type(exc).__name__, exc)
            steered = False
        finally:
            session.steering -= 1
        outcome: _Applied = "steer"
        if not steered:
            outcome = self._follow_up(session_id, message)
        elif not any(turn.steerable for turn in targets):
            # Its turn ended while the message was being queued: nobody will drain it.
            await self._move_leftovers(session_id, state)
        self._next(session_id)
        return outcome

    # -- scheduling --------------------------------------------------------------------

    def _start(self, session_id: str, message: Any) -> _Applied:
        """Run the message's turn now: ``process``, or ``stopping`` when it cannot."""
        task_group = self._task_group
        if not self._scheduling or task_group is None:
            return "stopping"
        session = self._sessions.setdefault(session_id, _Session())
        turn = _Turn(session_id, message, anyio.CancelScope())
        session.running.append(turn)
        self._turns.add(turn)
        task_group.start_soon(self._run_turn, turn, name=f"hookline turn {session_id}")
        return "process"

    async def _run_turn(self, turn: _Turn) -> None:
        turn.task_id = anyio.get_current_task().id
        channel = self._source(turn.message)
        try:
            if channel is not None:
                tell(channel.turn_started, turn.message)
            result = None
            try:
                with turn.scope, turn_store_budget(self.store_deadline):
                    result = await self.framework.process_inbound(
                        turn.message, stream_output=self.stream_output
                    )
            except Exception as exc:  # logged (ERROR) and reported by the pipeline: once
                logger.debug("channel.turn_failed session=%s error=%s: %s", turn.session_id,
                            type(exc).__name__, exc)
            turn.ending = True
            # Steered messages the turn did not take become follow-ups, also when it failed.
            state = result.state if result is not None else admission_state(
                turn.session_id, turn.message)
            await self._move_leftovers(turn.session_id, state)
        finally:
            self._turn_ended(turn)
            if channel is not None:
                tell(channel.turn_finished, turn.message)

    def _turn_ended(self, turn: _Turn) -> None:
        self._turns.discard(turn)
        session = self._sessions.get(turn.session_id)
        if session is not None:
            if turn in session.running:
                session.running.remove(turn)
            if not session.running:
                self._next(turn.session_id)
        if self._idle is not None and not self._turns:
            self._idle.set()

    async def _move_leftovers(self, session_id: str, state: dict[str, Any]) -> None:
        """Steering messages the turn did not take become the session's follow-ups."""
        try:
            if (inbox := scope_inbox(self.framework)) is None:
                return
            leftovers = await inbox.drain_messages(state)
        except Exception as exc:
            logger.warning("channel.steering_drain_failed session=%s error=%s: %s", session_id,
                           type(exc).__name__, exc)
            return
        self._queue_steered(session_id, leftovers)

    def _queue_steered(self, session_id: str, messages: list[Any]) -> None:
        """Queue steers that missed their turn behind earlier ones, ahead of follow-ups."""
        session = self._sessions.setdefault(session_id, _Session())
        for message in messages:
            session.pending.insert(session.steered, message)
            session.steered += 1

    def _next(self, session_id: str) -> None:
        """Start the oldest pending message of an idle session; forget empty sessions."""
        session = self._sessions.get(session_id)
        if session is None or session.running or session.steering:
            return
        if session.pending and self._scheduling:
            session.steered = max(0, session.steered - 1)
            self._start(session_id, session.pending.popleft())
        elif not session.pending:
            del self._sessions[session_id]

    async def quit_session(self, session_id: str, reason: str = "the session was quit",
                           *, keep_answered: bool = False) -> int:
        """Forget a session's pending and steering messages (each reported `drop` to its
        channel, which may owe a sender an answer, with `reason`) and cancel its running
        turns (except the calling task's own, and with `keep_answered` those past their
        answer, left to finish). Returns how many turns were cancelled."""
        forgotten: list[Any] = []
        try:
            if (inbox := scope_inbox(self.framework)) is not None:
                forgotten.extend(await inbox.drain_messages({"session_id": session_id}))
        except Exception as exc:
            logger.warning("channel.steering_drain_failed session=%s error=%s: %s",
                           session_id, type(exc).__name__, exc)
        session = self._sessions.get(session_id)
        if session is not None:
            forgotten.extend(session.pending)
            session.pending.clear()
            session.steered = 0
        for message in forgotten:
            self._admitted(message, "drop", reason)
        if session is None:
            return 0
        current = anyio.get_current_task().id
        cancelled = 0
        for turn in list(session.running):
            if turn.task_id != current and not (keep_answered and turn.answered):
                turn.scope.cancel()
                cancelled += 1
        return cancelled

    # -- router ------------------------------------------------------------------------

    def wrap_stream(self, message: Any, stream: AsyncStreamEvents
                    ) -> AsyncIterable[StreamEvent]:
        """Let the message's (running) output channel observe or wrap the model stream;
        its turn is answered once the stream ends."""
        channel = self.active.get(output_name(message))
        shown = stream if channel is None else channel.stream_events(message, stream)
        return self._answered_at_end(message, shown)

    async def _answered_at_end(self, message: Any, stream: AsyncIterable[StreamEvent]
                               ) -> AsyncIterator[StreamEvent]:
        async for event in stream:
            yield event
        for turn in self._running(message):
            if turn.message is message:
                turn.answered = True

    def _running(self, message: Any) -> list[_Turn]:
        """The running turns of the message's session."""
        session = self._sessions.get(str(get_field(message, "session_id") or ""))
        return session.running if session is not None else []

    def approval_asker(self, message: Any) -> Any:
        """Who asks a person about the message's tool calls: its channel's asker, when
        that channel can ask (`approval_asker`), else None (docs/approvals.md)."""
        channel = self.active.get(output_name(message))
        return None if channel is None else channel.approval_asker(message)

    async def dispatch(self, message: Any) -> bool:
        """Send an outbound through the running channel named by `output_channel`, else
        `channel`, as a `ChannelMessage`; False when there is no such channel."""
        name = output_name(message)
        channel = self.active.get(name)
        if channel is None:
            logger.warning("channel.dispatch_skipped channel=%s reason=%s", name or "(none)",
                           "not running" if name in self.channels else "unknown channel")
            return False
        current = anyio.get_current_task().id
        for turn in self._running(message):
            if turn.task_id == current:  # one sent from another task answers no turn
                turn.answered = True
        await channel.send(channel_message(name, message))
        return True

    async def _channel_opinion(
        self, session_id: str, message: Any, turn: TurnSnapshot
    ) -> AdmitDecision | None:
        """The admission opinion of the channel the message came from (None if unknown)."""
        name = get_field(message, "channel") or get_field(message, "output_channel")
        channel = self.channels.get(str(name)) if name is not None else None
        if channel is None:
            return None
        return await channel.admit_message(session_id, message, turn)

    # -- running -----------------------------------------------------------------------

    @property
    def accepting(self) -> bool:
        """True while `run` accepts messages (channels started, stop not yet requested)."""
        return self._accepting

    async def run(
        self, stop: StopEvent, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Be the framework's router and run the enabled channels until `stop` is set, then
        shut down gracefully (see the module docstring). Call inside `framework.running()`.

        With `task_group.start(manager.run, stop)` it returns once the router is bound, the
        channels' `start` calls are scheduled and messages are accepted.
        If a channel's `start` fails, the manager shuts down the same way and raises a
        RuntimeError naming the channel.
        """
        if self._task_group is not None:
            raise RuntimeError("ChannelManager.run is already running")
        selected = self.enabled(self.enabled_channels)
        previous_router = self.framework.router
        self.framework.router = self
        self.active = selected
        self._started = []
        self._failure = None
        self._halt = anyio.Event()
        try:
            async with anyio.create_task_group() as task_group:
                self._task_group = task_group
                self._debounce = DebounceBuffer(
                    self._admit, task_group, debounce_seconds=self.debounce_seconds,
                    active_window_seconds=self.active_window_seconds)
                self._accepting = self._scheduling = True
                try:
                    task_group.start_soon(self._watch_stop, stop, name="hookline channel stop")
                    for name, channel in selected.items():
                        self._started.append((name, channel))
                        task_group.start_soon(self._run_channel, name, channel, stop,
                                              name=f"hookline channel {name}")
                    task_status.started()
                    await self._halt.wait()
                finally:
                    with anyio.CancelScope(shield=True):
                        await self._shutdown()
                    task_group.cancel_scope.cancel()
        finally:
            self._task_group = None
            self._debounce = None
            self._accepting = self._scheduling = False
            self.active = {}
            if self.framework.router is self:
                self.framework.router = previous_router
        if self._failure is not None:
            name, error = self._failure
            raise RuntimeError(f"channel {name!r} failed: {error}") from error

    async def _watch_stop(self, stop: StopEvent) -> None:
        await stop.wait()
        if self._halt is not None:
            self._halt.set()

    async def _run_channel(self, name: str, channel: Channel, stop: StopEvent) -> None:
        try:
            await channel.start(stop)
        except Exception as exc:
            if self._failure is None:  # `run` raises it: the caller reports it, once
                logger.debug("channel.start_failed channel=%s", name, exc_info=True)
                self._failure = (name, exc)
            else:
                logger.exception("channel.start_failed channel=%s", name)
            if self._halt is not None:
                self._halt.set()

    async def _shutdown(self) -> None:
        """Refuse messages, admit the debounced ones, let turns finish (then cancel them),
        stop channels newest first."""
        self._accepting = False
        if self._debounce is not None:
            with anyio.move_on_after(self.shutdown_timeout):
                await self._debounce.flush()
        self._scheduling = False
        self._drop_pending()  # at once: their senders need not wait for the running turns
        if self._turns:
            self._idle = anyio.Event()
            with anyio.move_on_after(self.shutdown_timeout):
                await self._idle.wait()
        if self._turns:
            logger.warning("channel.shutdown_cancelling turns=%d timeout=%ss", len(self._turns),
                           self.shutdown_timeout)
            for turn in list(self._turns):
                turn.scope.cancel()
            self._idle = anyio.Event()
            with anyio.move_on_after(_CANCEL_GRACE):
                await self._idle.wait()
        self._idle = None
        self._drop_pending()  # steered messages the ended turns did not take
        self._sessions.clear()
        for name, channel in reversed(self._started):
            try:
                await channel.stop()
            except Exception:
                logger.exception("channel.stop_failed channel=%s", name)
        self._started = []

    def _drop_pending(self) -> None:
        """Once stopping, no pending message starts: report each one `drop` (after
        `queued`, or `steer` for a steering leftover), so its channel can tell the sender
        that it did not run."""
        dropped = [message for session in self._sessions.values() for message in session.pending]
        for session in self._sessions.values():
            session.pending.clear()
            session.steered = 0
        if dropped:
            logger.warning("channel.shutdown_dropped_pending messages=%d", len(dropped))
        for message in dropped:
            self._admitted(message, "drop", STOPPING_REASON)
