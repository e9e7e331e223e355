"""The framework layer: `Framework`, the `running()` scope, the turn pipeline, the agent
hooks adapter, the environment cache, plugin loading and the model stage
(docs/architecture.md).

Code outside this folder imports it through this face (or the kernel root); names are
imported on first use, and `__init__.pyi` holds them for type checkers.
"""

from __future__ import annotations

from .._lazy import LazyExports as _LazyExports

_PUBLIC = {
    "core": ("Framework",),
    "model_stage": ("RUN_MODEL", "RUN_MODEL_STREAM", "HookRuntime"),
    "agent_hooks": ("AgentPlugins", "PluginAgentHooks"),
    "envcache": ("DEFAULT_ENVIRONMENT_CACHE_SIZE", "DEFAULT_ENVIRONMENT_IDLE_SECONDS",
                 "EnvironmentCache"),
    "loading": ("BUILTIN_NAME", "DISABLE_ENV", "STRICT_ENV",
                "PluginGroup", "PluginLoadError", "PluginStatus"),
    "pipeline": ("TurnHost", "TurnPipeline"),
}
"""Module (relative to this package) -> the public names it defines."""

_exports = _LazyExports(globals(), _PUBLIC)
__getattr__ = _exports.getattr
__dir__ = _exports.dir
