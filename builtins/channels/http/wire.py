"""What the `http` channel writes on the wire: JSON answers and Server-Sent Events.

An SSE event is `event: <kind>` and `data: <json>` lines ended by a blank line, and a
client splits the stream into lines before it parses anything. Which characters end a line
depends on the client: the SSE specification says CR, LF and CRLF, but common clients split
the decoded text with `str.splitlines` (httpx's `iter_lines`), which also breaks at U+0085
(NEXT LINE), U+2028 (LINE SEPARATOR) and U+2029 (PARAGRAPH SEPARATOR). A file the model
quotes may hold any of them; sent raw, one would end the `data:` line early, and what
follows it could read as a line of its own (`event: done`, say). So every JSON text written
here has those three as `\\u0085`, `\\u2028`, `\\u2029` escapes (still the same JSON value),
and JSON itself never leaves CR, LF or another control character raw.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = [
    "ALWAYS_HEADERS",
    "SSE_HEADERS",
    "Disconnected",
    "dumps",
    "send_chunk",
    "send_json",
    "sse",
    "websocket_refusal",
]

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]

JSON_HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
ALWAYS_HEADERS = [(b"x-content-type-options", b"nosniff")]
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}
"""Line breaks of `str.splitlines` that JSON may leave raw (the others are control
characters, which `json.dumps` always escapes)."""


class Disconnected(Exception):
    """The client went away; nothing more can be sent."""


def dumps(data: Any) -> bytes:
    """`data` as UTF-8 JSON with no character any client reads as a line break."""
    text = json.dumps(data, ensure_ascii=False, default=str)
    return text.translate(_LINE_BREAKS).encode("utf-8")


def sse(kind: str, data: Any) -> bytes:
    """One Server-Sent Event: `kind` (a fixed name) and `data` as one JSON line."""
    if not kind.isidentifier():
        raise ValueError(f"not an event name: {kind!r}")
    return b"event: " + kind.encode() + b"\ndata: " + dumps(data) + b"\n\n"


async def send_chunk(send: Send, data: bytes) -> None:
    try:
        await send({"type": "http.response.body", "body": data, "more_body": True})
    except OSError as exc:
        raise Disconnected from exc


async def send_json(send: Send, status: int, data: Any,
                    headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = dumps(data)
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [*JSON_HEADERS, (b"content-length", str(len(body)).encode()),
                    *(headers or [])],
    })
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def websocket_refusal(scope: dict[str, Any], receive: Receive, send: Send) -> Send:
    """A `send` that answers a WebSocket handshake with the HTTP response written to it,
    through the server's `websocket.http.response` extension; a server without it gets
    `websocket.close` (hypercorn then answers 403). An app that sent nothing would leave
    the server to answer 500."""
    await receive()  # websocket.connect: the handshake arrived
    extension = "websocket.http.response" in scope.get("extensions", {})

    async def refuse(message: dict[str, Any]) -> None:
        if extension:
            await send({**message, "type": f"websocket.{message['type']}"})
        elif message["type"] == "http.response.start":
            await send({"type": "websocket.close", "code": 1008})

    return refuse
