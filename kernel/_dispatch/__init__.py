# hookline dispatch core 0.1.0 -- MIT licence, Copyright (c) 2026 the hookline authors (LICENSE)
"""The dispatch core: markers, hook specs, the registry, compiled plans and the runtime.

It knows no application: a ``Registry`` holds the hooks its owner declares and accepts
the marks of their project. Standard library only, relative imports only, and nothing
from the package around it, so this folder can be copied alone into another project::

    hookspec = HookspecMarker("acme")
    hookimpl = HookimplMarker("acme")

    class AcmeSpecs:
        @hookspec(kind="many_sync")
        def greet(self, name: str) -> str: ...

    registry = Registry(collect_specs(AcmeSpecs))
    runtime = HookRuntime(registry)

The first line of this file names the release it comes from and its licence, so a copy
says both; the licence text is the LICENSE file at the root of the hookline repository
(and in its wheel), which a copy should carry beside this folder.
"""

from __future__ import annotations

from .entrypoints import load_entry_points
from .errors import PluginValidationError, UnknownHookError
from .impl import DispatchObserver, HookImpl, Rejection, Tracer, UnknownImpl
from .markers import HookimplMarker, HookimplOpts
from .plan import Plan
from .registry import PluginCheck, PluginProblem, Registry, SpecSource
from .report import HookBinding, HookReport, ImplInfo
from .runtime import HookRuntime
from .specs import (
    DISPATCH_KINDS,
    DispatchKind,
    HookSpec,
    HookspecMarker,
    HookspecOpts,
    collect_specs,
)
from .trace import DispatchTrace, TraceRecord

__version__ = "0.1.0"
"""The hookline release this core comes from (a test keeps it equal to pyproject's)."""

__all__ = [
    "DISPATCH_KINDS",
    "DispatchKind",
    "DispatchObserver",
    "DispatchTrace",
    "HookBinding",
    "HookImpl",
    "HookReport",
    "HookRuntime",
    "HookSpec",
    "HookimplMarker",
    "HookimplOpts",
    "HookspecMarker",
    "HookspecOpts",
    "ImplInfo",
    "Plan",
    "PluginCheck",
    "PluginProblem",
    "PluginValidationError",
    "Registry",
    "Rejection",
    "SpecSource",
    "TraceRecord",
    "Tracer",
    "UnknownHookError",
    "UnknownImpl",
    "collect_specs",
    "load_entry_points",
]
