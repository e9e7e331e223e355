"""`hookline gateway` keeps its word on SIGTERM: every message it admitted either runs or
is answered 503 with `Retry-After` (not run, may be sent again), and every stream ends
with an event.

The real console script runs in a subprocess (fresh home beside the workspace, port 0);
a turn is held open by a shell command in the workspace that waits for a `release` file
the test creates, so the order of events is fixed without timing.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from gateway_support import (
    EventStream,
    Gateway,
    Response,
    gateway_env,
    post,
    post_stream,
    start_gateway_process,
    tape_payloads,
)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="signals are POSIX")

NOT_RUN = "the message was not run and may be sent again"


def held(name: str) -> str:
    """A turn whose shell command marks `<name>.held`, then waits for `release`."""
    command = (f"touch {name}.held; while [ ! -e release ]; do sleep 0.05; done; "
               f"echo {name} released")
    return "/tool shell " + json.dumps({"command": command})


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    started = start_gateway_process(["--port", "0"], gateway_env(tmp_path / "home"),
                                    workspace, gates=workspace)
    yield started
    (workspace / "release").touch()
    started.end()


def wait_held(gateway: Gateway, name: str, timeout: float = 60.0) -> None:
    """Until the turn's shell command has marked `<name>.held` in the workspace."""
    marker = gateway.gates / f"{name}.held"
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert time.monotonic() < deadline, f"turn {name!r} never ran its command"
        assert gateway.proc.poll() is None, f"gateway exited: {gateway.stderr}"
        time.sleep(0.02)


def assert_not_run(reply: Response, session_id: str, reason: str) -> None:
    assert reply.status == 503, reply.body
    assert reply.headers["retry-after"] == "5"
    assert reply.json() == {"status": "not_run", "error": f"{reason}; {NOT_RUN}",
                            "retryable": True, "retry_after": 5, "session_id": session_id}


def user_entries(home: Path, text: str) -> int:
    return sum(1 for payload in tape_payloads(home)
               if text in payload and '"role": "user"' in payload)


def test_sigterm_answers_the_queued_follow_ups_at_once_and_finishes_the_running_turn(
        gateway: Gateway) -> None:
    with ThreadPoolExecutor(4) as pool:
        running: Future[EventStream] = pool.submit(
            post_stream, gateway.url, {"content": held("first"), "session_id": "Q"}, 120)
        wait_held(gateway, "first")
        whole = [pool.submit(post, gateway.url, {"content": f"follow-up {n}",
                                                 "session_id": "Q"}, timeout=120)
                 for n in ("one", "two")]
        streamed = pool.submit(post_stream, gateway.url,
                               {"content": "follow-up three", "session_id": "Q"}, 120)
        for _ in range(3):
            gateway.wait_for_line("channel.message_queued session=Q")
        gateway.proc.send_signal(signal.SIGTERM)
        gateway.wait_for_line("SIGTERM received, stopping; waiting for 1 running turn(s)")

        # Answered while the running turn still waits for `release`: nobody is kept waiting
        # for a turn that will never start.
        for future in whole:
            assert_not_run(future.result(), "Q",
                           "the gateway stopped before the message's turn started")
        stream = streamed.result()
        assert stream.status == 200 and "queued behind the running turn of the session" in \
            stream.comments
        assert stream.events[0][0] == "request"
        assert stream.events[1:] == [("error", {
            "kind": "not_run", "status": 503, "retryable": True, "retry_after": 5,
            "session_id": "Q", "message": "the gateway stopped before the message's turn "
                                          f"started; {NOT_RUN}"})]
        assert not running.done()

        # A message arriving after the signal: the same answer, whole or streamed.
        assert_not_run(post(gateway.url, {"content": "too late", "session_id": "L"}), "L",
                       "the gateway is shutting down")
        late = post_stream(gateway.url, {"content": "too late, streamed"})
        assert late.status == 503 and late.headers["retry-after"] == "5"
        assert late.events == [("json", {
            "status": "not_run", "error": f"the gateway is shutting down; {NOT_RUN}",
            "retryable": True, "retry_after": 5, "session_id": "http:default"})]
        assert not running.done()

        (gateway.gates / "release").touch()
        first = running.result()
    assert first.status == 200
    kind, done = first.events[-1]
    assert kind == "done" and "first released" in done["content"]
    assert gateway.proc.wait(timeout=60) == 0
    assert user_entries(gateway.home, "first.held") == 1, "the running turn, once"
    for text in ("follow-up one", "follow-up two", "follow-up three", "too late"):
        assert user_entries(gateway.home, text) == 0, f"{text!r} was answered as not run"


def test_a_second_sigterm_cancels_the_running_turns_and_each_answer_says_so(
        gateway: Gateway) -> None:
    with ThreadPoolExecutor(3) as pool:
        streamed = pool.submit(post_stream, gateway.url,
                               {"content": held("streamed"), "session_id": "S"}, 120)
        whole = pool.submit(post, gateway.url, {"content": held("whole"), "session_id": "W"},
                            timeout=120)
        wait_held(gateway, "streamed")
        wait_held(gateway, "whole")
        queued = pool.submit(post, gateway.url, {"content": "behind it", "session_id": "W"},
                             timeout=120)
        gateway.wait_for_line("channel.message_queued session=W")
        gateway.proc.send_signal(signal.SIGTERM)
        gateway.wait_for_line("SIGTERM received, stopping; waiting for 2 running turn(s)")
        assert_not_run(queued.result(), "W",
                       "the gateway stopped before the message's turn started")
        gateway.proc.send_signal(signal.SIGTERM)
        gateway.wait_for_line("SIGTERM received again, cancelling 2 running turn(s)")
        stream, reply = streamed.result(), whole.result()
    cancelled = ("the gateway stopped before the turn finished: it was cancelled and may "
                 "have partly run")
    assert stream.status == 200
    assert [kind for kind, _ in stream.events][-2:] == ["error", "done"]
    assert stream.events[-2][1] == {"kind": "unknown", "message": cancelled}
    assert stream.events[-1][1]["error"] == cancelled
    assert reply.status == 500 and reply.json()["error"] == cancelled
    assert "released" not in reply.json()["content"]
    assert gateway.proc.wait(timeout=60) == 0, "cancelled turns end within the grace"
