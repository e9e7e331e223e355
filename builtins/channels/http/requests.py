"""The requests the `http` channel keeps track of: those waiting for their turn's answer
(`match.py`), the finished answers kept for `GET /v1/messages/{id}` (`kept.py`), the
Idempotency-Keys seen (`idempotency.py`) and the questions waiting for their answer
(`approvals.py`)."""

from __future__ import annotations

from typing import Any

from ...tape.requests import RequestRecords
from .approvals import HttpApprovals
from .idempotency import Idempotency
from .kept import KeptReplies
from .match import Replies

__all__ = ["Requests"]


class Requests:
    """The request bookkeeping of one `HttpChannel`; `records` finds an answer or a key on
    a session's tape (one from another replica, or from before a restart)."""

    def __init__(self, records: RequestRecords | None = None) -> None:
        self.replies = Replies()
        self.kept = KeptReplies()
        self.idempotency = Idempotency(records=records)
        self.approvals = HttpApprovals()

    def retain(self, settings: Any) -> None:
        """The channel starts: how long answers and keys are kept, from `settings`
        (`http_reply_retention`, `http_idempotency_ttl`)."""
        self.kept.seconds = float(settings.http_reply_retention)
        self.idempotency.seconds = float(settings.http_idempotency_ttl)
