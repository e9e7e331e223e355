"""`Idempotency-Key` on `POST /v1/messages`: a retry of a request never runs its turn twice.
The key and the body's digest go with the turn's user message onto the tape (the run's
first durable write); a request with a key already seen answers with what the first one
came to: it waits for it while it runs (in this process), gets its kept answer once it
ended, or, after a restart, what the tape recorded (the reply, the error, or `interrupted`
with what is known). A run the store shows as going on elsewhere (a replica's, or a dead
one's until a peer recovers it) is waited for in the same way. The same key with another
body is 422. Keys count for `http_idempotency_ttl` seconds (docs/http-channel.md). This
process remembers the last `MAX_KEPT` keys with their replies; older ones are found on the
tape.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio

from ...config import Settings
from ...tape.requests import RequestRecords, running_elsewhere
from .guard import IDEMPOTENCY_HEADER, HttpError
from .kept import MAX_KEPT, MAX_KEPT_CHARS, reply_chars
from .reply import Reply

__all__ = ["Idempotency", "idempotency_key"]

MAX_KEY = 255
POLL = 0.5
"""Seconds between two looks at the store for a run another process holds."""



def idempotency_key(headers: dict[str, list[str]], body: bytes) -> tuple[str, str] | None:
    """The request's key and its body's digest; None without the header; 400 for a
    malformed key."""
    values = headers.get(IDEMPOTENCY_HEADER)
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
    to find the others in the store (`records`), where a replica also claims a key while
    its request is queued or runs."""

    def __init__(self, seconds: float = Settings.http_idempotency_ttl,
                 records: RequestRecords | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.records = records
        self._clock = clock
        self._seen: OrderedDict[tuple[str, str], _Seen] = OrderedDict()
        """By (session, key): a key names a request to one session, as on its tape."""
        self._claiming: dict[tuple[str, str], anyio.Event] = {}
        """Keys a request of this process is looking up or has claimed and not yet
        `started`: a second request with one waits for it, here, before it asks the store
        (whose claim a replica's own requests all pass)."""

    async def prior(self, key: str, digest: str, session_id: str, wait: float = 0.0
                    ) -> Reply | tuple[int, dict[str, Any]] | None:
        """What an earlier request with this key came to: its reply (running or ended),
        the answer the store recorded, or None: the key is new, and claimed for this
        process. A request another process holds (queued or running on a replica, or a
        dead one's run until recovered) is waited for, up to `wait` seconds; then it is
        `running` (409)."""
        self._drop_old()
        named = (session_id, key)
        while (claiming := self._claiming.get(named)) is not None:
            await claiming.wait()  # then it started (seen below) or let go
        seen = self._seen.get(named)
        if seen is not None:
            _check(seen.digest, digest)
            return seen.reply
        claiming = self._claiming[named] = anyio.Event()  # before the first await
        if self.records is None:
            return None  # claimed in this process only
        claimed = False
        try:
            until = self._clock() + wait
            while True:
                found = await self.records.recall(session_id, "key", key, self.seconds)
                if found is None and await self.records.claim(session_id, key):
                    # Looked at again, claimed: the first may have ended and let go of its
                    # claim while the look above read the store.
                    found = await self.records.recall(session_id, "key", key, self.seconds)
                    if found is None:
                        claimed = True
                        return None
                    await self.records.release(session_id, key)
                if found is not None:
                    _check(found[0], digest)
                    if found[2].get("status") != "running":
                        return found[1], found[2]
                if self._clock() >= until:
                    return found[1:] if found is not None else running_elsewhere(session_id)
                await anyio.sleep(POLL)
        finally:
            if not claimed:  # claimed, it holds until `started` or `release`
                self._let_go(named, claiming)

    def started(self, key: str, digest: str, reply: Reply) -> None:
        named = (reply.session_id, key)
        self._seen[named] = _Seen(digest, reply, self._clock())
        # Each holds its reply, so as many, and as many characters, as are kept: the
        # older ones are found in the store.
        while len(self._seen) > MAX_KEPT or (len(self._seen) > 1 and sum(
                reply_chars({"outbounds": seen.reply.outbounds}) for seen in self._seen.values())
                > MAX_KEPT_CHARS):
            self._seen.popitem(last=False)
        self._let_go(named, self._claiming.get(named))

    async def release(self, key: str, session_id: str, *, forget: bool = False) -> None:
        """Let go of the key's claim: its request has ended (what it came to is in the
        store, or it never ran). `forget`: its answer said to send it again (a 503), so a
        retry asks the store whether it ran rather than getting that answer again."""
        named = (session_id, key)
        if forget:
            self._seen.pop(named, None)
        self._let_go(named, self._claiming.get(named))
        if self.records is not None:
            await self.records.release(session_id, key)

    def _let_go(self, named: tuple[str, str], claiming: anyio.Event | None) -> None:
        if claiming is not None and self._claiming.get(named) is claiming:
            del self._claiming[named]
            claiming.set()

    def _drop_old(self) -> None:
        cutoff = self._clock() - self.seconds
        while self._seen and next(iter(self._seen.values())).at < cutoff:
            self._seen.popitem(last=False)


def _check(recorded: str, digest: str) -> None:
    if recorded != digest:
        raise HttpError(422, "this Idempotency-Key was used with another body: a retry "
                             "must send the very same request, or use a new key")
