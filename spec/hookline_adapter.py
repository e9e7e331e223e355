"""The adapter that runs the conformance suite against hookline's kernel.

It takes the kernel as a module so the same suite can run against a vendored copy of
``kernel/`` imported under another package name.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable
from typing import Any


class HooklineAdapter:
    name = "hookline"

    def __init__(self, kernel: types.ModuleType | str = "hookline.kernel") -> None:
        self.kernel = importlib.import_module(kernel) if isinstance(kernel, str) else kernel

    def mark(self, function: Callable[..., Any], options: dict[str, Any]) -> Callable[..., Any]:
        return self.kernel.hookimpl(**options)(function)

    def new_kernel(self) -> HooklineKernel:
        return HooklineKernel(self.kernel)


class HooklineKernel:
    def __init__(self, kernel: types.ModuleType) -> None:
        self.registry = kernel.Registry()
        self.runtime = kernel.HookRuntime(self.registry)

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
            return getattr(self.runtime, call)(**kwargs)
        return getattr(self.runtime, call)(hook, **kwargs)
