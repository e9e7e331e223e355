"""Every gateway answer carries its request id, and `GET /v1/messages/{id}` returns what
the request came to, through a real gateway over real HTTP: after a whole reply, after a
stream, 202 while the turn still runs, after the client dropped its connection mid-turn
(the turn goes on and its answer is kept), 404 for an unknown id, 401 without the token."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_support import (
    TEST_TOKEN,
    Gateway,
    Response,
    call,
    connect,
    gateway_env,
    post,
    post_stream,
    request_headers,
    start_gateway_process,
)


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    script = tmp_path / "turns.json"
    script.write_text(json.dumps({"turns": [
        {"text": "first answer"}, {"text": "streamed answer"},
        {"text": "slow answer", "delay": 3}, {"text": "after a drop", "delay": 2}]}))
    started = start_gateway_process(
        ["--port", "0"], gateway_env(tmp_path / "home", HOOKLINE_MODEL=f"scripted:{script}"),
        tmp_path)
    try:
        yield started
    finally:
        started.end()


def fetch(gateway: Gateway, request_id: str, **kwargs: Any) -> Response:
    return call(gateway.url, "GET", f"/v1/messages/{request_id}", **kwargs)


def test_answers_carry_their_id_and_can_be_fetched_again(gateway: Gateway) -> None:
    whole = post(gateway.url, {"content": "one", "session_id": "a"})
    request_id = whole.headers["hookline-request-id"]
    again = fetch(gateway, request_id)
    assert again.status == 200
    assert again.json()["content"] == "first answer"
    assert again.json()["id"] == request_id
    assert fetch(gateway, request_id, token=None).status == 401
    missing = fetch(gateway, "no-such-request")
    assert missing.status == 404

    streamed = post_stream(gateway.url, {"content": "two", "session_id": "b"})
    kind, first = streamed.events[0]
    assert kind == "request" and first["id"] == streamed.headers["hookline-request-id"]
    kept = fetch(gateway, first["id"])
    assert kept.json()["content"] == "streamed answer"


def test_a_client_that_drops_mid_turn_fetches_its_answer(gateway: Gateway) -> None:
    post(gateway.url, {"content": "one", "session_id": "c"})
    post_stream(gateway.url, {"content": "two", "session_id": "c"})
    conn = connect(gateway.url, 30)
    body = json.dumps({"content": "three", "session_id": "c", "stream": True}).encode()
    conn.request("POST", "/v1/messages", body=body,
                 headers=request_headers(body, TEST_TOKEN, None))
    response = conn.getresponse()
    request_id = response.getheader("hookline-request-id")
    assert request_id and response.readline().startswith(b"event: request")
    conn.close()  # the client leaves while the (slow) turn runs
    running = fetch(gateway, request_id)
    assert running.status == 202
    assert running.json() == {"id": request_id, "status": "running"}
    deadline = time.monotonic() + 30
    while (found := fetch(gateway, request_id)).status == 202:
        assert time.monotonic() < deadline, "the turn never finished"
        time.sleep(0.2)
    assert found.status == 200
    assert found.json()["content"] == "slow answer"
