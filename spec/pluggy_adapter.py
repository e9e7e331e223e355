"""An adapter for plain pluggy: another kernel, played through the kernel protocol only.

It imports nothing of hookline (only pluggy and the standard library), declares the hooks
of the dispatch fixtures itself, with the contract's parameters, and walks pluggy the way
the reference's runtime does: ``get_hookimpls()`` reversed, each implementation called
with the arguments it declares, awaitables awaited on the async calls and closed (with
the warning the contract names) on the sync ones, ``notify_error`` as isolated
``on_error`` observers. It offers no framework, so framework fixtures are skipped.
``pluggy_expected.toml`` lists the fixtures pluggy fails, and why.

    hookline-conformance --adapter hookline_conformance.pluggy_adapter:PluggyAdapter \\
        --expected pluggy_expected.toml
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

import pluggy

PROJECT = "spec"
HOOKS = {
    "resolve_session": ("message",),
    "load_state": ("message", "session_id"),
    "save_state": ("session_id", "state", "message", "model_output"),
    "dispatch_outbound": ("message",),
    "provide_model_options": ("session_id", "workspace"),
    "provide_tools": (),
    "provide_channels": ("message_handler",),
    "provide_tape_sidecar": (),
    "provide_tape_store": (),
    "build_tape_context": (),
    "on_error": ("stage", "error", "message"),
}
"""The hooks the dispatch fixtures use, with their parameters in the contract's order."""

_log = logging.getLogger("pluggy_adapter")


def _spec_class() -> type:
    hookspec = pluggy.HookspecMarker(PROJECT)
    namespace: dict[str, Any] = {}
    for name, params in HOOKS.items():
        exec(f"def {name}(self, {', '.join(params)}): pass", namespace)
    return type("Specs", (), {name: hookspec(namespace[name]) for name in HOOKS})


class PluggyAdapter:
    name = "pluggy"
    protocol = 1

    def __init__(self) -> None:
        self.hookimpl = pluggy.HookimplMarker(PROJECT)
        self.specs = _spec_class()

    def supports(self, requirement: str) -> bool:
        return False  # no entry point groups, no Bub

    def mark(self, function: Callable[..., Any], options: dict[str, Any]) -> Callable[..., Any]:
        marked: Callable[..., Any] = self.hookimpl(**options)(function)
        return marked

    def new_kernel(self) -> PluggyKernel:
        manager = pluggy.PluginManager(PROJECT)
        manager.add_hookspecs(self.specs)
        return PluggyKernel(manager)


class PluggyKernel:
    def __init__(self, manager: pluggy.PluginManager) -> None:
        self.pm = manager

    def register(self, plugin: object, name: str) -> None:
        self.pm.register(plugin, name=name)

    def unregister(self, name: str) -> None:
        self.pm.unregister(name=name)

    def plugin_names(self) -> list[str]:
        return [name for name, _ in self.pm.list_name_plugin()]

    def _impls(self, hook: str) -> list[Any]:
        caller = getattr(self.pm.hook, hook, None)
        return list(caller.get_hookimpls()) if caller is not None else []

    def stored_order(self, hook: str) -> list[Callable[..., Any]]:
        return [impl.function for impl in self._impls(hook)]

    def execution_order(self, hook: str) -> list[Callable[..., Any]]:
        return self.stored_order(hook)[::-1]

    def unknown_hooks(self) -> list[dict[str, Any]]:
        return []  # pluggy records none

    def dispatch(self, call: str, hook: str, kwargs: dict[str, Any]) -> Any:
        observe = call.startswith("notify_error")
        if observe:
            hook, kwargs = "on_error", {"message": None, **kwargs}
        impls = self._impls(hook)[::-1]
        first = call.startswith("call_first")

        def run(impl: Any) -> Any:
            # As the reference's runtime: what the call lacks is left out, so Python's own
            # TypeError names the missing argument.
            return impl.function(**{n: kwargs[n] for n in impl.argnames if n in kwargs})

        async def run_async() -> Any:
            results = []
            for impl in impls:
                try:
                    value = run(impl)
                    if inspect.isawaitable(value):
                        value = await value
                except Exception:
                    if not observe:
                        raise
                    _log.warning("hook.on_error_failed stage=%s adapter=%s",
                                 kwargs["stage"], impl.plugin_name)
                    continue
                if first and value is not None:
                    return value
                results.append(value)
            return None if first or observe else results

        if not call.endswith("_sync"):
            return run_async()
        results = []
        for impl in impls:
            try:
                value = run(impl)
            except Exception:
                if not observe:
                    raise
                _log.warning("hook.on_error_failed stage=%s adapter=%s", kwargs["stage"],
                                 impl.plugin_name)
                continue
            if inspect.isawaitable(value):
                _log.warning("hook.async_not_supported hook=%s adapter=%s", hook,
                             impl.plugin_name)
                value.close()
                continue
            if first and value is not None:
                return value
            results.append(value)
        return None if first or observe else results
