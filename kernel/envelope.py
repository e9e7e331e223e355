"""Envelope helpers and the builtin channel message.

An envelope is any object a channel hands to the framework: a dict, a dataclass, a
custom class. The helpers here read and write its fields the same way everywhere, so no
hook has to guess whether it got a mapping or an attribute object.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, get_args

__all__ = [
    "MEDIA_TYPES",
    "PROMPT_MEDIA_TYPES",
    "ChannelMessage",
    "Envelope",
    "MediaItem",
    "MediaType",
    "context_str",
    "default_session_id",
    "envelope_content",
    "get_field",
    "set_field",
]

Envelope: TypeAlias = Any
"""Any object; fields are read with `get_field`."""

_PromptMediaType: TypeAlias = Literal["image", "audio", "video"]

MediaType: TypeAlias = Literal[_PromptMediaType, "document"]

MEDIA_TYPES: tuple[MediaType, ...] = get_args(MediaType)
PROMPT_MEDIA_TYPES: tuple[MediaType, ...] = get_args(_PromptMediaType)
"""The media a prompt can carry (republic's Image, Audio and Video): not documents."""


def get_field(envelope: Envelope, key: str, default: Any = None) -> Any:
    """Read a field from a mapping (`.get`) or from an attribute object (`getattr`)."""
    if envelope.__class__ is dict or isinstance(envelope, Mapping):  # dict: skip the ABC check
        return envelope.get(key, default)
    return getattr(envelope, key, default)


def set_field(envelope: Envelope, key: str, value: Any) -> bool:
    """Write a field; return False when the envelope refuses (frozen, read-only, slots)."""
    if isinstance(envelope, Mapping):
        if not isinstance(envelope, MutableMapping):
            return False
        try:
            envelope[key] = value
        except (TypeError, KeyError):
            return False
        return True
    try:
        setattr(envelope, key, value)
    except (AttributeError, TypeError):
        return False
    return True


def envelope_content(envelope: Envelope) -> str:
    """The envelope's `content` as text; `""` when it has none."""
    content = get_field(envelope, "content")
    return "" if content is None else str(content)


def default_session_id(envelope: Envelope) -> str:
    """The framework's fallback session id for an envelope.

    The envelope's own `session_id` wins unless it is None or blank; otherwise the id is
    `"<channel>:<chat_id>"`, each missing part replaced by `default`. A blank id is not
    accepted because it would merge unrelated conversations into one session.
    """
    session_id = get_field(envelope, "session_id")
    if session_id is not None and str(session_id).strip():
        return str(session_id)
    channel = get_field(envelope, "channel")
    chat_id = get_field(envelope, "chat_id")
    channel_part = "default" if channel is None else str(channel)
    chat_part = "default" if chat_id is None else str(chat_id)
    return f"{channel_part}:{chat_part}"


def context_str(context: Mapping[str, Any]) -> str:
    """Render context items as `k=v|k=v`; keys starting with `_` stay private."""
    return "|".join(
        f"{key}={value}" for key, value in context.items() if not str(key).startswith("_")
    )


@dataclass(frozen=True)
class MediaItem:
    """A media attachment of a channel message, by URL or inline bytes."""

    type: MediaType
    mime_type: str
    filename: str | None = None
    url: str | None = None
    data: bytes | None = None

    def __post_init__(self) -> None:
        if self.type not in MEDIA_TYPES:
            raise ValueError(
                f"MediaItem.type must be one of {', '.join(MEDIA_TYPES)}, got {self.type!r}"
            )

    def data_url(self) -> str | None:
        """A URL a model provider can use: the remote URL, else a data URL, else None."""
        if self.url is not None:
            return self.url
        if self.data is not None:
            import base64  # media only: importing the kernel does not pay for it

            encoded = base64.b64encode(self.data).decode("ascii")
            return f"data:{self.mime_type};base64,{encoded}"
        return None


@dataclass
class ChannelMessage:
    """The envelope builtin channels produce; mutable so the framework can annotate it."""

    session_id: str
    channel: str
    content: str
    chat_id: str = "default"
    is_active: bool = False
    kind: str = "normal"
    context: dict[str, Any] = field(default_factory=dict)
    media: list[MediaItem] = field(default_factory=list)
    lifespan: AbstractAsyncContextManager[Any] | None = None
    output_channel: str = ""

    def __post_init__(self) -> None:
        # Replies go back where the message came from unless told otherwise, and the
        # context always says where the message came from (explicit values are kept).
        if not self.output_channel:
            self.output_channel = self.channel
        self.context = {"channel": "$" + self.channel, "chat_id": self.chat_id, **self.context}

    @property
    def context_str(self) -> str:
        """The public context items as one `k=v|k=v` string."""
        return context_str(self.context)
