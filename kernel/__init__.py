# hookline kernel 0.1.0 -- MIT licence, Copyright (c) 2026 the hookline authors (LICENSE)
"""hookline.kernel: a hand-rolled plugin kernel for the application-hook contract.

Only the standard library (and ``typing_extensions``) is imported, always through
relative imports, so this folder can be copied into another package and keep working.

The layers, bottom up: ``_dispatch`` (the dispatch core, which knows no application),
the contract modules (``hooks``, the 27 hook specs, and the types hooks exchange), the
framework. Names are imported on first use, so ``import hookline.kernel._dispatch`` (or a
plugin's ``from hookline.kernel import hookimpl``) does not load the whole framework.

The public names are written once, in ``_PUBLIC`` below: ``__all__`` and the lazy imports
are derived from it, and so is ``__init__.pyi``, where type checkers read them
(``python -m hookline.kernel._generate`` rewrites it; a test says when it is stale).
"""

from __future__ import annotations

from ._lazy import EVERY as _EVERY
from ._lazy import LazyExports as _LazyExports

_PUBLIC = {
    "_identity": ("ENTRY_POINT_GROUP", "__version__"),
    "_dispatch": ("DispatchTrace", "HookImpl", "HookReport", "HookSpec", "HookimplOpts",
                  "HookspecOpts", "PluginCheck", "PluginProblem", "PluginValidationError",
                  "Registry", "TraceRecord"),
    "hooks": ("HOOK_SPECS", "HooklineSpecs", "hookimpl", "hookspec"),
    "framework.model_stage": ("HookRuntime",),
    "framework.core": ("Framework",),
    "framework.agent_hooks": ("AgentPlugins",),
    "framework.loading": ("PluginLoadError", "PluginStatus"),
    "errors": ("ErrorKind", "HooklineError"),
    "envelope": ("ChannelMessage", "Envelope", "MediaItem", "MediaType"),
    "turn": ("TurnResult", "TurnState"),
    "streaming": ("AsyncStreamEvents", "StreamEvent", "StreamState", "TextAnswerStream"),
    "prompt": ("LegacyPrompt", "MediaContent", "UserContent"),
    "tape": ("AsyncBatchTapeStore", "AsyncTapeStore", "BatchTapeStore", "TapeContext", "TapeEntry",
             "TapeQuery", "TapeSidecar", "TapeStore"),
    "environment": ("ByteReader", "CodeFailed", "Environment", "Process", "StrPath"),
    "channels": ("AdmitAction", "AdmitDecision", "AdmitOutcome",
                 "ApprovalRouter", "Channel", "ChannelRouter", "Interface", "Lifecycle",
                 "MessageHandler", "SteeringInbox", "StopEvent", "TurnSnapshot"),
    "tools": ("EventEmitter", "Tool", "ToolContext", "ToolExposure"),
    "interception": ("LLMCallDecision", "LLMCallRequest", "LLMCallResult", "ToolCall",
                     "ToolCallAction", "ToolCallDecision", "ToolCallResult"),
    "events": ("AgentEvent", "ChatFinished", "CommandFinished", "EventBus", "EventHandler",
               "RunFinished", "RunStarted", "StepFinished", "StepStarted", "TapeEvent",
               "ToolCallFinished", "ToolCallStarted"),
    "models": ("ModelChoice", "ModelOptions"),
    "messages": ("ContentItem", "ModelMessage", "Role", "ToolCallSpec"),
    "typed": _EVERY,  # the two protocols of each hook, generated from hooks.py
}
"""Module (relative to this package) -> the public names it defines, layer by layer."""

_MOVED = {
    "EnvironmentCache": "framework.envcache",
    "HookBinding": "_dispatch",
    "ImplInfo": "_dispatch",
    "PluginAgentHooks": "framework.agent_hooks",
    "UnknownImpl": "_dispatch",
}
"""Internals the root exported once: still reachable here, with a DeprecationWarning."""

_exports = _LazyExports(globals(), _PUBLIC, moved=_MOVED)
__getattr__ = _exports.getattr
__dir__ = _exports.dir
