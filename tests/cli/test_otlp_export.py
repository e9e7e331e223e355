"""End to end: `hookline run` with `otel = true` exports over OTLP/HTTP to a receiver.

The receiver is this test's own HTTP server on 127.0.0.1, reached through the standard
`OTEL_EXPORTER_OTLP_ENDPOINT`; what arrives is decoded with the protobuf classes of
`opentelemetry-proto` (the exporter's own package) and checked span by span.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from terminal_support import clean_env

HOOKLINE = str(Path(sys.executable).parent / "hookline")


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP receiver keeping every decoded export request."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.content_types: set[str] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        self.server.content_types.add(self.headers.get("content-type", ""))
        answer: Any
        if self.path == "/v1/traces":
            self.server.traces.append(ExportTraceServiceRequest.FromString(body))
            answer = ExportTraceServiceResponse()
        elif self.path == "/v1/metrics":
            self.server.metrics.append(ExportMetricsServiceRequest.FromString(body))
            answer = ExportMetricsServiceResponse()
        else:
            self.send_error(404)
            return
        data = answer.SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def value(attribute: Any) -> Any:
    kind = attribute.value.WhichOneof("value")
    found = getattr(attribute.value, kind)
    if kind == "array_value":
        return [getattr(item, item.WhichOneof("value")) for item in found.values]
    return found


def test_a_turn_is_exported_over_otlp_http_and_decodes(tmp_path: Path,
                                                      receiver: Receiver) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = {k: v for k, v in clean_env(tmp_path / "home").items() if not k.startswith("OTEL_")}
    env.update(HOOKLINE_MODEL="offline", HOOKLINE_OTEL="true",
               OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_SERVICE_NAME="otlp-e2e")
    arguments = json.dumps({"path": "out.txt", "content": "exported"})
    done = subprocess.run([HOOKLINE, "run", "--session", "exported",
                           f"/tool fs_write {arguments}"], env=env, cwd=workspace,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert (workspace / "out.txt").read_text() == "exported"
    assert receiver.content_types == {"application/x-protobuf"}

    resources = [rs for request in receiver.traces for rs in request.resource_spans]
    assert resources, "no trace export arrived"
    services = {value(a) for rs in resources for a in rs.resource.attributes
                if a.key == "service.name"}
    assert services == {"otlp-e2e"}
    spans = [span for rs in resources for ss in rs.scope_spans for span in ss.spans]
    by_id = {span.span_id: span for span in spans}
    (turn,) = [span for span in spans if span.name == "hookline.turn"]
    turn_attributes = {a.key: value(a) for a in turn.attributes}
    assert turn_attributes["hookline.turn.outcome"] == "ok"
    assert turn_attributes["hookline.session.id"] == "exported"
    assert turn.parent_span_id == b""
    chats = [span for span in spans if span.name == "chat offline"]
    assert len(chats) == 2
    for chat in chats:
        assert by_id[chat.parent_span_id] is turn
        attributes = {a.key: value(a) for a in chat.attributes}
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.model"] == "offline"
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert "gen_ai.input.messages" not in attributes  # content is off by default
    (tool,) = [span for span in spans if span.name == "execute_tool fs_write"]
    tool_attributes = {a.key: value(a) for a in tool.attributes}
    assert tool_attributes["hookline.tool.outcome"] == "ran"
    assert tool_attributes["gen_ai.tool.call.id"]
    assert by_id[tool.parent_span_id] is turn
    hooks = [span for span in spans if span.name.startswith("hookline.hook ")
             and span.trace_id == turn.trace_id]
    assert {"hookline.hook resolve_session", "hookline.hook build_prompt"} <= {
        span.name for span in hooks}
    assert all(span.parent_span_id in by_id for span in hooks)

    metrics = {metric.name: metric for request in receiver.metrics
               for rm in request.resource_metrics for sm in rm.scope_metrics
               for metric in sm.metrics}
    turns = metrics["hookline.turns"].sum.data_points
    assert [(point.as_int, {a.key: value(a) for a in point.attributes}) for point in turns] \
        == [(1, {"outcome": "ok"})]
    assert "hookline.tool.calls" in metrics and "hookline.model.tokens" in metrics


def test_a_collector_that_is_down_costs_a_bounded_wait_and_one_line(tmp_path: Path) -> None:
    """`otel = true` with the collector stopped: the turn's answer and status are as
    without telemetry; the end waits for the exporters a bounded time (its retries alone
    take 10 s and more, then the SDK's own exit hook waited again) and says what was lost."""
    import socket

    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = {k: v for k, v in clean_env(tmp_path / "home").items() if not k.startswith("OTEL_")}
    env.update(HOOKLINE_MODEL="offline", HOOKLINE_OTEL="true",
               OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}")
    done = subprocess.run([HOOKLINE, "run", "hi"], env=env, cwd=workspace,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("[offline model]")
    assert done.stderr.splitlines()[-1] == (
        "warning: telemetry: the exporters did not finish within 3 s (is the collector at "
        "OTEL_EXPORTER_OTLP_ENDPOINT running?); the spans and metrics they still held are "
        "not exported")
