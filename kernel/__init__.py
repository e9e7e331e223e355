"""hookline.kernel: a hand-rolled plugin kernel for the application-hook contract.

Only the standard library (and ``typing_extensions``) is imported, always through
relative imports, so this folder can be copied into another package and keep working.
"""

from __future__ import annotations

from .agent_hooks import AgentPlugins, PluginAgentHooks
from .errors import PluginValidationError
from .events import EventBus
from .framework import Framework
from .interception import (
    LLMCallDecision,
    LLMCallRequest,
    LLMCallResult,
    ToolCall,
    ToolCallDecision,
    ToolCallResult,
)
from .loading import PluginLoadError, PluginStatus
from .markers import HookimplOpts, HookspecOpts, hookimpl, hookspec
from .registry import HookImpl, Registry, UnknownImpl
from .report import HookBinding, HookReport, ImplInfo
from .runtime import HookRuntime
from .specs import HOOK_SPECS, HooklineSpecs, HookSpec
from .trace import DispatchTrace, TraceRecord

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
