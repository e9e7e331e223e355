"""The in-process counters and their Prometheus text (`telemetry.metrics`), and the same
measurements reaching OpenTelemetry instruments through the SDK's in-memory reader."""

from __future__ import annotations

import math

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from hookline.builtins.telemetry.metrics import DURATION_BUCKETS, Metrics


def lines_of(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name)]


def test_counters_and_labels_render_escaped_and_sorted() -> None:
    metrics = Metrics()
    metrics.tool_call('odd "tool"\\x\nname', "ran")
    metrics.tool_call("fs_read", "denied")
    metrics.tool_call("fs_read", "denied")
    text = metrics.prometheus()
    assert lines_of(text, "hookline_tool_calls_total{") == [
        'hookline_tool_calls_total{outcome="denied",tool="fs_read"} 2',
        'hookline_tool_calls_total{outcome="ran",tool="odd \\"tool\\"\\\\x\\nname"} 1',
    ]
    assert "# TYPE hookline_tool_calls_total counter" in text
    assert metrics.value("hookline_tool_calls_total", tool="fs_read", outcome="denied") == 2


def test_histograms_are_cumulative_with_sum_and_count() -> None:
    metrics = Metrics()
    for seconds in (0.001, 0.02, 0.02, 1000.0):
        metrics.turn("ok", seconds)
    text = metrics.prometheus()
    buckets = lines_of(text, "hookline_turn_duration_seconds_bucket")
    assert len(buckets) == len(DURATION_BUCKETS) + 1
    assert buckets[0] == 'hookline_turn_duration_seconds_bucket{le="0.005"} 1'
    assert buckets[2] == 'hookline_turn_duration_seconds_bucket{le="0.025"} 3'
    assert buckets[-2] == 'hookline_turn_duration_seconds_bucket{le="300.0"} 3'
    assert buckets[-1] == 'hookline_turn_duration_seconds_bucket{le="+Inf"} 4'
    assert lines_of(text, "hookline_turn_duration_seconds_count") == [
        "hookline_turn_duration_seconds_count 4"]
    (total,) = lines_of(text, "hookline_turn_duration_seconds_sum")
    assert math.isclose(float(total.split()[1]), 1000.041)


def test_gauges_read_at_scrape_time_and_a_failing_reader_is_nan() -> None:
    metrics = Metrics()
    queued = [3]
    metrics.gauge("hookline_queued_follow_ups", lambda: queued[0])
    assert "hookline_queued_follow_ups 3" in metrics.prometheus()
    queued[0] = 0
    assert "hookline_queued_follow_ups 0" in metrics.prometheus()

    def broken() -> float:
        raise RuntimeError("manager gone")

    metrics.gauge("hookline_active_sessions", broken)
    assert "hookline_active_sessions NaN" in metrics.prometheus()
    metrics.gauge("hookline_active_sessions", None)
    assert "hookline_active_sessions 0" in metrics.prometheus()


def test_measurements_reach_the_opentelemetry_instruments() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics = Metrics()
    metrics.bind_meter(provider.get_meter("test"))
    metrics.gauge("hookline_active_sessions", lambda: 2)
    metrics.turn("error", 0.5)
    metrics.tokens("openai:gpt-4o", 120, 30)
    metrics.hook_failure("p", "load_state")
    metrics.store_commit(0.01)
    data = reader.get_metrics_data()
    assert data is not None
    found = {metric.name: metric for rm in data.resource_metrics
             for sm in rm.scope_metrics for metric in sm.metrics}
    assert [(p.value, dict(p.attributes or {})) for p in found["hookline.turns"].data.data_points
            ] == [(1, {"outcome": "error"})]
    tokens = {dict(p.attributes or {})["gen_ai.token.type"]: p.value
              for p in found["hookline.model.tokens"].data.data_points}
    assert tokens == {"input": 120, "output": 30}
    assert [p.value for p in found["hookline.sessions.active"].data.data_points] == [2]
    assert found["hookline.store.commit.duration"].data.data_points[0].count == 1
    assert found["hookline.hook.failures"].data.data_points[0].value == 1
    provider.shutdown()
