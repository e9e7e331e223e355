"""Conversation messages as model clients, plugins and hooks exchange them.

``ModelMessage`` is what a ``before_llm_call`` hook finds in ``LLMCallRequest.messages``
and may add to; its parts are ``ToolCallSpec`` (a tool call an assistant message asks
for), ``Role`` and ``ContentItem`` (a string, a media object or a legacy block dict). They
live in the kernel, standard library only, so a plugin typed with ``mypy --strict`` needs
nothing but ``hookline.kernel``; ``hookline.builtins.models`` re-exports them unchanged.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, get_args

from .prompt import is_media

__all__ = [
    "ContentItem",
    "ModelMessage",
    "Role",
    "ToolCallSpec",
    "as_model_message",
    "as_model_messages",
    "content_text",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
ContentItem: TypeAlias = Any
"""A string, a republic media object or a legacy block dict."""

_ROLES: tuple[Role, ...] = get_args(Role)


@dataclass(frozen=True)
class ToolCallSpec:
    """A tool call requested by the model. `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str = "{}"
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """Provider details needed to send the call back (e.g. Gemini thought signatures)."""

    @property
    def args(self) -> Any:
        """The decoded arguments (`{}` for empty text); raises ValueError on bad JSON."""
        return json.loads(self.arguments or "{}")

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.metadata:
            data["metadata"] = dict(self.metadata)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCallSpec:
        arguments = data.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        return cls(
            str(data["id"]),
            str(data["name"]),
            arguments,
            metadata=dict(data.get("metadata") or {}),
        )


@dataclass(frozen=True)
class ModelMessage:
    """One conversation message.

    `tool_calls` is only for assistant messages; `tool_call_id` (required: a string, empty
    when the provider gave the call no id) and `name` (the tool's name) only for tool
    messages, whose `content` is the tool output and `is_error` tells the model that the
    call failed.
    """

    role: Role
    content: str | list[ContentItem] = ""
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ValueError(
                f"ModelMessage.role must be one of {', '.join(_ROLES)}, got {self.role!r}"
            )
        if not isinstance(self.content, str):
            object.__setattr__(self, "content", list(self.content))
        object.__setattr__(self, "tool_calls", list(self.tool_calls))
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"Only assistant messages carry tool_calls, not {self.role} messages")
        # An empty id is an id: some servers send none, and results pair by position too.
        if self.role == "tool" and self.tool_call_id is None:
            raise ValueError("A tool message needs the tool_call_id of the call it answers")
        if self.role != "tool" and self.tool_call_id is not None:
            raise ValueError(f"tool_call_id is only for tool messages, not {self.role} messages")

    # Builders -------------------------------------------------------------------------

    @classmethod
    def system(cls, text: str) -> ModelMessage:
        return cls("system", text)

    @classmethod
    def user(cls, content: str | Iterable[ContentItem]) -> ModelMessage:
        return cls("user", content if isinstance(content, str) else list(content))

    @classmethod
    def assistant(cls, text: str = "", tool_calls: Iterable[ToolCallSpec] = ()) -> ModelMessage:
        return cls("assistant", text, tool_calls=list(tool_calls))

    @classmethod
    def tool(
        cls,
        call: ToolCallSpec | str,
        content: str | Iterable[ContentItem],
        *,
        name: str | None = None,
        is_error: bool = False,
    ) -> ModelMessage:
        """The result of `call` (a ToolCallSpec, or its id together with `name`)."""
        if isinstance(call, ToolCallSpec):
            call_id, name = call.id, name or call.name
        else:
            call_id = call
        body = content if isinstance(content, str) else list(content)
        return cls("tool", body, tool_call_id=call_id, name=name, is_error=is_error)

    # Views ----------------------------------------------------------------------------

    @property
    def text(self) -> str:
        """The text of the message: the string content, or its text items newline-joined."""
        return content_text(self.content)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (media items become `{"type", "media_type", "url"}` blocks)."""
        data: dict[str, Any] = {"role": self.role}
        if isinstance(self.content, str):
            data["content"] = self.content
        else:
            data["content"] = [_item_to_dict(item) for item in self.content]
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            data["name"] = self.name
        if self.is_error:
            data["is_error"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelMessage:
        """Read `to_dict()` output, or republic's `Message.to_dict()` form."""
        content = data.get("content")
        if content is None:
            content = ""
        elif not isinstance(content, str):
            content = [_item_from_dict(item) for item in content]
        tool_call_id = data.get("tool_call_id")
        name = data.get("name")
        answered = data.get("tool_call")
        if isinstance(answered, Mapping):
            tool_call_id = answered.get("id") if tool_call_id is None else tool_call_id
            name = name or answered.get("name")
        return cls(
            data["role"],
            content,
            tool_calls=[ToolCallSpec.from_dict(call) for call in data.get("tool_calls") or ()],
            tool_call_id=tool_call_id,
            name=name,
            is_error=bool(data.get("is_error", False)),
        )


def _item_to_dict(item: ContentItem) -> Any:
    if isinstance(item, str):
        return {"type": "text", "text": item}
    if is_media(item):
        return {"type": item.kind, "media_type": item.media_type, "url": item.data_url}
    return dict(item)


def _item_from_dict(item: Any) -> ContentItem:
    """A text block as its text; another block as a copy of its own: the dict read may be
    shared (entries a store or a cache keeps), and a hook may change the message's blocks."""
    if isinstance(item, Mapping):
        return str(item.get("text", "")) if item.get("type") == "text" else copy.deepcopy(item)
    return item


def content_text(content: str | Sequence[ContentItem]) -> str:
    """Only the text of message content, newline-joined (media and other blocks skipped)."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for item in content:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, Mapping) and item.get("type") == "text":
            texts.append(str(item.get("text", "")))
    return "\n".join(texts)


def as_model_message(message: Any) -> ModelMessage:
    """A ModelMessage from a ModelMessage, a republic `Message` (by shape) or a dict."""
    if isinstance(message, ModelMessage):
        return message
    if isinstance(message, Mapping):
        return ModelMessage.from_dict(message)
    parts = getattr(message, "parts", None)
    role = getattr(message, "role", None)
    if parts is None or role is None:
        raise TypeError(f"Not a conversation message: {type(message).__name__}")
    content: list[ContentItem] = []
    for part in parts:
        if is_media(part):
            content.append(part)
        elif type(part).__name__ == "Text":
            content.append(part.text)
        # Reasoning and provider-private parts only matter to the provider that made them.
    body: str | list[ContentItem] = (
        "".join(content) if all(isinstance(item, str) for item in content) else content
    )
    calls = [
        ToolCallSpec(call.id, call.name, call.arguments, metadata=dict(call.metadata or {}))
        for call in getattr(message, "tool_calls", ())
    ]
    answered = getattr(message, "tool_call", None)
    return ModelMessage(
        role,
        body,
        tool_calls=calls,
        tool_call_id=None if answered is None else answered.id,
        name=None if answered is None else answered.name,
        is_error=bool(getattr(message, "is_error", False)),
    )


def as_model_messages(messages: Iterable[Any]) -> list[ModelMessage]:
    return [as_model_message(message) for message in messages]
