"""Model clients for the builtin agent loop: offline, scripted, and republic providers.

`open_model(spec, settings)` picks one from a model spec; `base` defines the messages,
tool schemas, stream events and the `ModelClient` protocol they share. Names are imported
on first use: the agent loop needs `base` only, a turn on the offline model never loads
the scripted model or republic."""

from __future__ import annotations

from hookline.kernel._lazy import LazyExports as _LazyExports

_PUBLIC = {
    "base": ("USAGE_FIELDS", "ContentItem", "Finished", "ModelClient", "ModelEvent",
             "ModelMessage", "Role", "TextDelta", "ToolCallEvent", "ToolCallSpec",
             "ToolSchema", "Usage", "usage_dict"),
    "offline": ("OfflineModel",),
    "opening": ("ModelOpener", "open_model"),
    "options": ("MODEL_OPTIONS", "MODEL_OPTIONS_STATE", "checked_model_options",
                "parse_model_options"),
    "pairing": ("OpenCalls",),
    "republic_client": ("NEEDS_API_BASE", "RepublicModel", "env_prefix", "known_providers",
                        "to_republic_messages", "to_republic_tools"),
    "scripted": ("ScriptedCall", "ScriptedModel", "ScriptedTurn", "load_turns", "parse_turns"),
}
"""Module (relative to this package) -> the public names it defines."""

_exports = _LazyExports(globals(), _PUBLIC)
__getattr__ = _exports.getattr
__dir__ = _exports.dir
