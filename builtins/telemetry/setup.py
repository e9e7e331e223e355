"""Telemetry for one framework: providers, exporters from the `OTEL_*` variables, install.

Installing swaps things in, as dispatch tracing does, and uninstalling swaps them back:
the registry's tracer (a span per hook dispatch), the framework's `process_inbound` (the
`hookline.turn` span), the agent bus subscribers (model and tool spans) and the tape's
run commit (its latency). Nothing is checked on the paths it does not replace.

The SDK reads the standard variables itself: `OTEL_SERVICE_NAME` and
`OTEL_RESOURCE_ATTRIBUTES` (the resource; `service.name` is `hookline` otherwise),
`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_HEADERS` and their per-signal forms (the
OTLP/HTTP exporters), `OTEL_BSP_*` (the batch processor), `OTEL_METRIC_EXPORT_INTERVAL`
(the metric reader) and `OTEL_SDK_DISABLED`. `OTEL_TRACES_EXPORTER` and
`OTEL_METRICS_EXPORTER` choose `otlp` (the default), `console` or `none`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from hookline.kernel.envelope import get_field

from ..tape.fork import COMMIT_OBSERVER
from . import active
from .agent_spans import RUN_FAILURES, AgentSpans
from .context import trace_carrier
from .metrics import Metrics
from .observer import SpanObserver

EXPORTER_CHOICES = ("otlp", "console", "none")

EXPORT_WAIT = 3.0
"""Seconds a scope's end waits for the exporters to hand over what is pending: a command
must not stall on a collector that is down (the OTLP exporter retries for 10 s and more)."""

logger = logging.getLogger(__name__)
_propagator = TraceContextTextMapPropagator()


class TelemetryError(ValueError):
    """A telemetry variable holds a value that cannot be used."""


def resource() -> Resource:
    """The resource of the `OTEL_*` variables, named `hookline` unless they name it."""
    found = Resource.create()
    if str(found.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        found = found.merge(Resource({SERVICE_NAME: "hookline"}))
    return found


def exporter_choice(variable: str, environ: Any = None) -> str:
    env = os.environ if environ is None else environ
    value = env.get(variable, "otlp").strip().lower() or "otlp"
    if value not in EXPORTER_CHOICES:
        raise TelemetryError(
            f"{variable}={value!r} is not an exporter hookline knows; use one of "
            f"{', '.join(EXPORTER_CHOICES)} (otlp sends to OTEL_EXPORTER_OTLP_ENDPOINT)")
    return value


def env_span_processors() -> list[SpanProcessor]:
    """The span exporter `OTEL_TRACES_EXPORTER` names, behind a batch processor."""
    choice = exporter_choice("OTEL_TRACES_EXPORTER")
    if choice == "none":
        return []
    if choice == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return [BatchSpanProcessor(ConsoleSpanExporter())]
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return [BatchSpanProcessor(OTLPSpanExporter())]


def env_metric_readers() -> list[MetricReader]:
    """The metric exporter `OTEL_METRICS_EXPORTER` names, read periodically."""
    choice = exporter_choice("OTEL_METRICS_EXPORTER")
    if choice == "none":
        return []
    if choice == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return [PeriodicExportingMetricReader(ConsoleMetricExporter())]
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return [PeriodicExportingMetricReader(OTLPMetricExporter())]


class Telemetry:
    """The tracer and meter of one framework, with what they are installed into."""

    def __init__(self, *, capture_content: bool = False,
                 span_processors: list[SpanProcessor] | None = None,
                 metric_readers: list[MetricReader] | None = None) -> None:
        found = resource()
        # Shut down by `shutdown`, bounded: the SDK's own at exit would wait for an
        # unreachable collector (its retries) once more.
        self.provider = TracerProvider(resource=found, shutdown_on_exit=False)
        for processor in span_processors or ():
            self.provider.add_span_processor(processor)
        self.meter_provider = MeterProvider(resource=found, shutdown_on_exit=False,
                                            metric_readers=list(metric_readers or ()))
        self.metrics = Metrics()
        self.metrics.bind_meter(self.meter_provider.get_meter("hookline"))
        self.tracer = self.provider.get_tracer("hookline")
        self.observer = SpanObserver(self.tracer, self.metrics)
        self.agent_spans = AgentSpans(self.tracer, self.metrics, capture_content)
        self._framework: Any = None
        self._previous_tracer: Any = None
        self._buses: list[Any] = []

    def add_span_processor(self, processor: SpanProcessor) -> None:
        self.provider.add_span_processor(processor)

    # -- install ---------------------------------------------------------------------

    def install(self, framework: Any) -> None:
        """Swap the instrumented parts into `framework` (once; a second install refuses)."""
        if active.installed(framework) is not None:
            raise RuntimeError("telemetry is already installed on this framework")
        self._framework = framework
        self._previous_tracer = framework.registry.tracer
        framework.registry.set_tracer(self.observer)
        plain = framework.process_inbound
        framework.process_inbound = self._traced_turns(plain)
        self.metrics.gauge("hookline_active_sessions", lambda: _router_count(framework, "active"))
        self.metrics.gauge("hookline_queued_follow_ups",
                           lambda: _router_count(framework, "queued"))
        active.remember(framework, self)

    def watch(self, bus: Any) -> None:
        """Spans for the model and tool calls of the agent that runs on `bus`."""
        if bus not in self._buses:
            self.agent_spans.attach(bus)
            self._buses.append(bus)

    def uninstall(self) -> None:
        framework = self._framework
        if framework is None:
            return
        for bus in self._buses:
            self.agent_spans.detach(bus)
        self._buses.clear()
        framework.__dict__.pop("process_inbound", None)
        framework.registry.set_tracer(self._previous_tracer)
        self.metrics.gauge("hookline_active_sessions", None)
        self.metrics.gauge("hookline_queued_follow_ups", None)
        active.forget(framework, self)
        self._framework = None

    def shutdown(self, timeout: float = EXPORT_WAIT) -> bool:
        """Export what is pending and stop the exporters, waiting at most `timeout`
        seconds (blocking: call from a thread); False when the exporters had not finished
        by then (a collector out of reach), and what they held is given up."""
        done = threading.Event()

        def stop() -> None:
            try:
                self.provider.shutdown()
                self.meter_provider.shutdown()
            finally:
                done.set()

        threading.Thread(target=stop, name="hookline telemetry shutdown", daemon=True).start()
        return done.wait(timeout)

    # -- the turn span ---------------------------------------------------------------

    @asynccontextmanager
    async def _timed_commit(self) -> AsyncIterator[None]:
        """A run's commit to the tape store, as a span and in the commit latency metric."""
        started = time.perf_counter()
        with self.tracer.start_as_current_span("hookline.store.commit"):
            try:
                yield
            finally:
                self.metrics.store_commit(time.perf_counter() - started)

    def _traced_turns(self, plain: Callable[..., Any]) -> Callable[..., Any]:
        tracer, metrics = self.tracer, self.metrics

        async def process_inbound(inbound: Any, stream_output: bool = False) -> Any:
            carrier = trace_carrier(inbound)
            parent = _propagator.extract(carrier) if carrier else None
            channel = get_field(inbound, "channel")
            started = time.perf_counter()
            outcome, session_id = "ok", None
            with tracer.start_as_current_span(
                    "hookline.turn", context=parent, record_exception=False,
                    set_status_on_exception=False,
                    attributes={"hookline.channel": str(channel or "")}) as span:
                observing = COMMIT_OBSERVER.set(self._timed_commit)
                failures: list[str] = []
                collecting = RUN_FAILURES.set(failures)
                try:
                    result = await plain(inbound, stream_output=stream_output)
                    session_id = getattr(result, "session_id", None)
                    failure = failures[-1] if failures else _error_reply(result)
                    if failure is not None:  # the pipeline answered with its error
                        outcome = "error"
                        span.set_status(Status(StatusCode.ERROR, failure))
                    return result
                except Exception as exc:
                    outcome = "error"
                    span.record_exception(exc)
                    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                    raise
                except BaseException:
                    outcome = "cancelled"
                    span.set_status(Status(StatusCode.ERROR, "cancelled"))
                    raise
                finally:
                    if session_id is None:  # failed: the id the pipeline set, if it got there
                        session_id = get_field(inbound, "session_id")
                    if session_id is not None:
                        span.set_attribute("hookline.session.id", str(session_id))
                        span.set_attribute("gen_ai.conversation.id", str(session_id))
                    span.set_attribute("hookline.turn.outcome", outcome)
                    metrics.turn(outcome, time.perf_counter() - started)
                    COMMIT_OBSERVER.reset(observing)
                    RUN_FAILURES.reset(collecting)

        return process_inbound


def _error_reply(result: Any) -> str | None:
    """The error a turn answered with, from its error outbound (a failure outside the
    agent's runs, which the pipeline also answers rather than raises); None for none."""
    for outbound in getattr(result, "outbounds", None) or []:
        if get_field(outbound, "kind") == "error":
            return str(get_field(outbound, "content") or "the turn failed")
    return None


def _router_count(framework: Any, what: str) -> int:
    """Sessions with a running turn, or messages queued behind one, from the channel
    manager while it is the framework's router (0 for any other router)."""
    router = framework.router
    busy = getattr(router, "busy_sessions", None)
    if busy is None:
        return 0
    sessions = busy()
    if what == "active":
        return len(sessions)
    return sum(router.snapshot(session_id).pending_count for session_id in sessions)


def from_settings(settings: Any) -> Telemetry:
    """Telemetry with the exporters the `OTEL_*` variables choose."""
    return Telemetry(capture_content=bool(settings.otel_capture_content),
                     span_processors=env_span_processors(),
                     metric_readers=env_metric_readers())


@asynccontextmanager
async def telemetry_scope(framework: Any, settings: Any, bus: Any) -> AsyncIterator[Any]:
    """Telemetry while the framework's scope runs: the `otel` setting's (exporters from the
    variables), or the one `hookline run --trace` installed, to which the exporters are
    added when `otel` is on too. Pending spans are exported when the scope ends."""
    import anyio

    present = active.installed(framework)
    if present is not None:
        if settings.otel:
            for processor in env_span_processors():
                present.add_span_processor(processor)
        present.watch(bus)
        yield present
        return
    telemetry = from_settings(settings)
    telemetry.install(framework)
    telemetry.watch(bus)
    try:
        yield telemetry
    finally:
        telemetry.uninstall()
        with anyio.CancelScope(shield=True):
            if not await anyio.to_thread.run_sync(telemetry.shutdown):
                logger.warning(
                    "telemetry: the exporters did not finish within %g s (is the collector "
                    "at OTEL_EXPORTER_OTLP_ENDPOINT running?); the spans and metrics they "
                    "still held are not exported", EXPORT_WAIT)


def span_context_of(span: trace.Span) -> dict[str, str]:
    """The W3C headers that make a span the parent of what a callee does."""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=trace.set_span_in_context(span))
    return carrier


async def observed(lifespan: Any, framework: Any, settings: Any, bus: Any) -> AsyncIterator[None]:
    """The builtin plugin's lifespan generator inside a telemetry scope (`provide_lifespan`)."""
    async with telemetry_scope(framework, settings, bus), \
            asynccontextmanager(lambda: lifespan)():
        yield
