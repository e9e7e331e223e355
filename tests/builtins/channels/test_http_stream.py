"""How the `http` channel writes a streamed reply (builtins/channels/http/stream.py): every
event waiting goes in one chunk, in order; a quiet stream gets keep-alive comments; the
stream ends after the last event."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from hookline.builtins.channels.http import stream
from hookline.builtins.channels.http.face import NativeFace
from hookline.builtins.channels.http.reply import Reply

pytestmark = pytest.mark.anyio


class Sent:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    def chunks(self) -> list[bytes]:
        return [m["body"] for m in self.messages if m["type"] == "http.response.body"]


async def test_events_waiting_go_as_one_chunk_in_order_then_the_stream_ends() -> None:
    reply = Reply("r1", "s1", stream=True)
    for n in range(3):
        reply.emit("text", {"delta": f"d{n}"})
    sent = Sent()
    async with anyio.create_task_group() as group:
        group.start_soon(stream.send_events, reply, sent, NativeFace())
        await anyio.sleep(0.05)
        reply.emit("text", {"delta": "later"})
        await anyio.sleep(0.05)
        reply.decide("process")
        reply.finish()
    first, second, last, end = sent.chunks()
    assert first == (b'event: text\ndata: {"delta": "d0"}\n\n'
                     b'event: text\ndata: {"delta": "d1"}\n\n'
                     b'event: text\ndata: {"delta": "d2"}\n\n')
    assert second == b'event: text\ndata: {"delta": "later"}\n\n'
    assert last.startswith(b"event: done\n")
    assert end == b"" and sent.messages[-1]["more_body"] is False


async def test_a_quiet_stream_gets_keep_alive_comments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "KEEPALIVE_SECONDS", 0.05)
    reply = Reply("r1", "s1", stream=True)
    sent = Sent()
    async with anyio.create_task_group() as group:
        group.start_soon(stream.send_events, reply, sent, NativeFace())
        await anyio.sleep(0.18)
        reply.decide("process")
        reply.finish()
    chunks = sent.chunks()
    assert chunks[:3] == [b": keep-alive\n\n"] * 3
    assert chunks[-2].startswith(b"event: done\n") and chunks[-1] == b""
