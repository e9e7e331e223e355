"""What a provider's failure says about trying again: whether waiting can fix it, how long
the provider asks to wait (`Retry-After`), and its own words, for `republic_client`."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Mapping
from typing import Any

from .base import OVERFLOW_TEXT

__all__ = ["body_message", "out_of_quota", "reason", "retry_after", "retryable", "too_long"]

_RETRY_STATUSES = frozenset({408, 409, 429})
_BODY_LIMIT = 300


def reason(exc: Any) -> str:
    """What failed, for the retry line: `HTTP 429`, `connection failed`."""
    from republic.errors import StreamIncompleteError

    status = getattr(exc, "status_code", None)
    if isinstance(exc, StreamIncompleteError):
        return "the stream ended before anything arrived"
    return f"HTTP {status}" if status is not None else "connection failed"


def retry_after(exc: Any) -> float | None:
    """The wait a `Retry-After` (seconds, or an HTTP date) or `Retry-After-Ms` header asks
    for, in seconds; None without one."""
    headers = getattr(exc, "headers", None) or {}
    value = headers.get("retry-after-ms")
    with contextlib.suppress(ValueError):
        if value is not None and _usable(milliseconds := float(value)):
            return milliseconds / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    with contextlib.suppress(ValueError):  # else a date
        seconds = float(value)
        return seconds if _usable(seconds) else None
    from datetime import UTC, datetime
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _usable(seconds: float) -> bool:
    """A wait as a number is finite and not negative (`inf`, `-5`: none was asked for)."""
    return math.isfinite(seconds) and seconds >= 0


def out_of_quota(body: Any) -> bool:
    text = str(body or "")
    return "insufficient_quota" in text or "quota exceeded" in text.lower()


def too_long(body: Any) -> bool:
    return OVERFLOW_TEXT.search(str(body or "")) is not None


def retryable(exc: Any) -> bool:
    """Whether trying again may succeed: a rate limit, an overloaded or failing server, a
    dropped connection, or a stream cut (the caller retries one only before anything of
    it arrived)."""
    import httpx2
    from republic.errors import APIConnectionError, APIStatusError, StreamIncompleteError

    if isinstance(exc, APIStatusError):
        if out_of_quota(exc.body):
            return False
        return exc.status_code in _RETRY_STATUSES or exc.status_code >= 500
    if isinstance(exc, APIConnectionError):
        cause = exc.__cause__
        return cause is None or isinstance(
            cause, httpx2.TimeoutException | httpx2.NetworkError | httpx2.RemoteProtocolError
        )
    return isinstance(exc, StreamIncompleteError)


def body_message(body: str) -> str:
    """The provider's own error text: `error.message` of a JSON body, else the body."""
    text = (body or "").strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, Mapping):
        error = data.get("error", data)
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            text = error["message"]
        elif isinstance(error, str):
            text = error
    text = " ".join(text.split())
    return text if len(text) <= _BODY_LIMIT else text[: _BODY_LIMIT - 3] + "..."
