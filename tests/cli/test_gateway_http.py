"""`hookline gateway` and the `http` channel.

The tests start the real console script in a subprocess (fresh hookline home, port 0) and
talk to it over loopback with real HTTP requests. A test plugin, installed through a
dist-info entry point on PYTHONPATH, decides admission from the message context (`admit`)
and can hold a turn's first model step (`started` marker file, `wait_for` another turn's
marker, `sleep`), so tests can overlap turns deterministically. The channel in process,
under anyio on asyncio and on trio, is tried in test_gateway_http_channel.py.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from gateway_support import (
    HOOKLINE,
    TEST_TOKEN,
    EventStream,
    Gateway,
    Response,
    call,
    gateway_env,
    post,
    post_stream,
    start_gateway_process,
    tape_payloads,
)
from plugin_site import install_plugin

GATE_PLUGIN = '''
import os
import time
from pathlib import Path

import anyio

from hookline.kernel import hookimpl
from hookline.kernel.channels import AdmitDecision
from hookline.kernel.envelope import get_field

GATES = Path(os.environ["GATE_DIR"])
KEYS = ("started", "wait_for", "sleep")


class GatePlugin:
    """Admission from context["admit"]; holds the first model step of a turn on request."""

    def __init__(self, framework):
        self.framework = framework

    @hookimpl
    def admit_message(self, session_id, message, turn):
        action = (get_field(message, "context") or {}).get("admit")
        if action == "drop":
            return AdmitDecision.drop("the test plugin drops it")
        if action == "follow_up":
            return AdmitDecision.follow_up()
        if action == "steer":
            return AdmitDecision.steer("steered by the test plugin")
        if action == "process":
            return AdmitDecision.process()
        return None

    @hookimpl
    def load_state(self, message, session_id):
        context = get_field(message, "context") or {}
        return {"_gate": {key: context[key] for key in KEYS if key in context}}

    @hookimpl
    def build_prompt(self, message, session_id, state):
        if str(get_field(message, "content")).startswith("explode"):
            raise RuntimeError("exploded on purpose")
        return None

    @hookimpl
    async def before_llm_call(self, request, state):
        gate = state.pop("_gate", None)  # the first model step only
        if not gate:
            return None
        if "started" in gate:
            (GATES / f"{gate['started']}.started").write_text("1")
        if "wait_for" in gate:
            other = GATES / f"{gate['wait_for']}.started"
            deadline = time.monotonic() + 20
            while not other.exists() and time.monotonic() < deadline:
                await anyio.sleep(0.02)
            if other.exists():
                (GATES / f"{gate['started']}.saw_{gate['wait_for']}").write_text("1")
        if "sleep" in gate:
            await anyio.sleep(float(gate["sleep"]))
        return None
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    site = install_plugin(tmp_path / "site", "gate_plugin", GATE_PLUGIN,
                          "gate = gate_plugin:GatePlugin")
    (tmp_path / "gates").mkdir()
    return gateway_env(tmp_path / "home", PYTHONPATH=str(site), GATE_DIR=str(tmp_path / "gates"))


@pytest.fixture
def start_gateway(env: dict[str, str], tmp_path: Path) -> Iterator[Any]:
    started: list[Gateway] = []

    def start(*args: str, extra_env: dict[str, str] | None = None) -> Gateway:
        gateway = start_gateway_process(["--port", "0", *args], {**env, **(extra_env or {})},
                                        tmp_path, gates=tmp_path / "gates")
        started.append(gateway)
        return gateway

    yield start
    for gateway in started:
        gateway.end()


# -- the gateway over HTTP ---------------------------------------------------------------


def test_health_and_a_whole_reply(start_gateway: Any) -> None:
    gateway = start_gateway()
    assert gateway.url.startswith("http://127.0.0.1:"), "loopback by default"
    health = call(gateway.url, "GET", "/v1/health")
    assert (health.status, health.json()) == (200, {"status": "ok"})

    reply = post(gateway.url, {"content": "hello there"})
    assert reply.status == 200, reply.body
    assert reply.headers["content-type"] == "application/json"
    data = reply.json()
    assert data["session_id"] == "http:default"
    assert data["content"].startswith("[offline model]") and "hello there" in data["content"]
    [outbound] = data["outbounds"]
    assert outbound["kind"] == "normal" and outbound["channel"] == "http"
    assert outbound["content"] == data["content"]
    # The offline model counts the words it wrote: the turn's usage is that count.
    assert data["usage"]["output_tokens"] == len(data["content"].split())

    chat = post(gateway.url, {"content": "hi", "chat_id": "room-7", "context": {"lang": "en"}})
    assert chat.json()["session_id"] == "http:room-7"
    assert "lang=en" in chat.json()["content"], "the context reaches the prompt"
    session = post(gateway.url, {"content": "hi", "session_id": "my-session", "stream": False})
    assert session.json()["session_id"] == "my-session"
    assert "hookline gateway: starting channels http" in gateway.stdout[0]


def test_streamed_reply_is_server_sent_events(start_gateway: Any) -> None:
    gateway = start_gateway()
    stream = post_stream(gateway.url, {"content": "stream this please", "session_id": "s"})
    assert stream.status == 200
    assert stream.headers["content-type"].startswith("text/event-stream")
    kinds = [kind for kind, _ in stream.events]
    assert kinds.count("text") >= 2, "the offline model streams several chunks"
    assert kinds[-2:] == ["final", "done"]
    text = "".join(data["delta"] for kind, data in stream.events if kind == "text")
    done = stream.events[-1][1]
    assert done["session_id"] == "s" and done["content"] == text
    assert done["usage"]["output_tokens"] == len(text.split())
    assert "stream this please" in text
    assert [o["kind"] for o in done["outbounds"]] == ["normal"]

    tool = post_stream(gateway.url, {"content": '/tool fs_write {"path": "n.txt", "content": '
                                                '"hi"}'})
    kinds = [kind for kind, _ in tool.events]
    assert kinds.index("tool_call") < kinds.index("tool_result") < kinds.index("done")
    [call_event] = [data for kind, data in tool.events if kind == "tool_call"]
    assert call_event["tool_calls"][0]["name"] == "fs_write"
    assert "wrote 2 bytes" in tool.events[-1][1]["content"]


def test_concurrent_requests_on_two_sessions_overlap(start_gateway: Any) -> None:
    gateway = start_gateway()
    with ThreadPoolExecutor(2) as pool:
        one = pool.submit(post, gateway.url, {"content": "first", "session_id": "A",
                                              "context": {"started": "A", "wait_for": "B"}})
        two = pool.submit(post_stream, gateway.url, {
            "content": "second", "session_id": "B",
            "context": {"started": "B", "wait_for": "A"}})
        first, second = one.result(), two.result()
    assert first.status == 200 and "first" in first.json()["content"]
    assert second.status == 200 and "second" in second.events[-1][1]["content"]
    # Each turn waited in its model step until the other one had reached its own.
    assert (gateway.gates / "A.saw_B").exists() and (gateway.gates / "B.saw_A").exists()


def test_admission_process_runs_turns_of_one_session_concurrently(start_gateway: Any) -> None:
    gateway = start_gateway()
    with ThreadPoolExecutor(2) as pool:
        replies = [pool.submit(post, gateway.url, {
            "content": f"turn {me}", "session_id": "shared",
            "context": {"admit": "process", "started": me, "wait_for": other}})
            for me, other in (("P", "Q"), ("Q", "P"))]
        results = [future.result() for future in replies]
    assert [r.status for r in results] == [200, 200]
    assert "turn P" in results[0].json()["content"] and "turn Q" in results[1].json()["content"]
    assert (gateway.gates / "P.saw_Q").exists() and (gateway.gates / "Q.saw_P").exists()


def test_admission_drop_answers_202(start_gateway: Any) -> None:
    gateway = start_gateway()
    dropped = post(gateway.url, {"content": "ignore me", "context": {"admit": "drop"}})
    assert dropped.status == 202
    assert dropped.json() == {"status": "dropped", "reason": "the test plugin drops it",
                              "session_id": "http:default"}
    streamed = post_stream(gateway.url, {"content": "me too", "context": {"admit": "drop"}})
    assert streamed.status == 202 and streamed.events[0][1]["status"] == "dropped"
    assert "ignore me" not in "".join(tape_payloads(gateway.home))


def test_admission_follow_up_waits_and_both_are_answered_in_order(start_gateway: Any) -> None:
    gateway = start_gateway()
    finished: list[str] = []

    def first() -> Response:
        reply = post(gateway.url, {"content": "first question", "session_id": "F",
                                   "context": {"started": "F1", "sleep": 1.5}})
        finished.append("first")
        return reply

    def second() -> EventStream:
        stream = post_stream(gateway.url, {"content": "second question", "session_id": "F",
                                           "context": {"admit": "follow_up"}})
        finished.append("second")
        return stream

    with ThreadPoolExecutor(2) as pool:
        one = pool.submit(first)
        gateway.wait_for_gate("F1")
        two = pool.submit(second)
        first_reply, second_stream = one.result(), two.result()
    assert finished == ["first", "second"]
    assert first_reply.status == 200 and "first question" in first_reply.json()["content"]
    assert second_stream.status == 200
    assert any("queued" in comment for comment in second_stream.comments)
    assert "second question" in second_stream.events[-1][1]["content"]


def test_admission_steer_joins_the_running_turn(start_gateway: Any) -> None:
    gateway = start_gateway()
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(post, gateway.url, {
            "content": "long task", "session_id": "S",
            "context": {"started": "S1", "sleep": 1.5}})
        gateway.wait_for_gate("S1")
        steered = post(gateway.url, {"content": "also mention bananas", "session_id": "S",
                                     "context": {"admit": "steer"}})
        assert steered.status == 202
        assert steered.json() == {"status": "steered", "reason": "steered by the test plugin",
                                  "session_id": "S"}
        reply = running.result()
    assert reply.status == 200
    content = reply.json()["content"]
    # The turn's next model step saw the steered message (the offline model echoes it).
    assert "long task" in content and "also mention bananas" in content
    assert content.index("long task") < content.index("also mention bananas")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b"{}", "missing field: content"),
        (b'{"content": ""}', "content must not be empty"),
        (b'{"content": "   "}', "content must not be empty"),
        (b'{"content": 42}', "content must be a string, got a number"),
        (b'{"content": null}', "content must be a string, got null"),
        (b'{"content": "hi", "stream": "yes"}', "stream must be true or false"),
        (b'{"content": "hi", "context": "x=1"}', "context must be an object"),
        (b'{"content": "hi", "session_id": 7}', "session_id must be a string"),
        (b'{"content": "hi", "session_id": ""}', "session_id must not be empty"),
        (b'{"content": "hi", "chat_id": ["a"]}', "chat_id must be a string, got an array"),
        (b'{"content": "hi", "contnet": "x"}', "unknown field(s): contnet"),
    ],
)
def test_bad_messages_get_400_with_a_json_error(shared_gateway: Gateway, raw: bytes,
                                                expected: str) -> None:
    reply = post(shared_gateway.url, None, raw=raw)
    assert reply.status == 400, reply.body
    assert reply.headers["content-type"] == "application/json"
    assert expected in reply.json()["error"]


def test_unknown_paths_methods_and_large_bodies(start_gateway: Any) -> None:
    gateway = start_gateway()
    missing = call(gateway.url, "GET", "/v1/nothing")
    assert missing.status == 404 and "no such endpoint: /v1/nothing" in missing.json()["error"]
    assert call(gateway.url, "POST", "/", {"content": "hi"}).status == 404
    wrong = call(gateway.url, "GET", "/v1/messages")
    assert wrong.status == 405 and wrong.headers["allow"] == "POST"
    assert "use POST" in wrong.json()["error"]
    health = call(gateway.url, "DELETE", "/v1/health")
    assert health.status == 405 and "GET" in health.json()["error"]
    big = b'{"content": "' + b"x" * (1024 * 1024) + b'"}'
    large = post(gateway.url, None, raw=big)
    assert large.status == 413 and "larger than 1048576 bytes" in large.json()["error"]
    just_fits = b'{"content": "' + b"x" * (1024 * 1024 - 20) + b'"}'
    assert post(gateway.url, None, raw=just_fits).status == 200


def test_a_failed_turn_answers_500_with_the_error(start_gateway: Any) -> None:
    gateway = start_gateway()
    failed = post(gateway.url, {"content": "explode now", "session_id": "E"})
    assert failed.status == 500
    data = failed.json()
    assert "exploded on purpose" in data["error"] and "stage 'turn'" in data["error"]
    assert data["session_id"] == "E" and data["outbounds"][0]["kind"] == "error"
    stream = post_stream(gateway.url, {"content": "explode again", "session_id": "E"})
    kinds = [kind for kind, _ in stream.events]
    assert stream.status == 200 and kinds == ["request", "error", "done"]
    assert "exploded on purpose" in stream.events[1][1]["message"]
    assert "exploded on purpose" in stream.events[2][1]["error"]
    assert post(gateway.url, {"content": "still alive?"}).status == 200


@pytest.mark.parametrize("stream", ["true", "false"])
def test_a_model_error_answers_500_after_the_whole_turn(start_gateway: Any,
                                                        tmp_path: Path, stream: str) -> None:
    """Whatever `stream` says (it is `hookline run`'s): the gateway's turns stream, or
    their errors would never reach the answer."""
    turns = tmp_path / "turns.json"
    turns.write_text(json.dumps({"turns": [
        {"text": "partial ", "error": {"kind": "provider", "message": "simulated outage"}},
        {"error": {"kind": "provider", "message": "second outage"}},
    ]}))
    gateway = start_gateway(extra_env={"HOOKLINE_MODEL": f"scripted:{turns}",
                                       "HOOKLINE_STREAM": stream})
    whole = post(gateway.url, {"content": "hello"})
    assert whole.status == 500
    data = whole.json()
    assert data["error"] == "An error occurred at stage 'run_model': [provider] simulated outage"
    # The reply the turn still rendered after the error is part of the answer.
    assert [o["kind"] for o in data["outbounds"]] == ["error", "normal"]
    assert data["content"] == "partial "
    stream = post_stream(gateway.url, {"content": "hello"})
    assert [kind for kind, _ in stream.events] == ["request", "error", "done"]
    assert stream.events[1][1] == {"kind": "provider", "message": "second outage"}
    assert "second outage" in stream.events[2][1]["error"]
    # Both failures are in the gateway's log, each with its request's id.
    for request_id, error in ((whole.headers["hookline-request-id"], "simulated outage"),
                              (stream.events[0][1]["id"], "second outage")):
        line = gateway.wait_for_line(f"http.turn_failed request={request_id}")
        assert "session=http:default" in line and error in line


def test_a_reply_that_takes_too_long_gets_504(start_gateway: Any) -> None:
    gateway = start_gateway(extra_env={"HOOKLINE_HTTP_TIMEOUT": "1"})
    slow = post(gateway.url, {"content": "slow", "session_id": "T",
                              "context": {"sleep": 3}})
    assert slow.status == 504 and slow.json()["error"] == "no reply within 1 s"
    stream = post_stream(gateway.url, {"content": "slow", "session_id": "T2",
                                       "context": {"sleep": 3}})
    assert stream.status == 200
    assert stream.events[-1] == ("error", {"kind": "temporary",
                                           "message": "no reply within 1 s"})


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_gracefully_after_the_running_turn(start_gateway: Any,
                                                          signum: int) -> None:
    gateway = start_gateway()
    token = f"graceful-{signal.Signals(signum).name}"
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(post, gateway.url, {
            "content": f"please finish {token}", "session_id": "G",
            "context": {"started": "G", "sleep": 1.5}})
        gateway.wait_for_gate("G")
        gateway.proc.send_signal(signum)
        reply = running.result()
    assert reply.status == 200 and token in reply.json()["content"]
    assert gateway.proc.wait(timeout=60) == 0
    name = signal.Signals(signum).name
    assert any(f"{name} received, stopping" in line for line in gateway.stdout)
    assert gateway.stdout[-1] == "hookline gateway: stopped"
    assert "Traceback" not in "\n".join(gateway.stderr)
    payloads = tape_payloads(gateway.home)
    assert any(token in p and '"role": "user"' in p for p in payloads), "the prompt"
    assert any(token in p and '"role": "assistant"' in p for p in payloads), "the reply"


def test_listening_failure_is_one_clear_line(start_gateway: Any, env: dict[str, str],
                                             tmp_path: Path) -> None:
    gateway = start_gateway()
    port = urlsplit(gateway.url).port
    out = subprocess.run([HOOKLINE, "gateway", "--port", str(port)], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=60)
    assert out.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr
    assert "choose another port with --port or http_port" in out.stderr
    assert "Traceback" not in out.stderr


def test_no_channel_selected_is_an_error(env: dict[str, str], tmp_path: Path) -> None:
    assert HOOKLINE
    out = subprocess.run([HOOKLINE, "gateway", "--channels", "!http"], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=60)
    assert out.returncode == 1
    assert out.stderr.startswith("error: no channel to run")


@pytest.fixture(scope="module")
def shared_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """One gateway for the many small request-validation cases."""
    root = tmp_path_factory.mktemp("shared")
    gateway = start_gateway_process(["--port", "0"], gateway_env(root / "home"), root)
    try:
        yield gateway
    finally:
        gateway.end()


def test_health_is_503_while_the_gateway_stops(start_gateway: Any) -> None:
    """A client that keeps its connection open sees the shutdown in /v1/health."""
    from gateway_support import connect

    gateway = start_gateway()
    conn = connect(gateway.url)
    try:
        conn.request("GET", "/v1/health")
        first = conn.getresponse()
        assert (first.status, json.loads(first.read())) == (200, {"status": "ok"})
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(post, gateway.url, {
                "content": "keep the gateway busy", "session_id": "H",
                "context": {"started": "H", "sleep": 3}})
            gateway.wait_for_gate("H")
            gateway.proc.send_signal(signal.SIGTERM)
            gateway.wait_for_line("SIGTERM received")
            gateway.wait_for_line("refusing new messages")
            conn.request("GET", "/v1/health", headers={"authorization": f"Bearer {TEST_TOKEN}"})
            stopping = conn.getresponse()
            assert stopping.status == 503  # the reason for the token holder only
            assert json.loads(stopping.read()) == {"status": "unavailable",
                                                   "reason": "the gateway is shutting down"}
            refused = post(gateway.url, {"content": "too late", "session_id": "H2"})
            assert refused.status == 503, "a new connection gets a clear answer while draining"
            assert refused.headers["retry-after"] == "5"
            assert refused.json()["error"] == ("the gateway is shutting down; the message was "
                                               "not run and may be sent again")
            assert running.result().status == 200
    finally:
        conn.close()
    assert gateway.proc.wait(timeout=60) == 0


def test_a_message_for_a_busy_session_waits_for_its_turn_by_default(
        start_gateway: Any) -> None:
    gateway = start_gateway()
    finished: list[str] = []

    def ask(name: str, context: dict[str, Any]) -> EventStream:
        stream = post_stream(gateway.url, {"content": f"question {name}", "session_id": "B",
                                           "context": context})
        finished.append(name)
        return stream

    with ThreadPoolExecutor(2) as pool:
        one = pool.submit(ask, "one", {"started": "B1", "sleep": 1.5})
        gateway.wait_for_gate("B1")
        two = pool.submit(ask, "two", {"started": "B2"})
        first, second = one.result(), two.result()
    assert finished == ["one", "two"], "the second ran after the first"
    assert any("queued" in comment for comment in second.comments)
    assert "question two" in second.events[-1][1]["content"]
    assert "question one" in first.events[-1][1]["content"]


def test_http_busy_session_process_runs_them_at_once(start_gateway: Any) -> None:
    gateway = start_gateway(extra_env={"HOOKLINE_HTTP_BUSY_SESSION": "process"})
    with ThreadPoolExecutor(2) as pool:
        replies = [pool.submit(post, gateway.url, {
            "content": f"turn {me}", "session_id": "shared",
            "context": {"started": me, "wait_for": other}})
            for me, other in (("X", "Y"), ("Y", "X"))]
        results = [future.result() for future in replies]
    assert [r.status for r in results] == [200, 200]
    assert (gateway.gates / "X.saw_Y").exists() and (gateway.gates / "Y.saw_X").exists()


def test_http_busy_session_drop_answers_202(start_gateway: Any) -> None:
    gateway = start_gateway(extra_env={"HOOKLINE_HTTP_BUSY_SESSION": "drop"})
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(post, gateway.url, {"content": "long", "session_id": "D",
                                                  "context": {"started": "D1", "sleep": 1}})
        gateway.wait_for_gate("D1")
        dropped = post(gateway.url, {"content": "while busy", "session_id": "D"})
        assert dropped.status == 202 and dropped.json()["status"] == "dropped"
        assert "http_busy_session = drop" in dropped.json()["reason"]
        assert running.result().status == 200
    assert post(gateway.url, {"content": "now idle", "session_id": "D"}).status == 200


def test_http_busy_session_steer_never_steers_a_keyed_message(start_gateway: Any) -> None:
    """Steered, a message gets no turn of its own and leaves no mark a retry could find
    (it would run again): with an Idempotency-Key it waits for its own turn instead."""
    gateway = start_gateway(extra_env={"HOOKLINE_HTTP_BUSY_SESSION": "steer"})
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(post, gateway.url, {"content": "long", "session_id": "K",
                                                  "context": {"started": "K1", "sleep": 1}})
        gateway.wait_for_gate("K1")
        keyed = post_stream(gateway.url, {"content": "keyed", "session_id": "K"},
                            headers={"Idempotency-Key": "steer-key"})
        assert running.result().status == 200
    assert keyed.status == 200 and keyed.events[-1][0] == "done", keyed.events
    assert any("queued" in comment for comment in keyed.comments), "after the running turn"
    again = post_stream(gateway.url, {"content": "keyed", "session_id": "K"},
                        headers={"Idempotency-Key": "steer-key"})
    assert again.headers.get("idempotent-replayed") == "true", (again.status, again.events)
