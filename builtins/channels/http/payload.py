"""What a request to the `http` channel sends and gets as JSON: the body read within its
size and time limits, the message fields checked, and an outbound turned into the
plain dictionary a reply lists."""

from __future__ import annotations

import json
import math
from typing import Any

import anyio

from hookline.kernel.envelope import get_field

from ...config.limits import session_id_problem
from .guard import HttpError
from .media import json_type
from .server import Receive
from .wire import Disconnected

__all__ = ["MAX_BODY_SIZE", "MAX_JSON_DEPTH", "check_session_value"]

MAX_BODY_SIZE = 1024 * 1024
MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays and objects accepted in a request body."""

_FIELDS = {"content": str, "session_id": str, "chat_id": str, "context": dict, "stream": bool,
           "attachments": list, "approvals": bool}
_TYPE_NAMES = {str: "a string", dict: "an object", bool: "true or false", list: "an array"}
_OUTBOUND_FIELDS = ("session_id", "channel", "chat_id", "kind", "content", "output_channel")
_DISCARD_BYTES = 16 * MAX_BODY_SIZE
_DISCARD_SECONDS = 10.0


async def _read_body(headers: dict[str, list[str]], receive: Receive, limit: int,
                     timeout: float) -> bytes:
    """The whole request body; 413 as soon as it is known to be over `limit` bytes, 408
    when it has not all arrived within `timeout` seconds (slow clients hold no worker)."""
    for value in headers.get("content-length", ()):
        try:
            declared = int(value)
        except ValueError:
            raise HttpError(400, "invalid Content-Length header") from None
        if declared > limit:
            await _discard_body(receive)
            raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    with anyio.move_on_after(timeout):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise Disconnected
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                if message.get("more_body", False):
                    await _discard_body(receive)
                raise _too_large(limit)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
    raise HttpError(408, f"the request body did not arrive within {timeout:g} s",
                    [(b"connection", b"close")])


def _too_large(limit: int) -> HttpError:
    return HttpError(413, f"the request body is larger than {limit} bytes")


async def _discard_body(receive: Receive) -> None:
    """Read and drop the rest of a refused body (up to a bound), so that the client,
    still sending, can read the 413 instead of seeing the connection reset."""
    with anyio.move_on_after(_DISCARD_SECONDS):
        size = 0
        while size <= _DISCARD_BYTES:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise Disconnected
            size += len(message.get("body", b""))
            if not message.get("more_body", False):
                return


def _json_object(body: bytes) -> Any:
    """The body as JSON (400 when it is not JSON, or nested too deep)."""
    try:
        return json.loads(body, parse_constant=_refuse_constant)
    except RecursionError:
        raise _too_deep() from None
    except (UnicodeDecodeError, ValueError) as exc:  # bad JSON, an overlong integer, NaN
        raise HttpError(400, f"the body is not valid JSON: {exc}") from None


def _parse_message(body: bytes) -> dict[str, Any]:
    payload = _json_object(body)
    if not isinstance(payload, dict):
        raise HttpError(400, "the body must be a JSON object with a \"content\" string")
    _check_values(payload)
    unknown = sorted(set(payload) - set(_FIELDS))
    if unknown:
        raise HttpError(400, f"unknown field(s): {', '.join(unknown)} (known: "
                             f"{', '.join(_FIELDS)})")
    if "content" not in payload:
        raise HttpError(400, "missing field: content (the message text)")
    for key, kind in _FIELDS.items():
        if key in payload and payload[key] is None and key != "content":
            del payload[key]  # an explicit null means "not given"
        elif key in payload and not isinstance(payload[key], kind):
            raise HttpError(400, f"field {key} must be {_TYPE_NAMES[kind]}, got "
                                 f"{json_type(payload[key])}")
    if not payload["content"].strip():
        raise HttpError(400, "field content must not be empty")
    if payload.get("approvals") and not payload.get("stream"):
        raise HttpError(400, "approvals: true needs stream: true (each question arrives as "
                             "an SSE event named approval)")
    for key in ("session_id", "chat_id"):
        if key in payload:
            check_session_value(f"field {key}", payload[key])
    return payload


def check_session_value(where: str, value: str) -> None:
    """Refuse (400) a session or chat id that is empty, too long or holds control
    characters (`session_id_problem`)."""
    problem = session_id_problem(value)
    if problem is not None:
        raise HttpError(400, f"{where} {problem}")


def _too_deep() -> HttpError:
    return HttpError(400, f"the body nests arrays or objects deeper than {MAX_JSON_DEPTH} "
                          f"levels")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _check_values(payload: dict[str, Any]) -> None:
    """Refuse what JSON allows but the rest of the system cannot store or send back: lone
    surrogates (not encodable as UTF-8), numbers that are not finite, deep nesting."""
    pending: list[tuple[str, Any, int]] = [("body", payload, 1)]
    while pending:
        where, value, depth = pending.pop()
        if isinstance(value, dict | list) and depth > MAX_JSON_DEPTH:
            raise _too_deep()
        if isinstance(value, dict):
            for key, item in value.items():
                _check_text(f"a key in {where}", key)
                pending.append((key if where == "body" else f"{where}.{key}", item, depth + 1))
        elif isinstance(value, list):
            pending.extend((f"{where}[{i}]", item, depth + 1) for i, item in enumerate(value))
        elif isinstance(value, str):
            _check_text(f"field {where}", value)
        elif isinstance(value, float) and not math.isfinite(value):
            raise HttpError(400, f"field {where} is a number too large to hold")


def _check_text(where: str, text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise HttpError(400, f"{_clip(where)} contains a lone surrogate escape (such as "
                             f"\\udfff), which is not valid Unicode text") from None


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _outbound_dict(message: Any) -> dict[str, Any]:
    data = {key: get_field(message, key) for key in _OUTBOUND_FIELDS}
    return {key: value if isinstance(value, str | None) else str(value)
            for key, value in data.items()}
