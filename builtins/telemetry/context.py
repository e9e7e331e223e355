"""Where a channel keeps the caller's W3C trace context on an envelope (standard library only).

A channel that received `traceparent` (and `tracestate`) puts them in the envelope's
context under `TRACE_CONTEXT_KEY`, a private key (its leading underscore keeps it out of
the prompt); with telemetry on, the turn's span continues that trace. The http channel
does so; without telemetry the key is carried and never read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hookline.kernel.envelope import get_field

TRACE_CONTEXT_KEY = "_trace_context"
TRACE_HEADERS = ("traceparent", "tracestate")


def trace_headers(headers: Mapping[str, list[str]]) -> dict[str, str]:
    """The trace context headers of a request (lower-cased names), the first of each."""
    return {name: values[0] for name in TRACE_HEADERS if (values := headers.get(name))}


def trace_carrier(envelope: Any) -> dict[str, str]:
    """The trace context headers an envelope carries, or an empty dict."""
    context = get_field(envelope, "context")
    if not isinstance(context, Mapping):
        return {}
    carried = context.get(TRACE_CONTEXT_KEY)
    if not isinstance(carried, Mapping):
        return {}
    return {name: value for name in TRACE_HEADERS
            if isinstance(value := carried.get(name), str)}
