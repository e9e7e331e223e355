"""Per-session debouncing of inbound messages (the "Receive" rule of `provide_channels`).

Channels whose `needs_debounce` is true (chat services where people send a thought as a
burst of short messages) get their messages through a `DebounceBuffer` before admission:

- a message whose `kind` is `command` is handed on at once (a batch being collected for
  its session stays where it is);
- a message whose `is_active` is false (a missing field counts as false) is ignored
  unless the session had an active message within `active_window_seconds`;
- every other message joins its session's batch; once the session has been quiet for
  `debounce_seconds`, the batch is merged into one envelope (`merge_messages`) and handed
  on.

Sessions are keyed by the envelope's own session id (`default_session_id`: its
`session_id`, else `<channel>:<chat_id>`), before `resolve_session` runs on the merged
message. `flush` hands every pending batch on at once (graceful shutdown).

Only anyio is used, so the buffer runs under asyncio and trio alike.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from anyio.abc import TaskGroup

from hookline.kernel.envelope import default_session_id, envelope_content, get_field, set_field

__all__ = ["DebounceBuffer", "merge_messages"]

logger = logging.getLogger(__name__)

DEFAULT_DEBOUNCE_SECONDS = 1.0
"""Quiet seconds after a session's last message before its batch is handed on."""

DEFAULT_ACTIVE_WINDOW_SECONDS = 60.0
"""Seconds after an active message during which the session's inactive messages count."""

_PRUNE_AT = 1024
"""Forget expired activity times once this many sessions are remembered."""

Handler = Callable[[Any], Awaitable[None]]
Outcome = Literal["passed", "buffered", "ignored"]


@dataclass(eq=False)
class _Batch:
    messages: list[Any]
    deadline: float
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


class DebounceBuffer:
    """Collects each session's messages and hands merged batches to `handler`.

    Timers run as tasks of `task_group` (one per batch being collected); `handler` is
    awaited in the caller's task for commands and in the timer's task for batches.
    """

    def __init__(
        self,
        handler: Handler,
        task_group: TaskGroup,
        *,
        debounce_seconds: float = DEFAULT_DEBOUNCE_SECONDS,
        active_window_seconds: float = DEFAULT_ACTIVE_WINDOW_SECONDS,
    ) -> None:
        self.handler = handler
        self.task_group = task_group
        self.debounce_seconds = debounce_seconds
        self.active_window_seconds = active_window_seconds
        self._batches: dict[str, _Batch] = {}
        self._last_active: dict[str, float] = {}
        self._delivering = 0
        self._delivered: anyio.Event | None = None

    def pending(self, session_key: str | None = None) -> int:
        """How many messages wait in the batches (of one session, when given)."""
        if session_key is not None:
            batch = self._batches.get(session_key)
            return 0 if batch is None else len(batch.messages)
        return sum(len(batch.messages) for batch in self._batches.values())

    async def submit(self, message: Any) -> Outcome:
        """Take one inbound message: ``passed`` (handed on now), ``buffered`` or ``ignored``."""
        if get_field(message, "kind") == "command":
            await self.handler(message)
            return "passed"
        key = default_session_id(message)
        now = anyio.current_time()
        if get_field(message, "is_active", False):
            self._last_active[key] = now
            if len(self._last_active) > _PRUNE_AT:
                self._prune(now)
        else:
            last = self._last_active.get(key)
            if last is None or now - last > self.active_window_seconds:
                self._last_active.pop(key, None)
                logger.info("channel.message_ignored session=%s reason=inactive", key)
                return "ignored"
        deadline = now + self.debounce_seconds
        batch = self._batches.get(key)
        if batch is None:
            batch = self._batches[key] = _Batch([message], deadline)
            self.task_group.start_soon(self._wait_and_flush, key, batch,
                                       name=f"hookline debounce {key}")
        else:
            batch.messages.append(message)
            batch.deadline = deadline
        return "buffered"

    async def flush(self) -> None:
        """Hand every pending batch on now, and wait for batches already being handed on."""
        batches = list(self._batches.values())
        self._batches.clear()
        for batch in batches:
            batch.scope.cancel()
        for batch in batches:
            await self._deliver(batch)
        while self._delivering:
            self._delivered = anyio.Event()
            await self._delivered.wait()

    def _prune(self, now: float) -> None:
        expired = [key for key, last in self._last_active.items()
                   if now - last > self.active_window_seconds]
        for key in expired:
            del self._last_active[key]

    async def _wait_and_flush(self, key: str, batch: _Batch) -> None:
        with batch.scope:
            while (delay := batch.deadline - anyio.current_time()) > 0:
                await anyio.sleep(delay)
        if self._batches.get(key) is batch:  # not flushed meanwhile
            del self._batches[key]
            await self._deliver(batch)

    async def _deliver(self, batch: _Batch) -> None:
        self._delivering += 1
        try:
            await self.handler(merge_messages(batch.messages))
        except Exception:
            logger.exception("channel.debounce_delivery_failed messages=%d",
                             len(batch.messages))
        finally:
            self._delivering -= 1
            if not self._delivering and self._delivered is not None:
                self._delivered.set()


def merge_messages(messages: Sequence[Any]) -> Any:
    """One envelope for a batch: the last message with the contents joined by newlines and
    the media lists concatenated. A batch of one is that message itself."""
    if not messages:
        raise ValueError("merge_messages needs at least one message")
    template = messages[-1]
    if len(messages) == 1:
        return template
    content = "\n".join(envelope_content(message) for message in messages)
    media = [item for message in messages for item in (get_field(message, "media") or [])]
    has_media = bool(media) or get_field(template, "media") is not None
    if isinstance(template, Mapping):
        merged: dict[str, Any] = {**template, "content": content}
        if has_media:
            merged["media"] = media
        return merged
    changes: dict[str, Any] = {"content": content}
    if has_media:
        changes["media"] = media
    if dataclasses.is_dataclass(template) and not isinstance(template, type):
        return dataclasses.replace(template, **changes)
    merged = copy.copy(template)
    for key, value in changes.items():
        set_field(merged, key, value)
    return merged
