"""InMemorySteeringInbox: keys, FIFO draining, counts and concurrent use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from hookline.builtins.agent.steering import DEFAULT_KEY, InMemorySteeringInbox, steering_key
from hookline.kernel import Framework, hookimpl
from hookline.kernel.channels import SteeringInbox


def test_it_is_a_kernel_steering_inbox() -> None:
    inbox = InMemorySteeringInbox()
    assert isinstance(inbox, SteeringInbox)
    assert inbox  # an empty inbox is still truthy: it is not "no inbox"


@pytest.mark.parametrize(
    ("state", "key"),
    [
        ({"_runtime_thread_id": "t1", "session_id": "s1"}, "t1"),
        ({"_runtime_thread_id": "", "session_id": "s1"}, "s1"),
        ({"_runtime_thread_id": None, "session_id": "s1"}, "s1"),
        ({"session_id": "s1"}, "s1"),
        ({"session_id": ""}, DEFAULT_KEY),
        ({"_runtime_thread_id": 0, "session_id": None}, DEFAULT_KEY),
        ({}, DEFAULT_KEY),
    ],
)
def test_key_is_thread_then_session_then_default(state: dict[str, Any], key: str) -> None:
    assert steering_key(state) == key


@pytest.mark.anyio
async def test_messages_drain_oldest_first_and_are_removed() -> None:
    inbox = InMemorySteeringInbox()
    state = {"session_id": "s1"}
    assert inbox.message_count(state) == 0
    assert await inbox.drain_messages(state) == []
    for message in ("one", "two", "three"):
        await inbox.enqueue_message(message, state)
    assert inbox.message_count(state) == 3
    assert await inbox.drain_messages(state) == ["one", "two", "three"]
    assert inbox.message_count(state) == 0
    assert await inbox.drain_messages(state) == []
    await inbox.enqueue_message("four", state)
    assert await inbox.drain_messages(state) == ["four"]


@pytest.mark.anyio
async def test_keys_keep_queues_apart() -> None:
    inbox = InMemorySteeringInbox()
    session = {"session_id": "s1"}
    thread = {"session_id": "s1", "_runtime_thread_id": "t1"}
    other = {"session_id": "s2"}
    nothing: dict[str, Any] = {}
    await inbox.enqueue_message("to-session", session)
    await inbox.enqueue_message("to-thread", thread)
    await inbox.enqueue_message("to-other", other)
    await inbox.enqueue_message("to-default", nothing)
    await inbox.enqueue_message("also-default", {"session_id": ""})

    assert [inbox.message_count(s) for s in (session, thread, other, nothing)] == [1, 1, 1, 2]
    assert inbox.total_count() == 5
    assert await inbox.drain_messages(thread) == ["to-thread"]
    assert await inbox.drain_messages({"session_id": "s1"}) == ["to-session"]
    assert await inbox.drain_messages({"session_id": None}) == ["to-default", "also-default"]
    assert inbox.message_count(other) == 1
    inbox.clear()
    assert inbox.total_count() == 0


@pytest.mark.anyio
async def test_concurrent_tasks_lose_nothing() -> None:
    inbox = InMemorySteeringInbox()
    drained: list[Any] = []

    async def producer(name: str) -> None:
        for index in range(50):
            await inbox.enqueue_message((name, index), {"session_id": "s"})
            await anyio.sleep(0)

    async def consumer() -> None:
        for _ in range(100):
            drained.extend(await inbox.drain_messages({"session_id": "s"}))
            await anyio.sleep(0)

    async with anyio.create_task_group() as group:
        for name in "abcd":
            group.start_soon(producer, name)
        group.start_soon(consumer)
    drained.extend(await inbox.drain_messages({"session_id": "s"}))

    assert sorted(drained) == sorted((name, index) for name in "abcd" for index in range(50))
    for name in "abcd":  # each producer's messages keep their order
        assert [index for n, index in drained if n == name] == list(range(50))


class InboxPlugin:
    def __init__(self, inbox: InMemorySteeringInbox) -> None:
        self.inbox = inbox

    @hookimpl
    def provide_steering_inbox(self):
        return self.inbox


@pytest.mark.anyio
async def test_framework_steering_goes_through_the_inbox(tmp_path: Path) -> None:
    inbox = InMemorySteeringInbox()
    framework = Framework(workspace=tmp_path)
    framework.registry.register(InboxPlugin(inbox), name="inbox-test")
    async with framework.running():
        assert framework.get_steering_inbox() is inbox
        state: dict[str, Any] = {}
        message = {"session_id": "chat-1", "content": "stop that"}
        assert await framework.steer_message(message, state, reason="user steered")
        assert state["session_id"]
        assert inbox.message_count(state) == 1
        assert await inbox.drain_messages(state) == [message]
    assert framework.get_steering_inbox() is None
