"""How attached files join a message, the same for `hookline run -a` and the http channel.

A text file is inlined after the message under a `--- name ---` line, so the model can
tell which text came from which file; an image travels beside the text as a media item
(`MediaItem`, type "image"), in one of the types that providers taking images accept.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from hookline.kernel.envelope import PROMPT_MEDIA_TYPES, get_field

__all__ = ["IMAGE_TYPES", "attached_text", "prompt_media"]

logger = logging.getLogger(__name__)

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Image types sent to the model: the ones OpenAI, Anthropic and Gemini all take."""


def attached_text(files: Iterable[tuple[str, str]]) -> str:
    """What to append to the message for text files given as (name, content) pairs."""
    return "".join(f"\n\n--- {name} ---\n{content}" for name, content in files)


def prompt_media(item: Any) -> Any:
    """An envelope's media item as republic media for the prompt, or None for one the
    model cannot be sent.

    Only remote (http/https) and inline (data:) media qualify: any other URL would be read
    by republic as a local path, outside the workspace rules.
    """
    kind = get_field(item, "type")
    if kind not in PROMPT_MEDIA_TYPES:
        return None
    url = item.data_url() if hasattr(item, "data_url") else get_field(item, "url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://", "data:")):
        logger.warning("prompt.media_skipped kind=%s reason=no http(s) or data: URL", kind)
        return None
    import republic

    build = getattr(republic, kind)  # republic.image, .audio, .video
    return build(url, media_type=get_field(item, "mime_type"))
