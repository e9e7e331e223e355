"""Model clients for the builtin agent loop: offline, scripted, and republic providers.

`open_model(spec, settings)` picks one from a model spec; `base` defines the messages,
tool schemas, stream events and the `ModelClient` protocol they share. Importing this
package does not import republic, and its names are loaded on first use: the agent loop
needs `base` only, and a turn on the offline model never loads the scripted model or the
republic client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import (
        USAGE_FIELDS,
        ContentItem,
        Finished,
        ModelClient,
        ModelEvent,
        ModelMessage,
        Role,
        TextDelta,
        ToolCallEvent,
        ToolCallSpec,
        ToolSchema,
        Usage,
        as_model_message,
        as_model_messages,
        content_text,
        usage_dict,
    )
    from .offline import OfflineModel
    from .opening import ModelOpener, open_model
    from .republic_client import RepublicModel, to_republic_messages, to_republic_tools
    from .scripted import ScriptedCall, ScriptedModel, ScriptedTurn, load_turns, parse_turns

_MODULES = {
    "base": ("USAGE_FIELDS", "ContentItem", "Finished", "ModelClient", "ModelEvent",
             "ModelMessage", "Role", "TextDelta", "ToolCallEvent", "ToolCallSpec",
             "ToolSchema", "Usage", "as_model_message", "as_model_messages", "content_text",
             "usage_dict"),
    "offline": ("OfflineModel",),
    "opening": ("ModelOpener", "open_model"),
    "republic_client": ("RepublicModel", "to_republic_messages", "to_republic_tools"),
    "scripted": ("ScriptedCall", "ScriptedModel", "ScriptedTurn", "load_turns",
                 "parse_turns"),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    "USAGE_FIELDS",
    "ContentItem",
    "Finished",
    "ModelClient",
    "ModelEvent",
    "ModelMessage",
    "ModelOpener",
    "OfflineModel",
    "RepublicModel",
    "Role",
    "ScriptedCall",
    "ScriptedModel",
    "ScriptedTurn",
    "TextDelta",
    "ToolCallEvent",
    "ToolCallSpec",
    "ToolSchema",
    "Usage",
    "as_model_message",
    "as_model_messages",
    "content_text",
    "load_turns",
    "open_model",
    "parse_turns",
    "to_republic_messages",
    "to_republic_tools",
    "usage_dict",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (then a plain attribute)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
