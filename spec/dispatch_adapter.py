"""An adapter that runs the dispatch fixtures against the dispatch core alone.

The core (``hookline.kernel._dispatch``, or a copy of that folder under another name)
knows no hooks: this adapter is a small application on it. It declares, with the core's
own markers and under its own project name, the hooks the fixtures of
``fixtures/dispatch`` use, with the agent contract's parameters, and dispatches
``notify_error`` as the isolated observer call ``notify("on_error", ...)``.

    python -m hookline_conformance --area dispatch \
        --adapter hookline_conformance.dispatch_adapter:DispatchAdapter

It imports nothing but the standard library and the core, so a vendored core runs the
suite with nine files of this folder and the dispatch fixtures: ``__init__.py``,
``__main__.py``, ``runner.py``, ``suite.py`` (its command line), ``fixture_values.py``,
``fixture_plugins.py``, ``framework_steps.py`` and ``logmatch.py`` (the runner imports
them) and this one.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable
from typing import Any

PROJECT = "spec"
"""The project the adapter's hooks and marks belong to (attributes ``spec_impl``...)."""


def declare_hooks(core: types.ModuleType) -> type:
    """The hooks of the dispatch fixtures, as a spec class marked with ``core``'s marker."""
    hookspec = core.HookspecMarker(PROJECT)

    class DispatchFixtureHooks:
        @hookspec(kind="first")
        def resolve_session(self, message: Any) -> str | None:
            """Resolve the session id of an inbound envelope."""

        @hookspec(kind="many")
        def load_state(self, message: Any, session_id: str) -> dict[str, Any] | None:
            """Contribute a state fragment."""

        @hookspec(kind="many")
        def save_state(self, session_id: str, state: dict[str, Any], message: Any,
                       model_output: str) -> None:
            """Persist turn state."""

        @hookspec(kind="many")
        def dispatch_outbound(self, message: Any) -> bool | None:
            """Deliver one outbound envelope."""

        @hookspec(kind="many")
        def provide_model_options(self, session_id: str, workspace: Any) -> Any:
            """Offer model choices for a session."""

        @hookspec(kind="many_sync")
        def provide_tools(self) -> list[Any] | None:
            """Provide tools."""

        @hookspec(kind="many_sync")
        def provide_channels(self, message_handler: Any) -> list[Any] | None:
            """Provide channels."""

        @hookspec(kind="many_sync")
        def provide_tape_sidecar(self) -> Any:
            """Provide a named sidecar tape."""

        @hookspec(kind="first_sync")
        def provide_tape_store(self) -> Any:
            """Provide the tape store."""

        @hookspec(kind="first_sync")
        def build_tape_context(self) -> Any:
            """Choose how tape entries become model context."""

        @hookspec(kind="many")
        def on_error(self, stage: str, error: Exception, message: Any) -> None:
            """Observe a failure; observers are isolated."""

    return DispatchFixtureHooks


class DispatchAdapter:
    name = "dispatch-core"
    protocol = 1

    def __init__(self, core: types.ModuleType | str = "hookline.kernel._dispatch") -> None:
        self.core = importlib.import_module(core) if isinstance(core, str) else core
        self.hookimpl = self.core.HookimplMarker(PROJECT)
        self.specs = self.core.collect_specs(declare_hooks(self.core), PROJECT)

    def mark(self, function: Callable[..., Any], options: dict[str, Any]) -> Callable[..., Any]:
        marked: Callable[..., Any] = self.hookimpl(**options)(function)
        return marked

    def new_kernel(self) -> DispatchKernel:
        registry = self.core.Registry(self.specs)
        return DispatchKernel(registry, self.core.HookRuntime(registry))


class DispatchKernel:
    """The kernel protocol over the core; ``notify_error*`` become ``notify*`` calls."""

    def __init__(self, registry: Any, runtime: Any) -> None:
        self.registry = registry
        self.runtime = runtime

    def register(self, plugin: object, name: str) -> None:
        self.registry.register(plugin, name=name)

    def unregister(self, name: str) -> None:
        self.registry.unregister(name)

    def plugin_names(self) -> list[str]:
        return [name for name, _ in self.registry.list_name_plugin()]

    def execution_order(self, hook: str) -> list[Callable[..., Any]]:
        return [impl.function for impl in self.registry.hook_impls(hook)]

    def stored_order(self, hook: str) -> list[Callable[..., Any]]:
        return [impl.function for impl in self.registry.stored_impls(hook)]

    def unknown_hooks(self) -> list[dict[str, Any]]:
        return [
            {"plugin": u.plugin_name, "hook": u.hook_name, "suggestion": u.suggestion or ""}
            for u in self.registry.unknown_impls
        ]

    def dispatch(self, call: str, hook: str, kwargs: dict[str, Any]) -> Any:
        if call.startswith("notify_error"):
            primitive = getattr(self.runtime, call.replace("_error", "", 1))
            arguments = {"message": None, **kwargs}
            return primitive("on_error", f"stage={arguments['stage']}", **arguments)
        return getattr(self.runtime, call)(hook, **kwargs)
