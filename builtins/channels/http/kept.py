"""Answers kept for `GET /v1/messages/{id}`: a client whose connection dropped (or that
stopped reading a stream) fetches what its request came to, by the request id every
answer carries (the `hookline-request-id` header, a stream's first `request` event).

A reply whose client left stays matched to its turn until the turn ends, then is kept
like any other. Answers are kept in this process, `http_reply_retention` seconds and at
most `MAX_KEPT` of them (the oldest go first): a gateway restarted, or another replica,
does not have them.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ...config import Settings

__all__ = ["MAX_KEPT", "REQUEST_ID_HEADER", "KeptReplies"]

REQUEST_ID_HEADER = b"hookline-request-id"
MAX_KEPT = 1000
"""Answers kept at most, whatever the retention."""


class KeptReplies:
    """Finished answers by request id: `(status, body)`, for `seconds`."""

    def __init__(self, seconds: float = Settings.http_reply_retention, limit: int = MAX_KEPT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.limit = limit
        self._clock = clock
        self._kept: OrderedDict[str, tuple[float, int, dict[str, Any]]] = OrderedDict()

    def keep(self, request_id: str, status: int, body: dict[str, Any]) -> None:
        self._drop_old()
        self._kept[request_id] = (self._clock(), status, {**body, "id": request_id})
        self._kept.move_to_end(request_id)
        while len(self._kept) > self.limit:
            self._kept.popitem(last=False)

    def get(self, request_id: str) -> tuple[int, dict[str, Any]] | None:
        self._drop_old()
        found = self._kept.get(request_id)
        return None if found is None else (found[1], found[2])

    def _drop_old(self) -> None:
        cutoff = self._clock() - self.seconds
        while self._kept and next(iter(self._kept.values()))[0] < cutoff:
            self._kept.popitem(last=False)
