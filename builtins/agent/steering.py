"""The builtin steering inbox: messages waiting to join a running turn, kept in memory;
and how a step takes what any inbox holds (`steered_messages`).

Messages are keyed by the state they are queued with: `_runtime_thread_id` when truthy,
else `session_id` when truthy, else `"default"`. Admission state and turn state must
therefore agree on those two keys (the steering rules of `provide_steering_inbox`).

No method awaits while it touches the queues, so concurrent tasks on one event loop can
never observe a half-done update and no lock is needed. The inbox is not meant to be shared
between threads.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from hookline.kernel.channels import SteeringInbox
from hookline.kernel.envelope import get_field
from hookline.kernel.messages import ModelMessage
from hookline.kernel.turn import RUNTIME_THREAD_ID

__all__ = ["DEFAULT_KEY", "InMemorySteeringInbox", "scope_inbox", "steer", "steered_messages",
           "steering_key"]

DEFAULT_KEY = "default"


def scope_inbox(framework: Any) -> SteeringInbox | None:
    """The `running()` scope's steering inbox (None outside one, or when no plugin gave
    one); a value that is no inbox is the framework's `resource_error`, which names the
    plugin and function that gave it."""
    inbox = framework.get_steering_inbox()
    if inbox is not None and not isinstance(inbox, SteeringInbox):
        raise framework.resource_error(
            "provide_steering_inbox", "a steering inbox or None",
            ": return an object with enqueue_message, drain_messages and message_count "
            "(docs/hooks/runtime.md), or None to leave the inbox to the builtin plugin")
    return inbox


async def steer(framework: Any, message: dict[str, Any], state: dict[str, Any]) -> bool:
    """Queue a message (an MCP tool's images) for the next step of the running turn; False
    when there is no inbox to queue it in."""
    if (inbox := scope_inbox(framework)) is None:
        return False
    await inbox.enqueue_message(message, state)
    return True


def steering_key(state: Mapping[str, Any] | None) -> Hashable:
    """The queue a state belongs to: thread id, else session id, else `default`."""
    if not state:
        return DEFAULT_KEY
    thread_id = state.get(RUNTIME_THREAD_ID)
    if thread_id:
        return thread_id
    session_id = state.get("session_id")
    if session_id:
        return session_id
    return DEFAULT_KEY


class InMemorySteeringInbox:
    """A FIFO queue of envelopes per thread or session (kernel `SteeringInbox`)."""

    def __init__(self) -> None:
        self._queues: dict[Hashable, list[Any]] = {}

    async def enqueue_message(self, message: Any, state: dict[str, Any]) -> None:
        """Append a message to the queue the state identifies."""
        self._queues.setdefault(steering_key(state), []).append(message)

    async def drain_messages(self, state: dict[str, Any]) -> list[Any]:
        """Remove and return the state's waiting messages, oldest first."""
        return self._queues.pop(steering_key(state), [])

    def message_count(self, state: dict[str, Any]) -> int:
        """How many messages wait for the state's thread or session."""
        return len(self._queues.get(steering_key(state), ()))

    def clear(self) -> None:
        """Forget every waiting message."""
        self._queues.clear()

    def total_count(self) -> int:
        """Messages waiting across all keys.

        Deliberately not `__len__`: an empty inbox must stay truthy, or code testing
        `if inbox:` would mistake it for "no inbox".
        """
        return sum(len(queue) for queue in self._queues.values())


async def steered_messages(framework: Any, session_id: str, state: dict[str, Any]
                           ) -> list[ModelMessage]:
    """The envelopes steered into the running turn, drained from the framework's inbox, as
    user messages (each built as its own turn's prompt would be), for the step to send
    before its own prompt."""
    inbox = scope_inbox(framework)
    if inbox is None:
        return []
    messages = []
    for envelope in await inbox.drain_messages(state):
        content = await framework.build_prompt(
            envelope, get_field(envelope, "session_id") or session_id, state)
        messages.append(ModelMessage.user(content))
    return messages
