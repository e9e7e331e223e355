"""Model clients for the builtin agent loop: offline, scripted, and republic providers.

`open_model(spec, settings)` picks one from a model spec; `base` defines the messages,
tool schemas, stream events and the `ModelClient` protocol they share. Importing this
package does not import republic.
"""

from __future__ import annotations

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
from .republic_client import (
    ModelOpener,
    RepublicModel,
    open_model,
    to_republic_messages,
    to_republic_tools,
)
from .scripted import ScriptedCall, ScriptedModel, ScriptedTurn, load_turns, parse_turns

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
