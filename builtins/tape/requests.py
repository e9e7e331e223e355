"""What a session's tape recorded of a request of the http channel: its user message
carries the request's marks (meta `request`: its `id`, and with an `Idempotency-Key` the
`key` and the body's `digest`), and what follows it up to its `run` event is how its turn
went. A gateway answers a retry (by key) or a fetch (by id) from this when it does not
hold the answer itself: after a restart, once the store's recovery put the interrupted
run on the tape, or on another replica. A store whose runs reach the tape only when they
end (PostgreSQL, shared by replicas) shows the messages of the runs still going through
`journaled_meta`: such a request is `running`; and it lets a replica claim a key
(`claim_request`) so that a retry sent to another one waits instead of running the request
a second time while the first is still queued."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from ..store.asyncstore import inner_store
from ..store.entries import REQUEST_META
from .context import starts_turn
from .tape import Tape

__all__ = ["REQUEST_CONTEXT", "SCANNED", "Mark", "RequestRecords",
           "recorded_answer", "running_elsewhere"]

REQUEST_CONTEXT = "_request"
"""Envelope context and turn state key of the request's marks, `{"id", "key", "digest"}`
(the key and the digest only with an Idempotency-Key)."""
SCANNED = 2_000
"""Entries at the end of the tape searched for a request."""

Mark = Literal["id", "key"]
"""What a request is found by: its id (a fetch) or its Idempotency-Key (a retry)."""


class RequestRecords:
    """The store's side of the http channel's requests, by session: what a request came
    to (`recall`), and the claim on a key while its request is queued or runs."""

    def __init__(self, tape_for: Callable[[str], Tape]) -> None:
        self._tape_for = tape_for

    async def recall(self, session_id: str, mark: Mark, value: str, max_age: float
                     ) -> tuple[str, int, dict[str, Any]] | None:
        return await recorded_answer(self._tape_for(session_id), session_id, mark, value,
                                     max_age)

    async def claim(self, session_id: str, key: str) -> bool:
        """True when this process may run the key's request (always, with a store that
        keeps no claims: one process owns it); False while another replica holds it."""
        tape = self._tape_for(session_id)
        claim = getattr(_inner(tape), "claim_request", None)
        return True if claim is None else bool(await claim(tape.name, key))

    async def release(self, session_id: str, key: str) -> None:
        tape = self._tape_for(session_id)
        release = getattr(_inner(tape), "release_request", None)
        if release is not None:
            await release(tape.name, key)


async def recorded_answer(tape: Tape, session_id: str, mark: Mark, value: str,
                          max_age: float | None = None
                          ) -> tuple[str, int, dict[str, Any]] | None:
    """The digest and the answer (status, body) recorded for the request whose `mark` is
    `value`, or None (also when its message is older than `max_age` seconds: expired).
    The journal is read before the tape: a run that ends in between is then on the tape."""
    journaled = await _journaled_marks(tape, mark, value)
    if journaled is not None:
        return str(journaled.get("digest", "")), *running_elsewhere(session_id)
    entries = await tape.entries(tape.query().tail(SCANNED))
    start = next((index for index in range(len(entries) - 1, -1, -1)
                  if _marks(entries[index].meta).get(mark) == value), None)
    if start is None or _expired(entries[start].date, max_age):
        return None
    digest = str(_marks(entries[start].meta).get("digest", ""))
    replies: list[str] = []
    outcome: dict[str, Any] = {"status": "running"}
    called = False
    for entry in entries[start + 1:]:
        payload = entry.payload
        if starts_turn(entry):
            break
        called = called or entry.kind == "tool_call"
        said = entry.kind == "tool_call" or (entry.kind == "message"
                                             and payload.get("role") == "assistant")
        if said and isinstance(payload.get("content"), str) and payload["content"]:
            replies.append(payload["content"])
        if entry.kind == "event" and payload.get("name") == "run":
            data = payload.get("data")
            outcome = data if isinstance(data, dict) else {}
            break
    status = str(outcome.get("status") or "unknown")
    if status == "running":
        return digest, *running_elsewhere(session_id)
    if mark == "key" and status == "error" and outcome.get("retryable") and not called:
        return None  # the provider refused it before any tool ran: a retry runs it again
    body: dict[str, Any] = {"session_id": session_id, "content": "\n\n".join(replies),
                            "outbounds": [], "status": status}
    request_id = _marks(entries[start].meta).get("id")
    if isinstance(request_id, str):  # a replay says the same id as the first answer
        body = {"id": request_id, **body}
    if status != "ok":
        body["error"] = str(outcome.get("error") or _ENDED.get(status, f"the turn ended {status}"))
    usage = _summed_usage(outcome.get("usage_by_model"))
    if usage is not None:  # as a live reply has it: the turn's calls summed
        body["usage"] = usage
    code = {"ok": 200, "interrupted": 200}.get(status, 500)
    return digest, code, body


_ENDED = {"cancelled": "the turn was cancelled before it finished (the gateway stopping, or "
                      "the client's cancel) and may have partly run"}
"""What a recalled answer says of a run that ended without an error of its own."""


async def _journaled_marks(tape: Tape, mark: Mark, value: str) -> dict[str, Any] | None:
    """The marks of the request's message in a run not yet on the tape (a peer's, or a
    dead one's until its recovery), or None."""
    journaled = getattr(_inner(tape), "journaled_meta", None)
    if journaled is None:
        return None
    found = journaled(tape.name)
    for meta in await found if inspect.isawaitable(found) else found:
        if _marks(meta).get(mark) == value:
            return _marks(meta)
    return None


def _inner(tape: Tape) -> Any:
    """The tape's store itself (a sync store's, not its async adapter)."""
    return inner_store(tape.store)


def running_elsewhere(session_id: str) -> tuple[int, dict[str, Any]]:
    """The answer for a request whose turn another process holds: `running` (409)."""
    return 409, {"session_id": session_id, "content": "", "outbounds": [],
                 "status": "running", "error": "the request's turn is still running"}


def _summed_usage(by_model: Any) -> dict[str, int] | None:
    """The token counts of a run's `usage_by_model`, summed over its models."""
    rows = [row for row in by_model.values() if isinstance(row, dict)] \
        if isinstance(by_model, dict) else []
    if not rows:
        return None
    return {key: sum(int(row.get(key) or 0) for row in rows)
            for key in ("input_tokens", "output_tokens", "cached_tokens")}


def _expired(date: str, max_age: float | None) -> bool:
    if max_age is None:
        return False
    try:
        written = datetime.fromisoformat(date)
    except ValueError:
        return False
    if written.tzinfo is None:
        written = written.replace(tzinfo=UTC)
    return (datetime.now(UTC) - written).total_seconds() > max_age


def _marks(meta: Any) -> dict[str, Any]:
    marked = meta.get(REQUEST_META) if isinstance(meta, dict) else None
    return marked if isinstance(marked, dict) else {}
