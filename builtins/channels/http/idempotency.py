"""`Idempotency-Key` on `POST /v1/messages`: a retry of a request never runs its turn twice.
The key and the body's digest go with the turn's user message onto the tape (the run's
first durable write); a request with a key already seen answers with what the first one
came to: it waits for it while it runs (in this process), gets its kept answer once it
ended, or, after a restart, what the tape recorded (the reply, the error, or `interrupted`
with what is known). A run the store shows as going on elsewhere (a replica's, or a dead
one's until a peer recovers it) is waited for in the same way. The same key with another
body is 422. Keys count for `http_idempotency_ttl` seconds (docs/channels.md). This
process remembers the last `MAX_KEPT` keys with their replies; older ones are found on the
tape.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from .guard import HttpError
from .kept import MAX_KEPT
from .reply import Reply

__all__ = ["Idempotency", "Recall", "idempotency_key"]

MAX_KEY = 255
POLL = 0.5
"""Seconds between two looks at the store for a run another process holds."""

Recall = Callable[[str, str, str, float], Awaitable[tuple[str, int, dict[str, Any]] | None]]
"""`recall(session_id, mark, value, max_age)`: the digest and the answer the tape holds
for the request whose `mark` ("id" or "key") is `value`, sent in the last `max_age` s."""


def idempotency_key(headers: dict[str, list[str]], body: bytes) -> tuple[str, str] | None:
    """The request's key and its body's digest; None without the header; 400 for a
    malformed key."""
    values = headers.get("idempotency-key")
    if not values:
        return None
    key = values[-1].strip()
    if not key or len(key) > MAX_KEY or not key.isprintable():
        raise HttpError(400, f"Idempotency-Key must be 1 to {MAX_KEY} printable characters")
    return key, hashlib.sha256(body).hexdigest()


@dataclass
class _Seen:
    digest: str
    reply: Reply
    at: float


class Idempotency:
    """The keys this process has seen (their requests, running or answered), and the way
    to find the others on the tape."""

    def __init__(self, seconds: float = 86_400.0, recall: Recall | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.recall = recall
        self._clock = clock
        self._seen: OrderedDict[str, _Seen] = OrderedDict()

    async def prior(self, key: str, digest: str, session_id: str, wait: float = 0.0
                    ) -> Reply | tuple[int, dict[str, Any]] | None:
        """What an earlier request with this key came to: its reply (running or ended),
        the answer the tape recorded, or None (the key is new). A run the store shows
        as running elsewhere is waited for, up to `wait` seconds."""
        self._drop_old()
        seen = self._seen.get(key)
        if seen is not None:
            _check(seen.digest, digest)
            return seen.reply
        if self.recall is None:
            return None
        found = await self.recall(session_id, "key", key, self.seconds)
        if found is None:
            return None
        _check(found[0], digest)
        until = self._clock() + wait
        while found is not None and found[2].get("status") == "running" \
                and self._clock() < until:  # a peer's run, or a dead one's until recovered
            await anyio.sleep(POLL)
            found = await self.recall(session_id, "key", key, self.seconds)
        return None if found is None else (found[1], found[2])

    def started(self, key: str, digest: str, reply: Reply) -> None:
        self._seen[key] = _Seen(digest, reply, self._clock())
        while len(self._seen) > MAX_KEPT:  # each holds its reply: as many as are kept
            self._seen.popitem(last=False)

    def _drop_old(self) -> None:
        cutoff = self._clock() - self.seconds
        while self._seen and next(iter(self._seen.values())).at < cutoff:
            self._seen.popitem(last=False)


def _check(recorded: str, digest: str) -> None:
    if recorded != digest:
        raise HttpError(422, "this Idempotency-Key was used with another body: a retry "
                             "must send the very same request, or use a new key")
