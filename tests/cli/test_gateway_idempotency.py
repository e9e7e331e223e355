"""`Idempotency-Key` through a real gateway over real HTTP: a retry never runs its turn
twice. After the first ended it gets the same answer; while the first runs it waits for
it; another body with the same key is 422; and after the gateway was SIGKILLed during a
streamed turn's tool and started again, the retry gets the recovered outcome
(`interrupted`), the tool has run once and the user message is once on the tape."""

from __future__ import annotations

import http.client
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from gateway_support import Response, call, gateway_env, start_gateway_process

SLOW_TOOL = {"name": "shell", "arguments": {
    "command": "echo ran >> counter.txt; touch started; sleep 30"}}


def keyed(gateway: Any, body: dict[str, Any], key: str, **kwargs: Any) -> Response:
    return call(gateway.url, "POST", "/v1/messages", body, headers={"Idempotency-Key": key},
                **kwargs)


def done_event(response: Response) -> dict[str, Any]:
    """The data of a streamed answer's `done` event."""
    events = response.body.decode().split("\n\n")
    (data,) = [event.split("\ndata: ", 1)[1] for event in events
               if event.startswith("event: done\n")]
    return dict(json.loads(data))


def start(tmp_path: Path, turns: list[dict[str, Any]]) -> Any:
    script = tmp_path / "turns.json"
    script.write_text(json.dumps({"turns": turns}))
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    return start_gateway_process(["--port", "0"], gateway_env(
        tmp_path / "home", HOOKLINE_MODEL=f"scripted:{script}"), workspace)


def test_a_retry_gets_the_first_answer_and_another_body_is_422(tmp_path: Path) -> None:
    gateway = start(tmp_path, [{"text": "only once"}, {"text": "a second run!"}])
    try:
        body = {"content": "hello", "session_id": "k"}
        first = keyed(gateway, body, "key-1")
        again = keyed(gateway, body, "key-1")
        other = keyed(gateway, {**body, "content": "changed"}, "key-1")
    finally:
        gateway.end()
    assert first.status == again.status == 200, again.body
    assert again.json()["content"] == first.json()["content"] == "only once"
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["hookline-request-id"] == first.headers["hookline-request-id"]
    assert other.status == 422 and "another body" in other.json()["error"]


def test_a_retry_while_the_first_runs_waits_for_it(tmp_path: Path) -> None:
    gateway = start(tmp_path, [{"text": "slow answer", "delay": 2}, {"text": "never"}])
    answers: list[Response] = []
    body = {"content": "hello", "session_id": "w"}
    try:
        thread = threading.Thread(target=lambda: answers.append(keyed(gateway, body, "k2")))
        thread.start()
        time.sleep(0.5)
        retry = keyed(gateway, body, "k2")
        thread.join(30)
    finally:
        gateway.end()
    assert answers[0].json()["content"] == retry.json()["content"] == "slow answer"


def test_after_a_sigkill_the_retry_gets_the_recovered_outcome_and_nothing_runs_twice(
        tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    gateway = start(tmp_path, [{"tool_calls": [SLOW_TOOL]}, {"text": "done"}] * 2)
    body = {"content": "deploy", "session_id": "d", "stream": True}
    cut: list[BaseException] = []

    def first_attempt() -> None:
        try:
            keyed(gateway, body, "deploy-1", timeout=60)
        except (ConnectionError, http.client.HTTPException) as exc:  # the gateway is killed
            cut.append(exc)

    thread = threading.Thread(target=first_attempt, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not (workspace / "started").exists():
        assert time.monotonic() < deadline, "the tool never started"
        time.sleep(0.05)
    os.kill(gateway.proc.pid, signal.SIGKILL)
    gateway.proc.wait(10)
    thread.join(30)
    assert cut, "the first attempt's connection was cut with the gateway"
    # Were the retry run again, its model would call this fast tool: the counter would say.
    fast = {"name": "shell", "arguments": {"command": "echo ran >> counter.txt"}}
    restarted = start(tmp_path, [{"tool_calls": [fast]}, {"text": "ran again"}])
    try:
        retry = keyed(restarted, body, "deploy-1")
    finally:
        restarted.end()
    assert retry.status == 200, retry.body
    assert done_event(retry)["status"] == "interrupted"
    assert retry.headers["idempotent-replayed"] == "true"
    assert (workspace / "counter.txt").read_text() == "ran\n", "the tool ran once"
    home = tmp_path / "home"
    from hookline.builtins.store import SQLiteTapeStore
    from hookline.builtins.tape import session_tape_name
    from hookline.kernel.tape import TapeQuery

    with SQLiteTapeStore(home / "tapes.db") as store:
        entries = store.fetch_all(TapeQuery(session_tape_name("d", workspace.resolve())))
    said = [e.payload["content"] for e in entries
            if e.kind == "message" and e.payload.get("role") == "user"]
    assert said.count("deploy") == 1, said


def test_after_a_restart_a_retry_answers_the_first_request_s_id(tmp_path: Path) -> None:
    """Recalled from the tape, a replay names the first request (header and body), the
    same each time: the id `GET /v1/messages/{id}` takes, a completion's id."""
    gateway = start(tmp_path, [{"text": "the answer"}])
    body = {"content": "q", "session_id": "r"}
    try:
        first = keyed(gateway, body, "key-r")
    finally:
        gateway.end()
    restarted = start(tmp_path, [{"text": "a second run!"}])
    try:
        retries = [keyed(restarted, body, "key-r") for _ in range(2)]
    finally:
        restarted.end()
    request_id = first.headers["hookline-request-id"]
    for retry in retries:
        assert retry.headers["idempotent-replayed"] == "true"
        assert retry.headers["hookline-request-id"] == request_id == retry.json()["id"]
        assert retry.json()["content"] == "the answer"


def test_after_a_restart_an_answer_is_fetched_from_its_sessions_tape(tmp_path: Path) -> None:
    """The kept answers live in the process; `?session_id=` finds one on the tape."""
    gateway = start(tmp_path, [{"text": "the answer"}])
    try:
        first = call(gateway.url, "POST", "/v1/messages", {"content": "q", "session_id": "f"})
    finally:
        gateway.end()
    request_id = first.headers["hookline-request-id"]
    restarted = start(tmp_path, [])
    try:
        unknown = call(restarted.url, "GET", f"/v1/messages/{request_id}")
        found = call(restarted.url, "GET", f"/v1/messages/{request_id}?session_id=f")
        elsewhere = call(restarted.url, "GET", f"/v1/messages/{request_id}?session_id=g")
    finally:
        restarted.end()
    assert unknown.status == 404 and "?session_id=" in unknown.json()["error"]
    assert found.status == 200, found.body
    assert found.json()["content"] == "the answer" == first.json()["content"]
    assert found.json()["id"] == request_id and found.json()["status"] == "ok"
    assert elsewhere.status == 404
