"""Approvals through a real gateway over real HTTP: a streamed request that asks for them
gets an SSE `approval` event and the turn waits for `POST /v1/approvals/{id}` (with the
token; 404 for an unknown id; no answer in time is a denial); a whole-reply request, or a
streamed one that did not ask, follows the policy alone (a question is a denial)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_support import (
    TEST_TOKEN,
    Gateway,
    call,
    connect,
    gateway_env,
    post,
    request_headers,
    start_gateway_process,
)

WRITE = {"name": "shell", "arguments": {"command": "echo made > made.txt"}}


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    """A gateway on approval = ask, answering with one scripted tool call per turn."""
    script = tmp_path / "turns.json"
    script.write_text(json.dumps({"turns": [{"tool_calls": [WRITE]}, {"text": "done"}] * 4}))
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    started = start_gateway_process(
        ["--port", "0", "--approval", "ask"],
        gateway_env(tmp_path / "home", HOOKLINE_MODEL=f"scripted:{script}",
                    HOOKLINE_HTTP_APPROVAL_TIMEOUT="3"), workspace)
    try:
        yield started
    finally:
        started.end()


def stream_answering(gateway: Gateway, answer: Callable[[dict[str, Any]], None],
                     session: str) -> list[tuple[str, Any]]:
    """POST a streamed message that takes approvals; call `answer` on each `approval`
    event as it arrives; return every event."""
    conn = connect(gateway.url, 60)
    try:
        body = json.dumps({"content": "make it", "session_id": session, "stream": True,
                           "approvals": True}).encode()
        conn.request("POST", "/v1/messages", body=body,
                     headers=request_headers(body, TEST_TOKEN, None))
        response = conn.getresponse()
        assert response.status == 200, response.read()
        events: list[tuple[str, Any]] = []
        kind, data = "message", []
        for raw in response:
            line = raw.decode().rstrip("\r\n")
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
            elif not line and data:
                events.append((kind, json.loads("\n".join(data))))
                if kind == "approval":
                    answer(events[-1][1])
                kind, data = "message", []
        return events
    finally:
        conn.close()


def results(events: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [record for kind, data in events if kind == "tool_result"
            for record in data["tool_results"]]


def test_the_question_arrives_as_an_sse_event_and_the_answer_endpoint_decides(
        gateway: Gateway, tmp_path: Path) -> None:
    answered: list[Any] = []

    def approve(question: dict[str, Any]) -> None:
        assert question["tool"] == "shell" and question["arguments"] == WRITE["arguments"]
        assert question["summary"] == "echo made > made.txt" and "approval = ask" in \
            question["reason"]
        path = f"/v1/approvals/{question['id']}"
        refused = call(gateway.url, "POST", path, {"decision": "approve"}, token=None)
        assert refused.status == 401, refused.body
        bad = call(gateway.url, "POST", path, {"decision": "maybe"})
        assert bad.status == 400 and "approve, approve_session, deny" in bad.json()["error"]
        answered.append(call(gateway.url, "POST", path,
                             {"decision": "approve", "message": "ok", "extra": "ignored"}))

    events = stream_answering(gateway, approve, "http:approve")
    assert [response.status for response in answered] == [200]
    assert answered[0].json()["decision"] == "approve"
    assert results(events)[0]["outcome"] == "ran"
    assert (tmp_path / "workspace" / "made.txt").read_text() == "made\n"
    (question,) = [data for kind, data in events if kind == "approval"]
    again = call(gateway.url, "POST", f"/v1/approvals/{question['id']}", {"decision": "deny"})
    assert again.status == 404, "an answered question takes no second answer"


def test_a_denial_over_http_reaches_the_model_and_an_unknown_id_is_404(
        gateway: Gateway, tmp_path: Path) -> None:
    unknown = call(gateway.url, "POST", "/v1/approvals/nope", {"decision": "approve"})
    assert unknown.status == 404 and "no question 'nope'" in unknown.json()["error"]

    def deny(question: dict[str, Any]) -> None:
        done = call(gateway.url, "POST", f"/v1/approvals/{question['id']}",
                    {"decision": "deny", "message": "use the staging folder"})
        assert done.status == 200

    events = stream_answering(gateway, deny, "http:deny")
    (record,) = results(events)
    assert record["outcome"] == "denied" and "use the staging folder" in record["error"]
    assert not (tmp_path / "workspace" / "made.txt").exists()


def test_no_answer_in_time_is_a_denial(gateway: Gateway, tmp_path: Path) -> None:
    events = stream_answering(gateway, lambda question: None, "http:timeout")
    (approval,) = [data for kind, data in events if kind == "approval"]
    assert approval["timeout"] == 3
    (record,) = results(events)
    assert record["outcome"] == "denied" and "nobody answered within 3 s" in record["error"]
    assert not (tmp_path / "workspace" / "made.txt").exists()


def test_a_whole_reply_request_follows_the_policy_alone(gateway: Gateway,
                                                         tmp_path: Path) -> None:
    whole = post(gateway.url, {"content": "make it", "session_id": "http:whole"})
    assert whole.status == 200, whole.body
    assert not (tmp_path / "workspace" / "made.txt").exists()
    refused = post(gateway.url, {"content": "x", "approvals": True})
    assert refused.status == 400 and "approvals: true needs stream: true" in \
        refused.json()["error"]
