"""The `http` channel in process, on asyncio and trio: a ChannelManager over a real Framework
answering real HTTP on loopback, and closing with replies in flight."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from gateway_support import TEST_TOKEN, post, post_stream

# -- the channel in process, on asyncio and trio -----------------------------------------


def _request_in_thread(url: str, payload: dict[str, Any]) -> Any:
    if payload.get("stream"):
        return post_stream(url, payload)
    return post(url, payload)


async def _until_listening(channel: Any) -> str:
    with anyio.fail_after(30):
        while channel.url is None:
            await anyio.sleep(0.01)
    return channel.url


@pytest.fixture
def framework(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from hookline.kernel import Framework

    for key in [k for k in os.environ if k.startswith("HOOKLINE_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOOKLINE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOOKLINE_HTTP_TOKEN", TEST_TOKEN)
    framework = Framework(tmp_path)
    framework.load_hooks()
    return framework


@pytest.mark.anyio
async def test_channel_in_process(framework: Any) -> None:
    from hookline.builtins.channels import ChannelManager
    from hookline.builtins.channels.http.channel import HttpChannel

    manager = ChannelManager(framework, enabled_channels="http")
    channel = manager.channels["http"]
    assert isinstance(channel, HttpChannel) and channel.manager_notifies
    channel.configure_listener(None, 0, None)
    stop = anyio.Event()
    async with framework.running(), anyio.create_task_group() as group:
        await group.start(manager.run, stop)
        url = await _until_listening(channel)
        whole = await anyio.to_thread.run_sync(
            _request_in_thread, url, {"content": "in process", "session_id": "ip"})
        assert whole.status == 200 and "in process" in whole.json()["content"]
        stream = await anyio.to_thread.run_sync(
            _request_in_thread, url, {"content": "streamed", "stream": True})
        assert stream.events[-1][0] == "done" and "streamed" in stream.events[-1][1]["content"]
        bad = await anyio.to_thread.run_sync(_request_in_thread, url, {"content": ""})
        assert bad.status == 400
        stop.set()
    assert channel.url is not None and not channel.requests.replies


@pytest.mark.anyio
async def test_closing_lets_a_reply_in_flight_finish(framework: Any) -> None:
    """When the stop event is set the listener closes, and a request in flight still gets
    its answer (here from a stand-in for the manager that answers after a delay)."""
    from hookline.builtins.channels.http.channel import HttpChannel
    from hookline.kernel.envelope import get_field

    replies: list[Any] = []

    async def handler(message: Any) -> None:
        async def answer() -> None:
            await anyio.sleep(0.5)
            # An outbound that carries the inbound's context is matched by request id.
            await channel.send({"session_id": get_field(message, "session_id"),
                                "channel": "http", "content": "late answer",
                                "context": dict(message["context"])})
        group.start_soon(answer)

    channel = HttpChannel(handler, host="127.0.0.1", port=0, reply_timeout=30)
    stop = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(channel.start, stop)
        url = await _until_listening(channel)

        async def ask() -> None:
            replies.append(await anyio.to_thread.run_sync(
                _request_in_thread, url, {"content": "wait for it"}))

        group.start_soon(ask)
        with anyio.fail_after(10):
            while not channel.requests.replies:
                await anyio.sleep(0.01)
        stop.set()  # start() returns once the request in flight is answered
    [reply] = replies
    assert reply.status == 200 and reply.json()["content"] == "late answer"
    with pytest.raises(OSError):
        await anyio.to_thread.run_sync(_request_in_thread, url, {"content": "too late"})


@pytest.mark.anyio
async def test_stop_answers_requests_whose_turn_never_ran(framework: Any) -> None:
    from hookline.builtins.channels.http.channel import HttpChannel

    replies: list[Any] = []

    async def handler(message: Any) -> None:
        return None  # a manager that keeps the message and never runs it

    channel = HttpChannel(handler, host="127.0.0.1", port=0, reply_timeout=30)
    stop = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(channel.start, stop)
        url = await _until_listening(channel)

        async def ask() -> None:
            replies.append(await anyio.to_thread.run_sync(
                _request_in_thread, url, {"content": "never runs", "stream": True}))

        group.start_soon(ask)
        with anyio.fail_after(10):
            while not channel.requests.replies:
                await anyio.sleep(0.01)
        await channel.stop()
    [reply] = replies
    assert reply.status == 503 and reply.headers["retry-after"] == "5"
    assert reply.events == [("json", {
        "status": "not_run", "error": "the gateway stopped before the message was handled; "
                                      "the message was not run and may be sent again",
        "retryable": True, "retry_after": 5, "session_id": "http:default"})]


def _half_close_after_a_reply(url: str, clients: int) -> list[bytes]:
    """`clients` keep-alive connections each get a health answer, then close their side;
    what each reads next (b"" once the server closed it too, before the 5 s keep-alive
    timeout ends it anyway)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    sockets = [socket.create_connection((parts.hostname, parts.port)) for _ in range(clients)]
    try:
        for sock in sockets:
            sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        for sock in sockets:
            answer = b""
            while not answer.endswith(b'{"status": "ok"}'):
                answer += sock.recv(4096)
            sock.shutdown(socket.SHUT_WR)
        ends = []
        for sock in sockets:
            sock.settimeout(3.0)  # less than the keep-alive timeout
            try:
                ends.append(sock.recv(1))
            except TimeoutError:
                ends.append(b"still open")
        return ends
    finally:
        for sock in sockets:
            sock.close()


@pytest.mark.anyio
async def test_a_client_closing_its_side_of_an_idle_connection_gets_it_closed(
        framework: Any) -> None:
    """No descriptor is held by half-closed (CLOSE-WAIT) sockets until the keep-alive
    timeout: the server closes an idle connection when its client does."""
    from hookline.builtins.channels.http.channel import HttpChannel

    async def handler(message: Any) -> None:
        return None

    channel = HttpChannel(handler, host="127.0.0.1", port=0, reply_timeout=30)
    stop = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(channel.start, stop)
        url = await _until_listening(channel)
        ends = await anyio.to_thread.run_sync(_half_close_after_a_reply, url, 20)
        stop.set()
    assert ends == [b""] * 20
