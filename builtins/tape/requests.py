"""What a session's tape recorded of a request sent with an `Idempotency-Key`: its user
message carries the key and the body's digest (meta `idempotency`), and what follows it
up to its `run` event is how its turn went. A gateway restarted after a crash answers a
retry from this, after the store's recovery put the interrupted run on the tape. A store
whose runs reach the tape only when they end (PostgreSQL, shared by replicas) shows the
messages of the runs still going through `journaled_meta`: such a key is `running`."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from typing import Any

from ..store.asyncstore import AsyncStoreAdapter
from .tape import Tape

__all__ = ["IDEMPOTENCY_CONTEXT", "IDEMPOTENCY_META", "SCANNED", "recorded_answer"]

IDEMPOTENCY_CONTEXT = "_idempotency"
"""Envelope context and turn state key of a keyed request's `{"key", "digest"}` (the
http channel's Idempotency-Key and the sha256 of its body)."""
IDEMPOTENCY_META = "idempotency"
"""Meta of a turn's user message: `{"key", "digest"}` of the request that sent it."""
SCANNED = 2_000
"""Entries at the end of the tape searched for a key."""


async def recorded_answer(tape: Tape, session_id: str, key: str, max_age: float | None = None
                          ) -> tuple[str, int, dict[str, Any]] | None:
    """The digest and the answer (status, body) recorded for `key`, or None (also when
    the key's message is older than `max_age` seconds: it has expired). The journal is
    read before the tape: a run that ends in between is then on the tape."""
    journaled = await _journaled_digest(tape, key)
    if journaled is not None:
        return journaled, *_running(session_id)
    entries = await tape.entries(tape.query().tail(SCANNED))
    start = next((index for index in range(len(entries) - 1, -1, -1)
                  if _key_of(entries[index].meta) == key), None)
    if start is None or _expired(entries[start].date, max_age):
        return None
    digest = str(entries[start].meta[IDEMPOTENCY_META].get("digest", ""))
    replies: list[str] = []
    outcome: dict[str, Any] = {"status": "running"}
    for entry in entries[start + 1:]:
        payload = entry.payload
        if entry.kind == "message" and payload.get("role") == "user":
            break
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
        return digest, *_running(session_id)
    body: dict[str, Any] = {"session_id": session_id, "content": "\n\n".join(replies),
                            "outbounds": [], "status": status}
    if status != "ok":
        body["error"] = str(outcome.get("error") or f"the turn ended {status}")
    code = {"ok": 200, "interrupted": 200}.get(status, 500)
    return digest, code, body


async def _journaled_digest(tape: Tape, key: str) -> str | None:
    """The digest of the key's message in a run not yet on the tape (a peer's, or a dead
    one's until its recovery), or None."""
    store = tape.store
    inner = store.store if isinstance(store, AsyncStoreAdapter) else store
    journaled = getattr(inner, "journaled_meta", None)
    if journaled is None:
        return None
    found = journaled(tape.name)
    for meta in await found if inspect.isawaitable(found) else found:
        if _key_of(meta) == key:
            return str(meta[IDEMPOTENCY_META].get("digest", ""))
    return None


def _running(session_id: str) -> tuple[int, dict[str, Any]]:
    return 409, {"session_id": session_id, "content": "", "outbounds": [],
                 "status": "running", "error": "the first request with this key is running"}


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


def _key_of(meta: Any) -> str | None:
    marked = meta.get(IDEMPOTENCY_META) if isinstance(meta, dict) else None
    return str(marked.get("key")) if isinstance(marked, dict) else None
