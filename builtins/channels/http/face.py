"""The face of a request to the `http` channel: the shape its answer takes.

Every request runs the same way whatever route it came by (the guard's checks, admission
through the channel manager, its turn, idempotency, the kept answer), and the answer is
first what `POST /v1/messages` would send: a status, a JSON body and headers, or a stream
of named events ending with `done` or `error`. The face writes that in its route's shape:
`NativeFace` as it is, `OpenAIFace` (openai_face.py) as OpenAI's chat completions. A face
is made per request, with the request's id.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .media import with_attachments
from .overrides import RequestOverrides
from .payload import _parse_message
from .wire import Send, send_json, sse

__all__ = ["Face", "NativeFace"]

Headers = list[tuple[bytes, bytes]]


class Face(Protocol):
    request_id: str

    def read(self, body: bytes, headers: Mapping[str, list[str]], overrides: RequestOverrides,
             max_body_size: int) -> dict[str, Any]:
        """The posted body as the message `POST /v1/messages` takes (`content`,
        `session_id`, `stream`, `context`, ...); an `HttpError` for what it cannot take."""

    async def whole(self, send: Send, status: int, body: dict[str, Any],
                    headers: Headers) -> None:
        """Send a whole answer given as `POST /v1/messages` would send it."""

    async def refused(self, send: Send, status: int, message: str, headers: Headers,
                      code: str | None = None) -> None:
        """Send an error found before any turn (a check, a bad body)."""

    def opening(self) -> bytes:
        """The first bytes of a stream, after its response started."""

    def event(self, kind: str, data: Any) -> bytes:
        """One event of the request (`request`, the turn's events, `done`, `error`) as
        bytes of the stream; empty to leave it out."""

    def closing(self) -> bytes:
        """The last bytes of a stream, after its last event."""


def new_request_id() -> str:
    return uuid.uuid4().hex


@dataclass
class NativeFace:
    """hookline's own API: answers and events as they are (docs/http-channel.md)."""

    request_id: str = field(default_factory=new_request_id)

    def read(self, body: bytes, headers: Mapping[str, list[str]], overrides: RequestOverrides,
             max_body_size: int) -> dict[str, Any]:
        payload = with_attachments(_parse_message(body), len(body), max_body_size)
        overrides.check(payload)
        return payload

    async def whole(self, send: Send, status: int, body: dict[str, Any],
                    headers: Headers) -> None:
        await send_json(send, status, body, headers)

    async def refused(self, send: Send, status: int, message: str, headers: Headers,
                      code: str | None = None) -> None:
        await send_json(send, status, {"error": message}, headers)

    def opening(self) -> bytes:
        return b""

    def event(self, kind: str, data: Any) -> bytes:
        return sse(kind, data)

    def closing(self) -> bytes:
        return b""
