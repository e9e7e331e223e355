"""The agent loop: model steps, tool calls and interception as one event stream, with the
steering inbox, compaction and each turn's token usage (docs/builtins.md).

Names are imported on first use."""

from __future__ import annotations

from hookline.kernel._lazy import LazyExports as _LazyExports

_PUBLIC = {
    "loop": ("Agent", "AgentConfig"),
    "steering": ("DEFAULT_KEY", "InMemorySteeringInbox", "scope_inbox", "steer",
                 "steered_messages", "steering_key"),
    "usage": ("COMPACT_EVENT", "add_usage", "cache_writes", "reported_cost", "token_counts"),
}
"""Module (relative to this package) -> the public names it defines."""

_exports = _LazyExports(globals(), _PUBLIC)
__getattr__ = _exports.getattr
__dir__ = _exports.dir
