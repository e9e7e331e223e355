"""In-process counters of turns, tokens, tools, hook failures and store commits.

Kept with the standard library alone, so `GET /v1/metrics` renders Prometheus text from
them whatever is installed; when an OpenTelemetry meter is bound (`bind_meter`), every
measurement goes to its instruments too, for an OTLP collector.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from typing import Any

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                    60.0, 120.0, 300.0)
"""Upper bounds (seconds) of the histograms' buckets: from a store commit to a long turn."""

Labels = tuple[tuple[str, str], ...]
GaugeReader = Callable[[], float]

_HELP = {
    "hookline_turns_total": ("counter", "Turns run, by outcome (ok, error, cancelled)."),
    "hookline_turn_duration_seconds": ("histogram", "Wall time of a turn."),
    "hookline_model_tokens_total": ("counter",
                                    "Model tokens by model and direction (input, output)."),
    "hookline_tool_calls_total": ("counter",
                                  "Tool calls by tool and outcome (ran, replaced, denied, "
                                  "failed)."),
    "hookline_hook_failures_total": ("counter", "Hook implementations that raised, by plugin "
                                                "and hook."),
    "hookline_store_commit_seconds": ("histogram", "Time to commit a run to the tape store."),
    "hookline_queued_follow_ups": ("gauge", "Messages waiting behind a running turn."),
    "hookline_active_sessions": ("gauge", "Sessions with a running turn."),
}
"""Every metric the endpoint serves: its type and help line (docs/observability.md)."""


class _Histogram:
    def __init__(self) -> None:
        self.counts = [0] * (len(DURATION_BUCKETS) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        index = next((i for i, bound in enumerate(DURATION_BUCKETS) if value <= bound),
                     len(DURATION_BUCKETS))
        self.counts[index] += 1
        self.sum += value


class Metrics:
    """The counters one telemetry installation keeps (thread-safe: tools run in threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[Labels, float]] = {}
        self._histograms: dict[str, dict[Labels, _Histogram]] = {}
        self._gauges: dict[str, GaugeReader] = {}
        self._otel: dict[str, Any] = {}

    # -- measurements ----------------------------------------------------------------

    def turn(self, outcome: str, seconds: float) -> None:
        self._add("hookline_turns_total", 1, outcome=outcome)
        self._observe("hookline_turn_duration_seconds", seconds)
        self._mirror("turns", 1, {"outcome": outcome})
        self._mirror("turn_duration", seconds, {"outcome": outcome})

    def tokens(self, model: str, input_tokens: int, output_tokens: int) -> None:
        for direction, count in (("input", input_tokens), ("output", output_tokens)):
            self._add("hookline_model_tokens_total", count, model=model, direction=direction)
            self._mirror("tokens", count, {"gen_ai.request.model": model,
                                           "gen_ai.token.type": direction})

    def tool_call(self, tool: str, outcome: str) -> None:
        self._add("hookline_tool_calls_total", 1, tool=tool, outcome=outcome)
        self._mirror("tool_calls", 1, {"gen_ai.tool.name": tool, "outcome": outcome})

    def hook_failure(self, plugin: str, hook: str) -> None:
        self._add("hookline_hook_failures_total", 1, plugin=plugin, hook=hook)
        self._mirror("hook_failures", 1, {"plugin": plugin, "hook": hook})

    def store_commit(self, seconds: float) -> None:
        self._observe("hookline_store_commit_seconds", seconds)
        self._mirror("store_commit", seconds, {})

    def gauge(self, name: str, reader: GaugeReader | None) -> None:
        """Read `name` (one of the two gauges) from `reader` at each scrape; None drops it."""
        if reader is None:
            self._gauges.pop(name, None)
        else:
            self._gauges[name] = reader

    def read_gauge(self, name: str) -> float:
        reader = self._gauges.get(name)
        if reader is None:
            return 0.0
        try:
            return float(reader())
        except Exception:  # a scrape never fails because a gauge could not be read
            return math.nan

    def value(self, name: str, **labels: str) -> float:
        """One counter's value (0 when never counted): for tests and the docs' examples."""
        with self._lock:
            return self._counters.get(name, {}).get(_labels(labels), 0.0)

    # -- OpenTelemetry ---------------------------------------------------------------

    def bind_meter(self, meter: Any) -> None:
        """Send every later measurement to `meter`'s instruments as well."""
        self._otel = {
            "turns": meter.create_counter("hookline.turns", unit="{turn}",
                                          description="Turns run, by outcome."),
            "turn_duration": meter.create_histogram("hookline.turn.duration", unit="s",
                                                    description="Wall time of a turn."),
            "tokens": meter.create_counter("hookline.model.tokens", unit="{token}",
                                           description="Model tokens by model and type."),
            "tool_calls": meter.create_counter("hookline.tool.calls", unit="{call}",
                                               description="Tool calls by tool and outcome."),
            "hook_failures": meter.create_counter(
                "hookline.hook.failures", unit="{failure}",
                description="Hook implementations that raised, by plugin and hook."),
            "store_commit": meter.create_histogram(
                "hookline.store.commit.duration", unit="s",
                description="Time to commit a run to the tape store."),
        }
        for name, otel_name in (("hookline_queued_follow_ups", "hookline.follow_ups.queued"),
                                ("hookline_active_sessions", "hookline.sessions.active")):
            meter.create_observable_gauge(otel_name, callbacks=[self._observer(name)],
                                          description=_HELP[name][1])

    def _observer(self, name: str) -> Callable[[Any], Iterable[Any]]:
        def observe(options: Any) -> Iterable[Any]:
            from opentelemetry.metrics import Observation

            if name in self._gauges:
                yield Observation(self.read_gauge(name))

        return observe

    def _mirror(self, instrument: str, value: float, attributes: dict[str, str]) -> None:
        target = self._otel.get(instrument)
        if target is None:
            return
        if hasattr(target, "add"):
            target.add(value, attributes)
        else:
            target.record(value, attributes)

    # -- storage and text ------------------------------------------------------------

    def _add(self, name: str, amount: float, **labels: str) -> None:
        key = _labels(labels)
        with self._lock:
            series = self._counters.setdefault(name, {})
            series[key] = series.get(key, 0.0) + amount

    def _observe(self, name: str, value: float, **labels: str) -> None:
        key = _labels(labels)
        with self._lock:
            self._histograms.setdefault(name, {}).setdefault(key, _Histogram()).observe(value)

    def prometheus(self) -> str:
        """Every metric in the Prometheus text exposition format (version 0.0.4)."""
        lines: list[str] = []
        with self._lock:
            counters = {name: dict(series) for name, series in self._counters.items()}
            histograms = {name: {key: (list(h.counts), h.sum) for key, h in series.items()}
                          for name, series in self._histograms.items()}
        for name, (kind, about) in _HELP.items():
            lines += [f"# HELP {name} {about}", f"# TYPE {name} {kind}"]
            if kind == "counter":
                for key, count in sorted(counters.get(name, {}).items()):
                    lines.append(f"{name}{_render(key)} {_number(count)}")
            elif kind == "histogram":
                for key, (counts, total) in sorted(histograms.get(name, {}).items()):
                    lines += _histogram_lines(name, key, counts, total)
            else:
                lines.append(f"{name} {_number(self.read_gauge(name))}")
        return "\n".join(lines) + "\n"


def _histogram_lines(name: str, key: Labels, counts: list[int], total: float) -> list[str]:
    lines, running = [], 0
    for bound, count in zip((*DURATION_BUCKETS, math.inf), counts, strict=True):
        running += count
        le = "+Inf" if bound == math.inf else repr(bound)
        lines.append(f"{name}_bucket{_render((*key, ('le', le)))} {running}")
    lines.append(f"{name}_sum{_render(key)} {_number(total)}")
    lines.append(f"{name}_count{_render(key)} {running}")
    return lines


def _labels(labels: dict[str, str]) -> Labels:
    return tuple(sorted((key, str(value)) for key, value in labels.items()))


def _render(key: Labels) -> str:
    if not key:
        return ""
    parts = ",".join(f'{name}="{_escape(value)}"' for name, value in key)
    return "{" + parts + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return str(int(value)) if float(value).is_integer() else repr(float(value))
