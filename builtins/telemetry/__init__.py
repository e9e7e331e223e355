"""OpenTelemetry traces and metrics for hookline (the `otel` setting, `hookline run --trace`).

Nothing here is imported unless telemetry is wanted: with `otel` off the plans stay the
plain ones and no module of OpenTelemetry is loaded (docs/observability.md).

- `metrics`: in-process counters (standard library only) and their Prometheus text;
- `observer`: the kernel's dispatch observer, a span per hook dispatch;
- `agent_spans`: model call and tool call spans from the agent's event bus;
- `active` (standard library only): which frameworks have telemetry installed;
- `scope`: the builtin lifespan inside a telemetry scope, a clear error without the SDK;
- `setup`: providers from the settings and the `OTEL_*` variables, install and uninstall;
- `gateway`: the HTTP server span and `GET /v1/metrics` of the http channel;
- `console`: the span tree printed on stderr by `hookline run --trace`.
"""

from __future__ import annotations

from hookline.kernel._lazy import LazyExports as _LazyExports

_PUBLIC = {
    "active": ("installed",),
    "console": ("ConsoleTrace",),
}
"""Module (relative to this package) -> the public names it defines."""

_exports = _LazyExports(globals(), _PUBLIC)
__getattr__ = _exports.getattr
__dir__ = _exports.dir
