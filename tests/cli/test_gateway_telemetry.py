"""The gateway with `otel` on: HTTP server spans that continue a caller's trace, and
`GET /v1/metrics` behind the token, in Prometheus text whose counters move with turns.

The channel manager and the http channel run in process (asyncio and trio) on a real
loopback port; requests are real HTTP from a thread. The test installs `Telemetry` with
the SDK's in-memory exporter first, as `hookline run --trace` does, so the builtin
lifespan uses it (no exporter is configured: `OTEL_*_EXPORTER=none`).
"""

from __future__ import annotations

import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest
from gateway_support import TEST_TOKEN, call, post
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hookline.builtins.telemetry.setup import Telemetry
from hookline.kernel import hookimpl

pytestmark = pytest.mark.anyio

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"'
                     r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*)?\})? (\S+)$')


@pytest.fixture
def framework(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from hookline.kernel import Framework

    for key in [k for k in os.environ if k.startswith(("HOOKLINE_", "OTEL_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOOKLINE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOOKLINE_HTTP_TOKEN", TEST_TOKEN)
    monkeypatch.setenv("HOOKLINE_OTEL", "true")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    (tmp_path / "ws").mkdir()
    framework = Framework(tmp_path / "ws")
    framework.load_hooks()
    return framework


def parse_prometheus(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Samples of a Prometheus text exposition, strictly: every line a comment of a known
    form or a sample of a family declared by `# TYPE` before it."""
    declared: dict[str, str] = {}
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            assert len(line.split(" ", 3)) == 4, line
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram"), line
            declared[name] = kind
            continue
        match = _SAMPLE.match(line)
        assert match, f"not a Prometheus sample line: {line!r}"
        name, labels, value = match.group(1), match.group(3) or "", match.group(4)
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in declared or declared.get(family) == "histogram", line
        pairs = frozenset(tuple(pair.split("=", 1)) for pair in
                          re.findall(r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"', labels))
        samples[(name, frozenset((k, v.strip('"')) for k, v in pairs))] = float(value)
    return samples


async def _serve(framework: Any, body: Any) -> Any:
    from hookline.builtins.channels import ChannelManager

    manager = ChannelManager(framework, enabled_channels="http")
    channel = manager.channels["http"]
    channel.configure_listener(None, 0, None)
    stop = anyio.Event()
    async with framework.running(), anyio.create_task_group() as group:
        await group.start(manager.run, stop)
        with anyio.fail_after(30):
            while channel.url is None:
                await anyio.sleep(0.01)
        try:
            return await anyio.to_thread.run_sync(body, channel.url)
        finally:
            stop.set()


async def test_a_traceparent_makes_the_turn_part_of_the_callers_trace(framework: Any) -> None:
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(span_processors=[SimpleSpanProcessor(exporter)])
    telemetry.install(framework)
    traceparent = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
    try:
        response = await _serve(framework, lambda url: post(
            url, {"content": "traced", "session_id": "t1"},
            headers={"traceparent": traceparent}))
    finally:
        telemetry.uninstall()
    assert response.status == 200, response.body
    spans = exporter.get_finished_spans()
    (server,) = [span for span in spans if span.name == "POST /v1/messages"]
    assert server.kind.name == "SERVER"
    assert server.parent is not None and server.parent.is_remote
    assert format(server.parent.span_id, "016x") == CALLER_SPAN
    assert format(server.context.trace_id, "032x") == CALLER_TRACE
    assert (server.attributes or {})["http.response.status_code"] == 200
    (turn,) = [span for span in spans if span.name == "hookline.turn"]
    assert turn.parent is not None and turn.parent.span_id == server.context.span_id
    assert turn.context.trace_id == server.context.trace_id
    assert (turn.attributes or {})["hookline.session.id"] == "t1"
    assert (turn.attributes or {})["hookline.channel"] == "http"
    chat = next(span for span in spans if span.name.startswith("chat "))
    assert chat.context.trace_id == server.context.trace_id


async def test_without_a_traceparent_the_server_span_starts_a_trace(framework: Any) -> None:
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(span_processors=[SimpleSpanProcessor(exporter)])
    telemetry.install(framework)
    try:
        response = await _serve(framework, lambda url: post(url, {"content": "untraced"}))
    finally:
        telemetry.uninstall()
    assert response.status == 200
    spans = exporter.get_finished_spans()
    (server,) = [span for span in spans if span.name == "POST /v1/messages"]
    assert server.parent is None
    (turn,) = [span for span in spans if span.name == "hookline.turn"]
    assert turn.parent is not None and turn.parent.span_id == server.context.span_id


async def test_metrics_need_the_token_parse_as_prometheus_and_move_with_turns(
        framework: Any) -> None:
    def scenario(url: str) -> dict[str, Any]:
        seen: dict[str, Any] = {
            "no token": call(url, "GET", "/v1/metrics", token=None),
            "wrong token": call(url, "GET", "/v1/metrics", token="x" * 40),
            "before": call(url, "GET", "/v1/metrics"),
        }
        for index in range(2):
            assert post(url, {"content": f"turn {index}", "session_id": "m"}).status == 200
        seen["after"] = call(url, "GET", "/v1/metrics")
        return seen

    seen = await _serve(framework, scenario)
    assert seen["no token"].status == 401
    assert seen["wrong token"].status == 401
    assert b"hookline_turns_total" not in seen["no token"].body
    for key in ("before", "after"):
        assert seen[key].status == 200
        assert seen[key].headers["content-type"].startswith("text/plain; version=0.0.4")
    before = parse_prometheus(seen["before"].body.decode())
    after = parse_prometheus(seen["after"].body.decode())
    ok = ("hookline_turns_total", frozenset({("outcome", "ok")}))
    assert before.get(ok, 0) == 0 and after[ok] == 2
    assert after[("hookline_turn_duration_seconds_count", frozenset())] == 2
    tokens_in = ("hookline_model_tokens_total",
                 frozenset({("model", "offline"), ("direction", "input")}))
    assert after[tokens_in] > before.get(tokens_in, 0)
    assert after[("hookline_active_sessions", frozenset())] == 0
    assert after[("hookline_queued_follow_ups", frozenset())] == 0
    assert after[("hookline_store_commit_seconds_count", frozenset())] == 2


async def test_without_otel_there_is_no_metrics_endpoint(
        framework: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKLINE_OTEL", "false")
    response = await _serve(framework, lambda url: call(url, "GET", "/v1/metrics"))
    assert response.status == 404


class Gate:
    """Holds the first model call of session `q` until the test releases it."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.held = False

    @hookimpl
    async def before_llm_call(self, request: Any, state: Any) -> None:
        if state.get("session_id") == "q" and not self.held:
            self.held = True
            await self.release.wait()


def _wait_for_gauge(url: str, name: str, wanted: float) -> None:
    """Scrape until gauge `name` reads `wanted` (a hang guard, not a timing check)."""
    deadline = time.monotonic() + 30
    while True:
        samples = parse_prometheus(call(url, "GET", "/v1/metrics").body.decode())
        if samples[(name, frozenset())] == wanted:
            return
        assert time.monotonic() < deadline, f"{name} never read {wanted}"
        time.sleep(0.01)


async def test_a_queued_follow_up_is_a_child_of_its_own_request(framework: Any) -> None:
    gate = Gate()
    framework.registry.register(gate, name="gate")
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(span_processors=[SimpleSpanProcessor(exporter)])
    telemetry.install(framework)
    first_trace, second_trace = "a" * 32, "b" * 32

    def scenario(url: str) -> list[Any]:
        def send(trace_id: str, text: str) -> Any:
            return post(url, {"content": text, "session_id": "q"},
                        headers={"traceparent": f"00-{trace_id}-{CALLER_SPAN}-01"})

        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(send, first_trace, "first")
            _wait_for_gauge(url, "hookline_active_sessions", 1)
            second = pool.submit(send, second_trace, "second")
            _wait_for_gauge(url, "hookline_queued_follow_ups", 1)
            anyio.from_thread.run_sync(gate.release.set)
            return [first.result(), second.result()]

    try:
        responses = await _serve(framework, scenario)
    finally:
        telemetry.uninstall()
    assert [response.status for response in responses] == [200, 200]
    assert gate.held
    spans = exporter.get_finished_spans()
    servers = {format(span.context.trace_id, "032x"): span for span in spans
               if span.name == "POST /v1/messages"}
    turns = [span for span in spans if span.name == "hookline.turn"]
    assert len(turns) == 2
    for turn in turns:
        trace_id = format(turn.context.trace_id, "032x")
        assert turn.parent is not None
        assert turn.parent.span_id == servers[trace_id].context.span_id
    assert {format(turn.context.trace_id, "032x") for turn in turns} == {first_trace,
                                                                        second_trace}
