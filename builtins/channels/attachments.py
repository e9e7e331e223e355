"""How attached files join a message, the same for `hookline run -a` and the http channel.

A text file is inlined after the message under a `--- name ---` line, so the model can
tell which text came from which file; an image travels beside the text as a media item
(`MediaItem`, type "image"), in one of the types that providers taking images accept.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["IMAGE_TYPES", "attached_text"]

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Image types sent to the model: the ones OpenAI, Anthropic and Gemini all take."""


def attached_text(files: Iterable[tuple[str, str]]) -> str:
    """What to append to the message for text files given as (name, content) pairs."""
    return "".join(f"\n\n--- {name} ---\n{content}" for name, content in files)
