"""hookline.kernel: a hand-rolled plugin kernel for the application-hook contract.

Only the standard library (and ``typing_extensions``) is imported, always through
relative imports, so this folder can be copied into another package and keep working.

The layers, bottom up: ``_dispatch`` (the dispatch core, which knows no application),
the contract modules (``hooks``, the 27 hook specs, and the types hooks exchange), the
framework. Names are imported on first use, so ``import hookline.kernel._dispatch`` (or a
plugin's ``from hookline.kernel import hookimpl``) does not load the whole framework.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._dispatch import (
        DispatchTrace,
        HookBinding,
        HookImpl,
        HookimplOpts,
        HookReport,
        HookSpec,
        HookspecOpts,
        ImplInfo,
        PluginValidationError,
        Registry,
        TraceRecord,
        UnknownImpl,
    )
    from .agent_hooks import AgentPlugins, PluginAgentHooks
    from .events import EventBus
    from .framework import Framework
    from .hooks import HOOK_SPECS, HooklineSpecs, HookRuntime, hookimpl, hookspec
    from .interception import (
        LLMCallDecision,
        LLMCallRequest,
        LLMCallResult,
        ToolCall,
        ToolCallDecision,
        ToolCallResult,
    )
    from .loading import PluginLoadError, PluginStatus

_EXPORTS = {
    "HOOK_SPECS": "hooks",
    "AgentPlugins": "agent_hooks",
    "DispatchTrace": "_dispatch",
    "EventBus": "events",
    "Framework": "framework",
    "HookBinding": "_dispatch",
    "HookImpl": "_dispatch",
    "HookReport": "_dispatch",
    "HookRuntime": "hooks",
    "HookSpec": "_dispatch",
    "HookimplOpts": "_dispatch",
    "HooklineSpecs": "hooks",
    "HookspecOpts": "_dispatch",
    "ImplInfo": "_dispatch",
    "LLMCallDecision": "interception",
    "LLMCallRequest": "interception",
    "LLMCallResult": "interception",
    "PluginAgentHooks": "agent_hooks",
    "PluginLoadError": "loading",
    "PluginStatus": "loading",
    "PluginValidationError": "_dispatch",
    "Registry": "_dispatch",
    "ToolCall": "interception",
    "ToolCallDecision": "interception",
    "ToolCallResult": "interception",
    "TraceRecord": "_dispatch",
    "UnknownImpl": "_dispatch",
    "hookimpl": "hooks",
    "hookspec": "hooks",
}
"""Public name -> the module (relative to this package) that defines it."""

__all__ = [
    "HOOK_SPECS",
    "AgentPlugins",
    "DispatchTrace",
    "EventBus",
    "Framework",
    "HookBinding",
    "HookImpl",
    "HookReport",
    "HookRuntime",
    "HookSpec",
    "HookimplOpts",
    "HooklineSpecs",
    "HookspecOpts",
    "ImplInfo",
    "LLMCallDecision",
    "LLMCallRequest",
    "LLMCallResult",
    "PluginAgentHooks",
    "PluginLoadError",
    "PluginStatus",
    "PluginValidationError",
    "Registry",
    "ToolCall",
    "ToolCallDecision",
    "ToolCallResult",
    "TraceRecord",
    "UnknownImpl",
    "hookimpl",
    "hookspec",
]


def __getattr__(name: str) -> object:
    """Import a public name (or a submodule) on first use, then keep it here."""
    import importlib

    module_name = _EXPORTS.get(name)
    if module_name is not None:
        value = getattr(importlib.import_module(f".{module_name}", __name__), name)
    elif not name.startswith("__"):
        try:
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
