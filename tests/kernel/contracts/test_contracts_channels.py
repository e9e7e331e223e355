"""Channel defaults, admission decisions, turn snapshots and the steering inbox protocol."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import pytest

from hookline.kernel.channels import (
    AdmitDecision,
    Channel,
    Interface,
    Lifecycle,
    SteeringInbox,
    TurnSnapshot,
)
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent


class Recorder(Lifecycle):
    name = "recorder"

    def __init__(self) -> None:
        self.started = False

    async def start(self, stop_event: Any) -> None:
        self.started = True

    async def stop(self) -> None:
        self.started = False


class Terminal(Interface):
    name = "terminal"

    async def start(self, stop_event: Any) -> None:
        await stop_event.wait()

    async def stop(self) -> None:
        return None


def test_admit_decision_constructors() -> None:
    assert AdmitDecision.process() == AdmitDecision("process", None)
    assert AdmitDecision.drop() == AdmitDecision("drop")
    assert AdmitDecision.drop("spam").reason == "spam"
    assert AdmitDecision.follow_up("busy") == AdmitDecision("follow_up", "busy")
    assert AdmitDecision.steer().action == "steer"
    with pytest.raises(dataclasses.FrozenInstanceError):
        AdmitDecision.process().action = "drop"  # type: ignore[misc]


@pytest.mark.parametrize("action", ["queue", "", "PROCESS", None])
def test_admit_decision_rejects_unknown_action(action: Any) -> None:
    with pytest.raises(ValueError, match=r"AdmitDecision\.action"):
        AdmitDecision(action)


def test_turn_snapshot() -> None:
    idle = TurnSnapshot("s")
    assert (idle.running_count, idle.pending_count, idle.steering_count) == (0, 0, 0)
    assert idle.is_running is False
    assert TurnSnapshot("s", running_count=2, pending_count=1).is_running is True
    # A field, as in the reference: it can be given, and it is part of asdict.
    built = TurnSnapshot("s", running_count=1, is_running=True)
    assert dataclasses.asdict(built) == {"session_id": "s", "running_count": 1,
                                         "pending_count": 0, "steering_count": 0,
                                         "is_running": True}
    assert dataclasses.asdict(TurnSnapshot("s"))["is_running"] is False
    with pytest.raises(ValueError, match="contradicts running_count=0"):
        TurnSnapshot("s", is_running=True)


@pytest.mark.anyio
async def test_channel_defaults() -> None:
    channel = Recorder()
    assert channel.name == "recorder"
    assert Channel.name == "base"
    assert channel.needs_debounce is False
    assert channel.enabled is True
    assert isinstance(channel, Channel) and not isinstance(channel, Interface)
    assert await channel.send({"content": "out"}) is None
    assert await channel.admit_message("s", {}, TurnSnapshot("s")) is None

    async def events() -> Any:
        yield StreamEvent("text", {"delta": "x"})

    stream = AsyncStreamEvents(events())
    assert channel.stream_events({}, stream) is stream
    await stream.aclose()

    await channel.start(anyio.Event())
    assert channel.started
    await channel.stop()
    assert not channel.started


@pytest.mark.anyio
async def test_interface_channel_waits_for_stop_event() -> None:
    stop = anyio.Event()
    channel = Terminal()
    async with anyio.create_task_group() as group:
        group.start_soon(channel.start, stop)
        stop.set()
    assert stop.is_set()


def test_channel_is_abstract() -> None:
    with pytest.raises(TypeError):
        Channel()  # type: ignore[abstract]
    with pytest.raises(TypeError):
        Interface()  # type: ignore[abstract]


class MemoryInbox:
    """A minimal inbox keyed like the builtin one: thread id, else session id."""

    def __init__(self) -> None:
        self.queues: dict[str, list[Any]] = {}

    @staticmethod
    def _key(state: dict[str, Any]) -> str:
        return state.get("_runtime_thread_id") or state.get("session_id") or "default"

    async def enqueue_message(self, message: Any, state: dict[str, Any]) -> None:
        self.queues.setdefault(self._key(state), []).append(message)

    async def drain_messages(self, state: dict[str, Any]) -> list[Any]:
        return self.queues.pop(self._key(state), [])

    def message_count(self, state: dict[str, Any]) -> int:
        return len(self.queues.get(self._key(state), []))


@pytest.mark.anyio
async def test_steering_inbox_protocol() -> None:
    inbox = MemoryInbox()
    assert isinstance(inbox, SteeringInbox)
    assert not isinstance(object(), SteeringInbox)
    state = {"session_id": "s"}
    await inbox.enqueue_message("first", state)
    await inbox.enqueue_message("second", state)
    assert inbox.message_count(state) == 2
    assert inbox.message_count({"session_id": "other"}) == 0
    assert await inbox.drain_messages(state) == ["first", "second"]
    assert inbox.message_count(state) == 0
