"""hookline.testing: fixtures and helpers for testing hookline plugins with pytest.

The pytest plugin (`hookline.testing.plugin`, activated through the `pytest11` entry
point) defines the fixtures; the helpers are imported from here, each on first use, so
that importing this package (pytest does, in every run) costs nothing. See
docs/testing.md.

The names are written once, in `_PUBLIC`; `__init__.pyi` holds them for type checkers
(`python -m hookline.kernel._generate hookline.testing hookline.builtins` rewrites it).
"""

from __future__ import annotations

from hookline.kernel._lazy import LazyExports as _LazyExports

_PUBLIC = {
    "framework": ("FrameworkFactory", "Script", "build_framework", "builtin_plugin",
                  "scripted_model", "write_script"),
    "trace": ("ErrorCapture", "ErrorReport", "HookTrace", "capture_errors", "trace_hooks"),
    "turns": ("Turn", "run_turn", "run_turn_sync"),
}
"""Module (relative to this package) -> the public names it defines."""

_exports = _LazyExports(globals(), _PUBLIC)
__getattr__ = _exports.getattr
__dir__ = _exports.dir
