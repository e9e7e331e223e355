"""Which frameworks have telemetry installed (standard library only: asked with `otel` off).

The builtin plugin's lifespan asks `installed(framework)` to learn whether `hookline run
--trace` installed telemetry before the scope began; the http channel asks `current()`
for the metrics it serves. Neither question imports OpenTelemetry.
"""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["installed"]

_installed: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_order: list[Any] = []


def installed(framework: Any) -> Any:
    """The `Telemetry` installed on `framework`, or None."""
    return _installed.get(framework)


def current() -> Any:
    """The most recently installed `Telemetry` still installed, or None."""
    return _order[-1] if _order else None


def remember(framework: Any, telemetry: Any) -> None:
    _installed[framework] = telemetry
    _order.append(telemetry)


def forget(framework: Any, telemetry: Any) -> None:
    if _installed.get(framework) is telemetry:
        del _installed[framework]
    if telemetry in _order:
        _order.remove(telemetry)

