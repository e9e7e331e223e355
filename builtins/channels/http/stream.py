"""Writing a streamed reply of the `http` channel: the turn's events, in the shape of the
request's face, with keep-alive comments in quiet stretches, and the answer of a request
whose reply did not come in time (an `error` event ending a stream begun, else `504`)."""

from __future__ import annotations

import logging

import anyio

from .face import Face
from .reply import Reply
from .wire import SSE_HEADERS, Disconnected, Send, send_chunk

__all__ = ["KEEPALIVE_SECONDS", "send_events", "send_timeout"]

logger = logging.getLogger("hookline.builtins.channels.http.channel")
"""The channel's logger: these lines are the channel's own."""

KEEPALIVE_SECONDS = 15.0
"""A stream quiet this long gets a comment, so that proxies keep the connection open."""


async def send_events(reply: Reply, send: Send, face: Face) -> None:
    """Stream the events of a request whose turn runs (or waits its turn), to the end."""
    assert reply.event_reader is not None
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    reply.response_started = True
    first = face.opening()
    if reply.outcome == "queued":
        first = b": queued behind the running turn of the session\n\n" + first
    if first:
        await send_chunk(send, first)
    reader = reply.event_reader
    ended = False
    async with reader:
        while not ended:
            # One chunk holds every event waiting by the time this task runs: under load,
            # a reply's deltas cost one send (one write to the socket) together.
            events: list[bytes] = []
            with anyio.move_on_after(KEEPALIVE_SECONDS):
                try:
                    events.append(face.event(*await reader.receive()))
                    while True:
                        events.append(face.event(*reader.receive_nowait()))
                except anyio.WouldBlock:
                    pass
                except anyio.EndOfStream:
                    ended = True
            chunk = b"".join(events)
            if chunk:
                await send_chunk(send, chunk)
            elif not ended and not events:  # a quiet while: tell proxies the stream is alive
                await send_chunk(send, b": keep-alive\n\n")
    await send({"type": "http.response.body", "body": face.closing(), "more_body": False})


async def send_timeout(reply: Reply, send: Send, timeout: float, face: Face) -> None:
    """Tell the client no reply came within `timeout` seconds (shielded: the request's
    own scope is being cancelled), giving up after 5 s or when it has gone."""
    message = f"no reply within {timeout:g} s"
    logger.warning("http.reply_timeout session=%s seconds=%g", reply.session_id, timeout)
    with anyio.CancelScope(shield=True), anyio.move_on_after(5):
        try:
            if reply.response_started:
                end = face.event("error", {"kind": "temporary", "message": message})
                await send({"type": "http.response.body", "body": end + face.closing(),
                            "more_body": False})
            else:
                await face.whole(send, 504, {"error": message, "session_id": reply.session_id},
                                 [])
        except Disconnected:
            pass
