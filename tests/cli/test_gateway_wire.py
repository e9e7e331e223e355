"""The gateway's HTTP framing, tried as an attacker would, over real sockets on loopback.

Each test starts the real `hookline gateway` console script (fresh home, port 0). A
streamed reply whose text holds the characters a line-splitting SSE client breaks lines at
must arrive as one event, whole; a request framed two ways at once (Content-Length and
Transfer-Encoding: a smuggling attempt) is refused and its connection closed; an Upgrade
request (WebSocket, h2c) meets the same checks as any request and a 4xx, never a 500.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import h2.config
import h2.connection
import h2.events
import httpx2
import pytest
from gateway_support import TEST_TOKEN, Gateway, gateway_env, start_gateway_process
from openai_server import OpenAIServer, Reply

BREAKS = "one\u2028event: done\u2029data: {\"forged\": 1}\x85two\r\nthree\rfour\nfive\x0b\x0c\x1c"
"""Every character `str.splitlines` (httpx's `iter_lines`) ends a line at."""


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    started: list[Gateway] = []

    def run(**extra: str) -> Gateway:
        gateway = start_gateway_process(["--port", "0"], gateway_env(tmp_path / "home", **extra),
                                        tmp_path)
        started.append(gateway)
        return gateway

    yield run
    for gateway in started:
        gateway.end()


def read_events(lines: Iterator[str]) -> list[tuple[str, Any]]:
    """Server-Sent Events as the specification reads them, from lines already split."""
    events: list[tuple[str, Any]] = []
    kind, data = "message", []
    for line in lines:
        if not line:
            if data:
                events.append((kind, json.loads("\n".join(data))))
            kind, data = "message", []
        elif line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
    return events


def test_line_breaks_in_a_streamed_reply_stay_inside_their_event(start: Any) -> None:
    chunks = [BREAKS[:20], BREAKS[20:]]
    with OpenAIServer([Reply(text=chunks)]) as provider:
        gateway = start(HOOKLINE_MODEL="openai-compatible:test-model", HOOKLINE_API_KEY="k",
                        HOOKLINE_API_BASE=provider.base_url)
        body = {"content": "quote the file", "stream": True}
        headers = {"authorization": f"Bearer {TEST_TOKEN}"}
        with httpx2.Client(timeout=60) as client, client.stream(
                "POST", f"{gateway.url}/v1/messages", json=body, headers=headers) as response:
            assert response.status_code == 200
            events = read_events(response.iter_lines())
    kinds = [kind for kind, _ in events]
    assert kinds.count("done") == 1 and kinds[-1] == "done", kinds
    assert kinds[0] == "request" and set(kinds[1:]) <= {"text", "final", "done"}, kinds
    assert [data["delta"] for kind, data in events if kind == "text"] == chunks
    assert events[-1][1]["content"] == BREAKS


def test_a_provider_s_failure_reaches_the_client_without_the_operator_s_endpoint(
        start: Any) -> None:
    """The provider's address (`api_base`, often an internal one) is the operator's."""
    with OpenAIServer([Reply.failure(400, "the model does not take that")]) as provider:
        endpoint = provider.base_url
        gateway = start(HOOKLINE_MODEL="openai-compatible:test-model", HOOKLINE_API_KEY="k",
                        HOOKLINE_API_BASE=endpoint)
        headers = {"authorization": f"Bearer {TEST_TOKEN}"}
        with httpx2.Client(timeout=60) as client, client.stream(
                "POST", f"{gateway.url}/v1/messages", json={"content": "hi", "stream": True},
                headers=headers) as response:
            events = read_events(response.iter_lines())
    (error,) = [data for kind, data in events if kind == "error"]
    assert "does not take that" in error["message"]
    assert endpoint.split("//")[1] not in json.dumps(events)
    assert "api_base" not in error.get("details", {})


# -- framing and protocol switches -------------------------------------------------------

WEBSOCKET = ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")


def exchange(gateway: Gateway, request: str | bytes, timeout: float = 30.0) -> bytes:
    """Send `request` on a fresh connection and read until the gateway closes it (the
    `{port}` in a text request becomes the gateway's port)."""
    port = urlsplit(gateway.url).port
    assert port is not None
    data = request.replace("{port}", str(port)).encode() if isinstance(request, str) \
        else request
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        while chunk := sock.recv(65536):
            received += chunk
    return received


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def head(path: str, headers: str, token: bool = False, host: str = "127.0.0.1:{port}") -> str:
    auth = f"Authorization: Bearer {TEST_TOKEN}\r\n" if token else ""
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{auth}{headers}\r\n"


def test_a_body_framed_two_ways_is_refused_and_the_connection_closed(
        start: Any, tmp_path: Path) -> None:
    """CL.TE smuggling: a proxy reading Content-Length forwards it all as one request;
    read by Transfer-Encoding, the body ends at `0`, and the rest is a second request
    the proxy never saw (here one that runs a shell command)."""
    gateway = start()
    pwned = tmp_path / "pwned"
    inner = json.dumps({"content": f'/tool shell {{"command": "id > {pwned}"}}'})
    smuggled = (f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{{port}}\r\n"
                f"Authorization: Bearer {TEST_TOKEN}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(inner)}\r\n\r\n{inner}")
    body = "0\r\n\r\n" + smuggled
    outer = (f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{{port}}\r\n"
             f"Authorization: Bearer {TEST_TOKEN}\r\nContent-Type: application/json\r\n"
             f"Content-Length: {len(body)}\r\nTransfer-Encoding: chunked\r\n\r\n{body}")
    response = exchange(gateway, outer)
    assert response.count(b"HTTP/1.1 ") == 1, response
    assert status_of(response) == 400 and b"connection: close" in response.lower()
    assert b"both Content-Length and Transfer-Encoding" in response
    # Health, which asks for no token and reads no body, is framed the same way.
    health = exchange(gateway, head("/v1/health", "Content-Length: 3\r\n"
                                    "Transfer-Encoding: chunked\r\n") + "0\r\n\r\n")
    assert status_of(health) == 400
    assert call_ok(gateway), "the gateway still serves"
    assert not pwned.exists(), "the smuggled request ran"


def call_ok(gateway: Gateway) -> bool:
    return status_of(exchange(gateway, head("/v1/health", "Connection: close\r\n"))) == 200


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/health", "/elsewhere"])
def test_a_websocket_handshake_meets_every_check_and_a_4xx(start: Any, path: str) -> None:
    gateway = start()
    answers = {
        "no token": exchange(gateway, head(path, WEBSOCKET)),
        "token": exchange(gateway, head(path, WEBSOCKET, token=True)),
        "foreign host": exchange(gateway, head(path, WEBSOCKET, True, host="evil.example")),
        "web page": exchange(gateway, head(path, WEBSOCKET + "Origin: http://evil.example\r\n",
                                           token=True)),
    }
    assert {name: status_of(answer) for name, answer in answers.items()} == {
        "no token": 401, "token": 400, "foreign host": 403, "web page": 403}
    assert b"does not switch protocols (Upgrade: websocket)" in answers["token"]
    assert not any(b"101 " in answer.split(b"\r\n", 1)[0] for answer in answers.values())
    other = exchange(gateway, head(path, "Upgrade: foo/1, h2c\r\nConnection: Upgrade\r\n",
                                   token=True))
    assert status_of(other) == 400 and b"Upgrade: foo/1" in other
    assert call_ok(gateway)


def h2c_exchange(gateway: Gateway, path: str, extra: str = "") -> tuple[int, bytes, bytes]:
    """GET `path` asking to switch to HTTP/2 (h2c); the status line of the HTTP/1.1
    answer, then the status and body of the HTTP/2 answer to the request."""
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    settings = client.initiate_upgrade_connection().decode()
    port = urlsplit(gateway.url).port
    request = head(path, f"Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                         f"HTTP2-Settings: {settings}\r\n{extra}").replace("{port}", str(port))
    with socket.create_connection(("127.0.0.1", port or 0), timeout=30) as sock:
        sock.sendall(request.encode())
        received = b""
        while b"\r\n\r\n" not in received:
            received += sock.recv(65536)
        first, _, rest = received.partition(b"\r\n\r\n")
        if status_of(first) != 101:
            return status_of(first), b"", first + rest
        sock.sendall(client.data_to_send())
        status, body, ended = b"", b"", False
        data = rest
        while not ended:
            for event in client.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived) and event.stream_id == 1:
                    status = dict(event.headers)[b":status"]
                elif isinstance(event, h2.events.DataReceived) and event.stream_id == 1:
                    body += event.data
                elif isinstance(event, h2.events.StreamEnded) and event.stream_id == 1:
                    ended = True
            sock.sendall(client.data_to_send())
            data = b"" if ended else sock.recv(65536)
            assert ended or data, "the gateway closed the connection without answering"
    return 101, status, body


def test_an_h2c_upgrade_is_answered_in_http2_after_the_same_checks(start: Any) -> None:
    """hypercorn switches to HTTP/2 on its own before the channel sees the request; the
    request is then checked as any other."""
    gateway = start()
    assert h2c_exchange(gateway, "/v1/health")[:2] == (101, b"200")
    switched, status, body = h2c_exchange(gateway, "/v1/messages")
    assert (switched, status) == (101, b"401") and b"missing bearer token" in body
    switched, status, body = h2c_exchange(gateway, "/v1/messages",
                                          f"Authorization: Bearer {TEST_TOKEN}\r\n")
    assert (switched, status) == (101, b"405"), body
    assert h2c_exchange(gateway, "/v1/health", "Origin: http://evil.example\r\n")[1] == b"403"
    assert call_ok(gateway)
