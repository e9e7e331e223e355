"""Processes sharing one home's embedded tape store, over real HTTP against a loopback
OpenAI-compatible model: two gateways (a restart beside the old one draining, two ports),
and a gateway beside `hookline run`. A keyed request runs once whichever gateway its
retry reaches, also when the first was killed; a run killed beside a gateway that stays
up is on the tape, with its call's unknown outcome, before the gateway's next turn reads
the session."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_support import Response, call, gateway_env, start_gateway_process
from openai_server import OpenAIServer, RecordedRequest, Reply

HOOKLINE = Path(sys.executable).parent / "hookline"
SPEC = "openai-compatible:test-model"


def slow_tool(seconds: int) -> dict[str, Any]:
    return {"name": "shell", "arguments": {
        "command": f"echo ran >> counter.txt; touch started; sleep {seconds}"}}


@pytest.fixture
def model() -> Iterator[OpenAIServer]:
    """Asks for the slow tool after a user message, else answers `done`."""
    def respond(request: RecordedRequest) -> Reply:
        if request.messages[-1]["role"] == "user" and "deploy" in str(request.messages[-1]):
            return Reply(tool_calls=[slow_tool(4)])
        return Reply(text="done")

    with OpenAIServer(responder=respond) as server:
        yield server


def environment(tmp_path: Path, server: OpenAIServer) -> dict[str, str]:
    return gateway_env(tmp_path / "home", HOOKLINE_MODEL=SPEC, HOOKLINE_API_BASE=server.base_url,
                       HOOKLINE_API_KEY="sk-test")


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def keyed(url: str, key: str, **kwargs: Any) -> Response:
    return call(url, "POST", "/v1/messages", {"content": "deploy", "session_id": "s"},
                headers={"Idempotency-Key": key}, timeout=60, **kwargs)


@pytest.fixture
def gateways(tmp_path: Path, model: OpenAIServer) -> Iterator[tuple[Path, Any, Any]]:
    """The workspace, and two gateways on one home serving it."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = environment(tmp_path, model)
    first, second = (start_gateway_process(["--port", "0"], env, workspace) for _ in range(2))
    try:
        yield workspace, first, second
    finally:
        first.end()
        second.end()


def test_a_retry_to_the_other_gateway_waits_for_the_first_and_replays_it(
        gateways: tuple[Path, Any, Any]) -> None:
    workspace, first, second = gateways
    answers: list[Response] = []
    thread = threading.Thread(target=lambda: answers.append(keyed(first.url, "k1")))
    thread.start()
    wait_for(workspace / "started")
    retry = keyed(second.url, "k1")
    thread.join(60)
    assert answers[0].status == retry.status == 200, retry.body
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.json()["content"] == answers[0].json()["content"] == "done"
    assert (workspace / "counter.txt").read_text() == "ran\n", "the tool ran once"


def test_a_retry_to_the_other_gateway_after_the_first_was_killed_runs_nothing_twice(
        gateways: tuple[Path, Any, Any]) -> None:
    workspace, first, second = gateways
    cut: list[BaseException] = []

    def first_attempt() -> None:
        try:
            keyed(first.url, "k2")
        except (ConnectionError, http.client.HTTPException) as exc:
            cut.append(exc)

    thread = threading.Thread(target=first_attempt, daemon=True)
    thread.start()
    wait_for(workspace / "started")
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait(10)
    thread.join(30)
    retry = keyed(second.url, "k2")
    assert cut, "the first attempt's connection was cut with its gateway"
    assert retry.status == 200 and retry.headers["idempotent-replayed"] == "true", retry.body
    assert retry.json()["status"] == "interrupted"
    assert (workspace / "counter.txt").read_text() == "ran\n", "the tool ran once"


def test_a_run_killed_beside_a_gateway_is_in_the_gateways_next_turn(
        tmp_path: Path, model: OpenAIServer) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = environment(tmp_path, model)
    gateway = start_gateway_process(["--port", "0"], env, workspace)
    try:
        hello = call(gateway.url, "POST", "/v1/messages", {"content": "hello", "session_id": "s"})
        assert hello.status == 200, hello.body
        killed = subprocess.Popen([str(HOOKLINE), "run", "--session", "s", "deploy"],
                                  cwd=workspace, env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(workspace / "started")
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        after = call(gateway.url, "POST", "/v1/messages",
                     {"content": "did it run?", "session_id": "s"})
    finally:
        gateway.end()
    assert after.status == 200, after.body
    sent = [str(message.get("content")) for message in model.requests[-1].messages][1:]
    assert sent[:3] == ["hello", "done", "deploy"], sent
    assert "its outcome is unknown" in sent[4] and sent[-1] == "did it run?", sent
