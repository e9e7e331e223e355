"""The builtin plugin's way in: its lifespan inside a telemetry scope (`otel` on).

Importing this module imports nothing of OpenTelemetry; calling `observed_lifespan` does,
and says how to install it when it is missing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any


def observed_lifespan(lifespan: Any, framework: Any, settings: Any, bus: Any) -> Any:
    """`lifespan` inside a telemetry scope; a clear error when the SDK is missing."""
    try:
        from .setup import observed
    except ImportError as exc:
        from ..config import setting_env

        raise RuntimeError(
            f"the otel setting is on, but OpenTelemetry's SDK is not installed ({exc.name} "
            f"is missing): pip install 'hookline[otel]', or set otel = false "
            f"({setting_env('otel')}=false)") from exc
    found: AsyncIterator[None] = observed(lifespan, framework, settings, bus)
    return found
