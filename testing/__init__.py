"""hookline.testing: fixtures and helpers for testing hookline plugins with pytest.

The pytest plugin (`hookline.testing.plugin`, activated through the `pytest11` entry
point) defines the fixtures; the helpers are imported from here, each on first use, so
that importing this package (pytest does, in every run) costs nothing. See
docs/testing.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .framework import (
        FrameworkFactory,
        Script,
        build_framework,
        builtin_plugin,
        scripted_model,
        write_script,
    )
    from .trace import ErrorCapture, ErrorReport, HookTrace, capture_errors, trace_hooks
    from .turns import Turn, run_turn, run_turn_sync

_EXPORTS = {
    "FrameworkFactory": "framework",
    "Script": "framework",
    "build_framework": "framework",
    "builtin_plugin": "framework",
    "scripted_model": "framework",
    "write_script": "framework",
    "ErrorCapture": "trace",
    "ErrorReport": "trace",
    "HookTrace": "trace",
    "capture_errors": "trace",
    "trace_hooks": "trace",
    "Turn": "turns",
    "run_turn": "turns",
    "run_turn_sync": "turns",
}

__all__ = [
    "ErrorCapture",
    "ErrorReport",
    "FrameworkFactory",
    "HookTrace",
    "Script",
    "Turn",
    "build_framework",
    "builtin_plugin",
    "capture_errors",
    "run_turn",
    "run_turn_sync",
    "scripted_model",
    "trace_hooks",
    "write_script",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
