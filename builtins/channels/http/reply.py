"""What one request to the `http` channel is waiting for, and the answer it gets.

A `Reply` collects what the request's turn produced (outbounds, errors, usage, streamed
events) and knows when everything has arrived. `whole_answer` turns it into the status,
body and headers of a whole (non-streamed) reply.

A message that did not run is told so in a form a client can act on: `503` with a
`Retry-After` header and the body `{"status": "not_run", "error", "retryable": true,
"retry_after", "session_id"}`, or, when a streamed answer has already begun, an `error`
event with the same fields (`"kind": "not_run"`, `"status": 503`) that ends the stream.
Never `202 dropped`, which a client reads as final: a message the gateway did not run
because it is stopping may be sent again, to this gateway once it is back or to another.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ...agent.usage import token_counts

__all__ = ["NO_TURN", "RETRY_AFTER_SECONDS", "Reply", "not_run", "whole_answer"]

RETRY_AFTER_SECONDS = 5
"""What `Retry-After` says for a message not run: long enough for a supervisor to start
the gateway again, short enough not to make a client wait for a replica that is up."""

NO_TURN = frozenset({"drop", "steer", "refused", "failed"})
"""Outcomes after which no turn runs for the request: it is answered at once. `refused`
means not run, and safe to send again."""

Headers = list[tuple[bytes, bytes]]
logger = logging.getLogger("hookline.builtins.channels.http.channel")
"""The channel's logger: a failed turn is the channel's line."""
_RETRY_FIELDS = ("retryable", "retry_after", "session_id")


def not_run(reason: str, session_id: str) -> dict[str, Any]:
    """The body (and SSE error data) for a message the gateway did not run."""
    return {"status": "not_run",
            "error": f"{reason}; the message was not run and may be sent again",
            "retryable": True, "retry_after": RETRY_AFTER_SECONDS, "session_id": session_id}


def retry_headers() -> Headers:
    return [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())]


@dataclass(eq=False)
class Reply:
    """One waiting request: what its turn produced so far, and how to reach it."""

    id: str
    session_id: str
    stream: bool
    approvals: bool = False
    """The client takes approval questions (a streamed request that asked for them)."""
    decided: anyio.Event = field(default_factory=anyio.Event)
    """Set once it is known whether a turn will run for the request."""
    finished: anyio.Event = field(default_factory=anyio.Event)
    """Set once everything the request will get has arrived."""
    outcome: str | None = None
    """`process`, `queued`, `drop`, `steer`; `refused` (not run: the manager did not take
    it, or the gateway stopped before its turn started) or `failed` (taking it failed)."""
    reason: str | None = None
    notified: bool = False
    """The manager reports admission and turn ends (else replies end at the outbound)."""
    outbounds: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Errors of the request's turn (error outbounds once its turn started or queued)."""
    admission_errors: list[str] = field(default_factory=list)
    """Errors reported while the manager took the message (before it said what became
    of it)."""
    upstream: dict[str, Any] | None = None
    """The provider's own refusal behind a failed turn (`status` 429 or 503 and its
    `retry_after`), which the whole reply passes on instead of a 500."""
    usage: dict[str, int] | None = None
    """The turn's token counts summed over its model calls (`token_counts` names), once
    one reported any."""
    streamed_error: bool = False
    tool_called: bool = False
    """A tool call of its turn was announced: a failure after it is no "send it again", as
    the retry would run the tool once more."""
    turn_started: bool = False
    """A turn runs for the request (`turn_started` or `stream_events` named it)."""
    in_model_stage: bool = False
    response_started: bool = False
    on_finish: Callable[[], None] | None = None
    """Called once everything has arrived (the channel keeps the answer then)."""
    events: MemoryObjectSendStream[tuple[str, Any]] | None = None
    event_reader: MemoryObjectReceiveStream[tuple[str, Any]] | None = None

    def __post_init__(self) -> None:
        if self.stream:
            self.events, self.event_reader = anyio.create_memory_object_stream(math.inf)

    def decide(self, outcome: str, reason: str | None = None, *, final: bool = False) -> None:
        """Record the outcome (a `queued` one may still become `process`; `final` wins)."""
        if final or self.outcome in (None, "queued"):
            self.outcome, self.reason = outcome, reason
        self.decided.set()
        if self.outcome in NO_TURN:
            self.finish()

    def emit(self, kind: str, data: Any) -> None:
        if self.events is None or self.finished.is_set():
            return
        try:
            self.events.send_nowait((kind, data))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self.events = None  # the client is gone

    def add_usage(self, usage: Any) -> None:
        """Count one model call's usage (a `usage` stream event's)."""
        counts = token_counts(usage)
        if counts is not None:
            self.usage = {key: (self.usage or {}).get(key, 0) + value
                          for key, value in counts.items()}

    def finish(self) -> None:
        """Everything has arrived. A stream always ends with an event: `done` after a
        turn, an `error` (`not_run`) for a message that will not run (read only by a
        stream already under way: one not begun is answered with JSON instead). A failed
        turn is logged here, whichever route its request came by."""
        if self.finished.is_set():
            return
        if self.errors and self.outcome not in NO_TURN:
            logger.warning("http.turn_failed request=%s session=%s error=%s", self.id,
                           self.session_id, self.errors[0])
        if self.outcome == "refused":
            body = not_run(self.reason or "not run", self.session_id)
            self.emit("error", {"kind": "not_run", "status": 503, "message": body.pop("error"),
                                **{key: body[key] for key in _RETRY_FIELDS}})
        elif self.outcome not in NO_TURN:
            self.emit("done", self.result())
        self.decided.set()
        self.finished.set()
        if self.events is not None:
            self.events.close()
        if self.on_finish is not None:
            self.on_finish()

    def result(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "session_id": self.session_id,
            "content": "\n".join(str(o["content"]) for o in self.outbounds
                                 if o.get("kind") != "error" and o.get("content")),
            "outbounds": list(self.outbounds),
        }
        if self.usage is not None:
            data["usage"] = dict(self.usage)
        if self.errors:
            data["error"] = self.errors[0]
            if self.upstream is not None:  # a stream's end says what a whole answer's status does
                data["upstream"] = dict(self.upstream)
        return data


def upstream_answer(upstream: dict[str, Any], body: dict[str, Any]
                    ) -> tuple[int, dict[str, Any], Headers]:
    """A turn the provider refused (rate limit, overload): its status, and when to retry
    (what the provider asked, else `RETRY_AFTER_SECONDS`); no time to retry for one that
    waiting will not mend (out of quota)."""
    if upstream.get("retryable") is False:
        return int(upstream["status"]), {**body, "retryable": False}, []
    after = upstream.get("retry_after")
    seconds = math.ceil(after) if isinstance(after, int | float) else RETRY_AFTER_SECONDS
    return (int(upstream["status"]), {**body, "retry_after": seconds},
            [(b"retry-after", str(seconds).encode())])


def whole_answer(reply: Reply) -> tuple[int, dict[str, Any], Headers]:
    """Status, body and extra headers of a whole reply whose outcome is known."""
    if reply.outcome == "drop":
        return 202, {"status": "dropped", "reason": reply.reason,
                     "session_id": reply.session_id}, []
    if reply.outcome == "steer":
        return 202, {"status": "steered", "reason": reply.reason,
                     "session_id": reply.session_id}, []
    if reply.outcome == "refused":
        return 503, not_run(reply.reason or "not run", reply.session_id), retry_headers()
    if reply.outcome == "failed":
        return 500, {"error": reply.reason, "session_id": reply.session_id}, []
    return (500 if reply.errors else 200), reply.result(), []
