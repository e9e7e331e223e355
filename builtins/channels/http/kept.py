"""Answers kept for `GET /v1/messages/{id}`: a client whose connection dropped (or that
stopped reading a stream) fetches what its request came to, by the request id every
answer carries (the `hookline-request-id` header, a stream's first `request` event).

A reply whose client left stays matched to its turn until the turn ends, then is kept
like any other. Answers are kept in this process, `http_reply_retention` seconds, at
most `MAX_KEPT` of them and `MAX_KEPT_CHARS` characters of their replies (the oldest go
first): a gateway restarted, or another replica, does not have them.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ...config import Settings

__all__ = ["MAX_KEPT", "MAX_KEPT_CHARS", "REQUEST_ID_HEADER", "KeptReplies", "reply_chars"]

REQUEST_ID_HEADER = b"hookline-request-id"
MAX_KEPT = 1000
"""Answers kept at most, whatever the retention."""
MAX_KEPT_CHARS = 32 * 1024 * 1024
"""Characters of the kept answers' replies at most: a thousand long replies would hold
hundreds of MiB."""


def reply_chars(body: dict[str, Any]) -> int:
    """The characters an answer holds: its content, and its outbounds' (the same again)."""
    outbounds = body.get("outbounds")
    return len(str(body.get("content") or "")) + (sum(
        len(str(item.get("content") or "")) for item in outbounds
        if isinstance(item, dict)) if isinstance(outbounds, list) else 0)


class KeptReplies:
    """Finished answers by request id: `(status, body)`, for `seconds`."""

    def __init__(self, seconds: float = Settings.http_reply_retention, limit: int = MAX_KEPT,
                 clock: Callable[[], float] = time.monotonic,
                 max_chars: int = MAX_KEPT_CHARS) -> None:
        self.seconds = seconds
        self.limit = limit
        self.max_chars = max_chars
        self._clock = clock
        self._kept: OrderedDict[str, tuple[float, int, dict[str, Any]]] = OrderedDict()
        self._chars = 0

    def keep(self, request_id: str, status: int, body: dict[str, Any]) -> None:
        self._drop_old()
        self._forget(request_id)
        self._kept[request_id] = (self._clock(), status, {**body, "id": request_id})
        self._chars += reply_chars(body)
        while len(self._kept) > self.limit or (self._chars > self.max_chars
                                               and len(self._kept) > 1):
            self._forget(next(iter(self._kept)))

    def get(self, request_id: str) -> tuple[int, dict[str, Any]] | None:
        self._drop_old()
        found = self._kept.get(request_id)
        return None if found is None else (found[1], found[2])

    def _drop_old(self) -> None:
        cutoff = self._clock() - self.seconds
        while self._kept and next(iter(self._kept.values()))[0] < cutoff:
            self._forget(next(iter(self._kept)))

    def _forget(self, request_id: str) -> None:
        found = self._kept.pop(request_id, None)
        if found is not None:
            self._chars -= reply_chars(found[2])
