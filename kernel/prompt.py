"""Prompt content: the list form (text and republic media) and the legacy form.

build_prompt hooks may return either form; the model-stage hooks receive the legacy form
(a string when there is no media, otherwise content blocks with media as URLs). These
functions convert between the two. republic is imported only when a legacy media block has
to become a republic object, so the kernel itself stays free of third-party imports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeAlias

from .envelope import PROMPT_MEDIA_TYPES
from .errors import ErrorKind, HooklineError

__all__ = [
    "LegacyPrompt",
    "MediaContent",
    "UserContent",
    "is_media",
    "prompt_text",
    "to_content",
    "to_legacy_prompt",
]

class MediaContent(Protocol):
    """The shape of republic.Image / Audio / Video that the kernel relies on."""

    kind: str
    media_type: str
    data: bytes | None
    url: str | None

    @property
    def data_url(self) -> str: ...


UserContent: TypeAlias = str | MediaContent
"""One prompt item: text or a republic media object."""

LegacyPrompt: TypeAlias = str | list[dict[str, Any]]
"""Pre-0.6 prompt form: plain text, or content blocks."""


def is_media(value: object) -> bool:
    """True for republic media objects (checked by shape, so republic need not be loaded)."""
    if isinstance(value, str | Mapping):
        return False
    cls = type(value)
    return (
        getattr(cls, "kind", None) in PROMPT_MEDIA_TYPES
        and hasattr(value, "media_type")
        # Look the property up on the class: reading it may raise for empty media.
        and hasattr(cls, "data_url")
    )


def _invalid(message: str) -> HooklineError:
    return HooklineError(ErrorKind.invalid_input, message)


def _media_class(kind: str) -> Any:
    try:
        import republic
    except ImportError as exc:
        raise HooklineError(
            ErrorKind.config,
            f"The republic package is needed to turn {kind} prompt blocks into media; "
            "install republic.",
        ) from exc
    return getattr(republic, kind.capitalize())  # Image, Audio, Video


def _decode_data_url(url: str, kind: str) -> bytes:
    # Imported here, for media blocks only: importing the kernel does not pay for them.
    import base64
    import binascii
    from urllib.parse import unquote_to_bytes

    header, separator, payload = url.partition(",")
    if not separator:
        raise _invalid(f"Invalid data URL in {kind} prompt block")
    try:
        if header.endswith(";base64"):
            return base64.b64decode(payload, validate=True)
        return unquote_to_bytes(payload)
    except (binascii.Error, ValueError) as exc:
        raise _invalid(f"Invalid base64 data in {kind} prompt block") from exc


def _block_to_content(block: Mapping[str, Any]) -> UserContent:
    block_type = block.get("type")
    if block_type == "text":
        text = block.get("text")
        if not isinstance(text, str):
            raise _invalid("Text prompt block needs a string 'text'")
        return text
    if block_type not in PROMPT_MEDIA_TYPES:
        raise _invalid(f"Unsupported prompt block type: {block_type}")
    kind = str(block_type)
    url = block.get("url")
    inline = block.get("data")
    if url is None and inline is None:
        raise _invalid(f"{kind.capitalize()} prompt block needs a 'url' or 'data'")
    media_type = block.get("media_type")
    if not media_type:
        raise _invalid(f"{kind.capitalize()} prompt block needs a 'media_type'")
    data: bytes | None = None
    if inline is not None:
        if isinstance(inline, bytes):
            data = inline
        else:
            import base64
            import binascii

            try:
                data = base64.b64decode(inline, validate=True)
            except (binascii.Error, ValueError, TypeError) as exc:
                raise _invalid(f"Invalid base64 data in {kind} prompt block") from exc
    if isinstance(url, str) and url.startswith("data:"):
        # A data URL is inline media in disguise: keep the bytes, not the URL.
        if data is None:
            data = _decode_data_url(url, kind)
        url = None
    media: str | MediaContent = _media_class(kind)(str(media_type), data=data, url=url)
    return media


NOT_CONTENT = "Expected user content, text, or a list of content blocks."
"""The message for a value that is neither text nor a list (worded as the reference)."""


def to_content(value: object) -> list[UserContent]:
    """Normalise anything a build_prompt hook may return into a list of UserContent."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise _invalid(NOT_CONTENT)  # the reference's words
    content: list[UserContent] = []
    for item in value:
        if isinstance(item, str) or is_media(item):
            content.append(item)
        elif isinstance(item, Mapping):
            content.append(_block_to_content(item))
        else:
            raise _invalid(f"Unsupported prompt content: {type(item).__name__}")
    return content


def to_legacy_prompt(content: str | Sequence[UserContent]) -> LegacyPrompt:
    """The form model-stage hooks receive: text if there is no media, else blocks."""
    if isinstance(content, str):
        return content
    items = list(content)
    if all(isinstance(item, str) for item in items):
        return "\n".join(items)  # type: ignore[arg-type]
    blocks: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, str):
            blocks.append({"type": "text", "text": item})
        elif is_media(item):
            blocks.append({"type": item.kind, "media_type": item.media_type, "url": item.data_url})
        else:
            raise _invalid(f"Unsupported prompt content: {type(item).__name__}")
    return blocks


def prompt_text(content: str | Sequence[UserContent]) -> str:
    """Only the text of the content, newline-joined (media is skipped)."""
    if isinstance(content, str):
        return content
    return "\n".join(item for item in content if isinstance(item, str))
