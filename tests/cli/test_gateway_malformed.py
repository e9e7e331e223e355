"""Malformed, slow and incomplete requests to the real `hookline gateway` over loopback get a
4xx answer naming what is wrong, never a 5xx, and free their connection."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import pytest
from gateway_support import TEST_TOKEN, Gateway, gateway_env, post, start_gateway_process

from hookline.builtins.config.limits import MAX_SESSION_ID_LENGTH

# -- malformed requests are 4xx, never 5xx ---------------------------------------------

SURROGATE = '"\\udfff"'


LONG_ID = "s" * (MAX_SESSION_ID_LENGTH + 1)


MALFORMED = [
    ("deep nesting", b'{"content": "hi", "context": {"a": ' + b"[" * 100_000 + b"]" * 100_000
     + b"}}", "deeper than 32"),
    ("deep but parseable", b'{"content": "hi", "context": {"a": ' + b"[" * 200 + b"]" * 200
     + b"}}", "deeper than 32"),
    ("5,000-digit integer", b'{"content": "hi", "context": {"n": ' + b"7" * 5000 + b"}}",
     "not valid JSON"),
    ("NaN", b'{"content": "hi", "context": {"n": NaN}}', "NaN is not a JSON number"),
    ("huge float", b'{"content": "hi", "context": {"n": 1e999}}', "too large"),
    ("surrogate in session_id", f'{{"content": "hi", "session_id": {SURROGATE}}}'.encode(),
     "field session_id contains a lone surrogate"),
    ("surrogate in chat_id", f'{{"content": "hi", "chat_id": {SURROGATE}}}'.encode(),
     "field chat_id contains a lone surrogate"),
    ("surrogate in content", f'{{"content": {SURROGATE}}}'.encode(),
     "field content contains a lone surrogate"),
    ("surrogate in a context key", f'{{"content": "hi", "context": {{{SURROGATE}: 1}}}}'.encode(),
     "a key in context contains a lone surrogate"),
    ("surrogate in a context value", b'{"content": "hi", "context": {"a": ["\\ud800x"]}}',
     "field context.a[0] contains a lone surrogate"),
    ("long session id", json.dumps({"content": "hi", "session_id": LONG_ID}).encode(),
     f"at most {MAX_SESSION_ID_LENGTH} are allowed"),
    ("long chat id", json.dumps({"content": "hi", "chat_id": LONG_ID}).encode(),
     f"at most {MAX_SESSION_ID_LENGTH} are allowed"),
    ("control character in session id", b'{"content": "hi", "session_id": "a\\u0000b"}',
     "must not contain control characters"),
    ("newline in chat id", b'{"content": "hi", "chat_id": "a\\nb"}',
     "must not contain control characters"),
]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("security")
    gateway = start_gateway_process(["--port", "0"], gateway_env(root / "home"), root)
    try:
        yield gateway
    finally:
        gateway.end()


@pytest.mark.parametrize(("raw", "expected"), [case[1:] for case in MALFORMED],
                         ids=[case[0] for case in MALFORMED])
def test_malformed_bodies_get_400(shared: Gateway, raw: bytes, expected: str) -> None:
    for streamed in (False, True):
        body = raw if not streamed else raw[:-1] + b', "stream": true}'
        reply = post(shared.url, None, raw=body)
        assert reply.status == 400, reply.body
        assert expected in reply.json()["error"]
    assert post(shared.url, {"content": "still fine"}).status == 200
    assert "Traceback" not in "\n".join(shared.stderr)


def test_a_session_id_at_the_cap_works(shared: Gateway) -> None:
    at_cap = "s" * MAX_SESSION_ID_LENGTH
    reply = post(shared.url, {"content": "hi", "session_id": at_cap})
    assert reply.status == 200 and reply.json()["session_id"] == at_cap


def test_slow_bodies_get_408_and_free_their_connection(start: Any) -> None:
    gateway = start(HOOKLINE_HTTP_BODY_TIMEOUT="1")
    parts = urlsplit(gateway.url)
    head = (f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
            f"{TEST_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            f'{{"content": "').encode()

    def slow_client(_: int) -> tuple[bytes, float]:
        began = time.monotonic()
        with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
            sock.sendall(head)
            answer = b""
            while chunk := sock.recv(4096):  # until the server closes the connection
                answer += chunk
            return answer, time.monotonic() - began

    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(slow_client, range(50)))
    for answer, seconds in results:
        assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
        assert b"did not arrive within 1 s" in answer
        assert seconds < 20
    assert post(gateway.url, {"content": "the gateway still answers"}).status == 200


def test_incomplete_headers_are_cut_off(start: Any) -> None:
    gateway = start()
    parts = urlsplit(gateway.url)
    began = time.monotonic()
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")
        for _ in range(40):  # one byte a second would keep a naive server waiting
            time.sleep(0.5)
            try:
                sock.sendall(b"a")
            except OSError:
                break
        sock.settimeout(5)
        try:
            tail = sock.recv(100)
        except OSError:
            tail = b""
    assert tail == b"" and time.monotonic() - began < 20
