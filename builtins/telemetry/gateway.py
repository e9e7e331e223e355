"""The gateway's share of telemetry: an HTTP server span per request, and `/v1/metrics`.

The server span continues the caller's trace when the request carries a W3C
`traceparent`; the request is then handed on with the server span's own `traceparent`, so
the http channel keeps that one on the envelope and the turn becomes the server span's
child, also when it runs later (a follow-up queued behind a running turn).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from . import active
from .context import TRACE_HEADERS
from .setup import Telemetry, span_context_of

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
METRICS_PATH = "/v1/metrics"
PROMETHEUS_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


def instrument(channel: Any, routes: Iterable[str]) -> None:
    """Give an http channel the server spans and `GET /v1/metrics` of the telemetry
    installed now (the builtin lifespan's); nothing when none is. `routes` are the
    channel's paths, the only ones span names show (they must stay few)."""
    telemetry = active.current()
    if telemetry is None:
        return
    channel.middleware = server_spans(telemetry, frozenset({*routes, METRICS_PATH}))
    channel.routes[METRICS_PATH] = metrics_endpoint(telemetry)


def metrics_endpoint(telemetry: Telemetry) -> Callable[[Any], Awaitable[None]]:
    async def answer(send: Any) -> None:
        body = telemetry.metrics.prometheus().encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", PROMETHEUS_TYPE),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    return answer


def server_spans(telemetry: Telemetry, routes: frozenset[str]) -> Callable[[App], App]:
    """ASGI middleware: each HTTP request inside a `SERVER` span, named after its path
    when it is one of `routes`, else after its method alone."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    propagator = TraceContextTextMapPropagator()
    tracer = telemetry.tracer

    def wrap(app: App) -> App:
        async def traced(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope.get("type") != "http":
                await app(scope, receive, send)
                return
            raw = list(scope.get("headers", ()))
            carrier = {name.decode("latin-1").lower(): value.decode("latin-1")
                       for name, value in raw
                       if name.decode("latin-1").lower() in TRACE_HEADERS}
            parent = propagator.extract(carrier)
            method, path = str(scope.get("method", "")), str(scope.get("path", ""))
            attributes = {"http.request.method": method, "url.path": path,
                          "url.scheme": str(scope.get("scheme", "http")),
                          "network.protocol.version": str(scope.get("http_version", ""))}
            if path in routes:
                attributes["http.route"] = path
            name = f"{method} {path}" if path in routes else method
            with tracer.start_as_current_span(name, context=parent, kind=SpanKind.SERVER,
                                              attributes=attributes) as span:
                kept = [(n, v) for n, v in raw if n.decode("latin-1").lower()
                        not in TRACE_HEADERS]
                own = [(n.encode(), v.encode()) for n, v in span_context_of(span).items()]

                async def send_status(message: dict[str, Any]) -> None:
                    if message.get("type") == "http.response.start":
                        _status(span, int(message.get("status", 0)))
                    await send(message)

                await app({**scope, "headers": kept + own}, receive, send_status)

        return traced

    return wrap


def _status(span: trace.Span, status: int) -> None:
    span.set_attribute("http.response.status_code", status)
    if status >= 500:
        span.set_status(Status(StatusCode.ERROR))
