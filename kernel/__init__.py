"""hookline.kernel: a hand-rolled plugin kernel for the application-hook contract.

Only the standard library (and ``typing_extensions``) is imported, always through
relative imports, so this folder can be copied into another package and keep working.
"""

from __future__ import annotations

from ._dispatch.errors import PluginValidationError
from ._dispatch.markers import HookimplOpts, HookspecOpts, hookimpl, hookspec
from ._dispatch.registry import HookImpl, Registry, UnknownImpl
from ._dispatch.report import HookBinding, HookReport, ImplInfo
from ._dispatch.runtime import HookRuntime
from ._dispatch.trace import DispatchTrace, TraceRecord
from .agent_hooks import AgentPlugins, PluginAgentHooks
from .events import EventBus
from .framework import Framework
from .hooks import HOOK_SPECS, HooklineSpecs, HookSpec
from .interception import (
    LLMCallDecision,
    LLMCallRequest,
    LLMCallResult,
    ToolCall,
    ToolCallDecision,
    ToolCallResult,
)
from .loading import PluginLoadError, PluginStatus

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
