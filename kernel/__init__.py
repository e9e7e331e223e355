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
        PluginCheck,
        PluginProblem,
        PluginValidationError,
        Registry,
        TraceRecord,
        UnknownImpl,
    )
    from .agent_hooks import AgentPlugins, PluginAgentHooks
    from .channels import (
        AdmissionRouter,
        AdmitAction,
        AdmitDecision,
        AdmitOutcome,
        Channel,
        ChannelRouter,
        Interface,
        Lifecycle,
        MessageHandler,
        SteeringInbox,
        StopEvent,
        TurnSnapshot,
    )
    from .envcache import EnvironmentCache
    from .envelope import ChannelMessage, Envelope, MediaItem, MediaType
    from .environment import ByteReader, CodeFailed, Environment, Process, StrPath
    from .events import (
        AgentEvent,
        ChatFinished,
        CommandFinished,
        EventBus,
        EventHandler,
        RunFinished,
        RunStarted,
        StepFinished,
        StepStarted,
        TapeEvent,
        ToolCallFinished,
        ToolCallStarted,
    )
    from .framework import Framework
    from .hooks import HOOK_SPECS, HooklineSpecs, HookRuntime, hookimpl, hookspec
    from .interception import (
        LLMCallDecision,
        LLMCallRequest,
        LLMCallResult,
        ToolCall,
        ToolCallAction,
        ToolCallDecision,
        ToolCallResult,
    )
    from .loading import PluginLoadError, PluginStatus
    from .models import ModelChoice, ModelOptions
    from .prompt import LegacyPrompt, MediaContent, UserContent
    from .streaming import (
        AsyncStreamEvents,
        ErrorKind,
        HooklineError,
        StreamEvent,
        StreamState,
        TextAnswerStream,
    )
    from .tape import (
        AsyncBatchTapeStore,
        AsyncTapeStore,
        BatchTapeStore,
        TapeContext,
        TapeEntry,
        TapeQuery,
        TapeSidecar,
        TapeStore,
    )
    from .tools import EventEmitter, Tool, ToolContext, ToolExposure
    from .turn import TurnResult, TurnState

_EXPORTS = {
    "HOOK_SPECS": "hooks",
    "AdmissionRouter": "channels",
    "AdmitAction": "channels",
    "AdmitDecision": "channels",
    "AdmitOutcome": "channels",
    "AgentEvent": "events",
    "AgentPlugins": "agent_hooks",
    "AsyncBatchTapeStore": "tape",
    "AsyncStreamEvents": "streaming",
    "AsyncTapeStore": "tape",
    "BatchTapeStore": "tape",
    "ByteReader": "environment",
    "Channel": "channels",
    "ChannelMessage": "envelope",
    "ChannelRouter": "channels",
    "ChatFinished": "events",
    "CodeFailed": "environment",
    "CommandFinished": "events",
    "DispatchTrace": "_dispatch",
    "Envelope": "envelope",
    "Environment": "environment",
    "EnvironmentCache": "envcache",
    "ErrorKind": "streaming",
    "EventBus": "events",
    "EventEmitter": "tools",
    "EventHandler": "events",
    "Framework": "framework",
    "HookBinding": "_dispatch",
    "HookImpl": "_dispatch",
    "HookReport": "_dispatch",
    "HookRuntime": "hooks",
    "HookSpec": "_dispatch",
    "HookimplOpts": "_dispatch",
    "HooklineError": "streaming",
    "HooklineSpecs": "hooks",
    "HookspecOpts": "_dispatch",
    "ImplInfo": "_dispatch",
    "Interface": "channels",
    "LLMCallDecision": "interception",
    "LLMCallRequest": "interception",
    "LLMCallResult": "interception",
    "LegacyPrompt": "prompt",
    "Lifecycle": "channels",
    "MediaContent": "prompt",
    "MediaItem": "envelope",
    "MediaType": "envelope",
    "MessageHandler": "channels",
    "ModelChoice": "models",
    "ModelOptions": "models",
    "PluginAgentHooks": "agent_hooks",
    "PluginCheck": "_dispatch",
    "PluginLoadError": "loading",
    "PluginProblem": "_dispatch",
    "PluginStatus": "loading",
    "PluginValidationError": "_dispatch",
    "Process": "environment",
    "Registry": "_dispatch",
    "RunFinished": "events",
    "RunStarted": "events",
    "SteeringInbox": "channels",
    "StepFinished": "events",
    "StepStarted": "events",
    "StopEvent": "channels",
    "StrPath": "environment",
    "StreamEvent": "streaming",
    "StreamState": "streaming",
    "TapeContext": "tape",
    "TapeEntry": "tape",
    "TapeEvent": "events",
    "TapeQuery": "tape",
    "TapeSidecar": "tape",
    "TapeStore": "tape",
    "TextAnswerStream": "streaming",
    "Tool": "tools",
    "ToolCall": "interception",
    "ToolCallAction": "interception",
    "ToolCallDecision": "interception",
    "ToolCallFinished": "events",
    "ToolCallResult": "interception",
    "ToolCallStarted": "events",
    "ToolContext": "tools",
    "ToolExposure": "tools",
    "TraceRecord": "_dispatch",
    "TurnResult": "turn",
    "TurnSnapshot": "channels",
    "TurnState": "turn",
    "UnknownImpl": "_dispatch",
    "UserContent": "prompt",
    "hookimpl": "hooks",
    "hookspec": "hooks",
}
"""Public name -> the module (relative to this package) that defines it."""

__all__ = [
    "HOOK_SPECS",
    "AdmissionRouter",
    "AdmitAction",
    "AdmitDecision",
    "AdmitOutcome",
    "AgentEvent",
    "AgentPlugins",
    "AsyncBatchTapeStore",
    "AsyncStreamEvents",
    "AsyncTapeStore",
    "BatchTapeStore",
    "ByteReader",
    "Channel",
    "ChannelMessage",
    "ChannelRouter",
    "ChatFinished",
    "CodeFailed",
    "CommandFinished",
    "DispatchTrace",
    "Envelope",
    "Environment",
    "EnvironmentCache",
    "ErrorKind",
    "EventBus",
    "EventEmitter",
    "EventHandler",
    "Framework",
    "HookBinding",
    "HookImpl",
    "HookReport",
    "HookRuntime",
    "HookSpec",
    "HookimplOpts",
    "HooklineError",
    "HooklineSpecs",
    "HookspecOpts",
    "ImplInfo",
    "Interface",
    "LLMCallDecision",
    "LLMCallRequest",
    "LLMCallResult",
    "LegacyPrompt",
    "Lifecycle",
    "MediaContent",
    "MediaItem",
    "MediaType",
    "MessageHandler",
    "ModelChoice",
    "ModelOptions",
    "PluginAgentHooks",
    "PluginCheck",
    "PluginLoadError",
    "PluginProblem",
    "PluginStatus",
    "PluginValidationError",
    "Process",
    "Registry",
    "RunFinished",
    "RunStarted",
    "SteeringInbox",
    "StepFinished",
    "StepStarted",
    "StopEvent",
    "StrPath",
    "StreamEvent",
    "StreamState",
    "TapeContext",
    "TapeEntry",
    "TapeEvent",
    "TapeQuery",
    "TapeSidecar",
    "TapeStore",
    "TextAnswerStream",
    "Tool",
    "ToolCall",
    "ToolCallAction",
    "ToolCallDecision",
    "ToolCallFinished",
    "ToolCallResult",
    "ToolCallStarted",
    "ToolContext",
    "ToolExposure",
    "TraceRecord",
    "TurnResult",
    "TurnSnapshot",
    "TurnState",
    "UnknownImpl",
    "UserContent",
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
