"""The gateway's HTTP framing, tried as an attacker would, over real sockets on loopback.

Each test starts the real `hookline gateway` console script (fresh home, port 0). A
streamed reply whose text holds the characters a line-splitting SSE client breaks lines at
must arrive as one event, whole; a request framed two ways at once (Content-Length and
Transfer-Encoding: a smuggling attempt) is refused and its connection closed; an Upgrade
request (WebSocket, h2c) meets the same checks as any request and a 4xx, never a 500.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    assert set(kinds) <= {"text", "final", "done"}, kinds
    assert [data["delta"] for kind, data in events if kind == "text"] == chunks
    assert events[-1][1]["content"] == BREAKS
