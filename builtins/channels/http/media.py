"""The `attachments` of `POST /v1/messages`: text inlined into the message, images as media.

Each item is `{"name", "mime_type", "data"}` (base64) or `{"name", "mime_type", "url"}` (a
`data:` URL). Text (`text/*`, `TEXT_TYPES`) joins the message as `hookline run -a` adds a
file (`hookline.builtins.channels.attachments`); an image (`IMAGE_TYPES`) becomes a `MediaItem`
that the builtin prompt sends as an image part. Every refusal is a 4xx naming the item.

Decisions, and why:
- Remote (http/https) URLs are refused, though the builtin prompt could pass them on: the
  fetch would happen wherever the model runs, and for a self-hosted OpenAI-compatible
  server (vLLM, llama.cpp) that is this machine or its network, so a URL could make it
  reach addresses the caller cannot; hookline would also never see the bytes to bound
  them. A caller with a URL fetches it and sends the bytes.
- A name with a path separator, a control character or a line break is refused, not cut
  down: the name is shown to the model on the `--- name ---` line, where a line break
  could forge the start of another file, and a silently changed name is a surprise.
- A body may be `MAX_ATTACHED_BODY_SIZE` (8 MiB) when it carries attachments (images in
  base64 grow by a third), `MAX_BODY_SIZE` (1 MiB) otherwise; the message text with its
  inlined files stays within the smaller one, as it did before attachments.
- An image's first bytes must match its type, so a mislabelled file is a clear 400 here
  rather than the provider refusing the whole turn later.
"""

from __future__ import annotations

import base64
import binascii
import unicodedata
from typing import Any
from urllib.parse import unquote_to_bytes

from hookline.kernel.envelope import MediaItem

from ..attachments import IMAGE_TYPES, attached_text
from .guard import HttpError

__all__ = [
    "MAX_ATTACHED_BODY_SIZE",
    "MAX_ATTACHMENTS",
    "TEXT_TYPES",
    "body_limit",
    "json_type",
    "with_attachments",
]

MAX_ATTACHMENTS = 10
"""Most attachments one message may carry."""
MAX_ATTACHED_BODY_SIZE = 8 * 1024 * 1024
"""Largest request body that carries attachments, in bytes (8 MiB)."""
MAX_NAME_LENGTH = 255
TEXT_TYPES = frozenset({"application/json", "application/xml", "application/yaml",
                        "application/toml", "application/javascript"})
"""Types inlined as text besides `text/*`: the text formats files commonly have."""
_ITEM_FIELDS = ("name", "mime_type", "data", "url")
_SIGNATURES = {"image/png": (b"\x89PNG\r\n\x1a\n",), "image/jpeg": (b"\xff\xd8\xff",),
               "image/gif": (b"GIF87a", b"GIF89a")}
_SUPPORTED = ("text (text/*, " + ", ".join(sorted(TEXT_TYPES)) + ") or an image ("
              + ", ".join(sorted(IMAGE_TYPES)) + ")")


def body_limit(max_body_size: int) -> int:
    """How much of a body to read: enough for attachments. A body without any is held
    to `max_body_size` once parsed (`with_attachments`)."""
    return max(max_body_size, MAX_ATTACHED_BODY_SIZE)


def with_attachments(payload: dict[str, Any], body_size: int,
                     max_body_size: int) -> dict[str, Any]:
    """The payload with its attachments applied: text files appended to `content`,
    images in `media` (a list of `MediaItem`); `HttpError` for anything refused."""
    items = payload.pop("attachments", None) or []
    if not items:
        if body_size > max_body_size:
            raise HttpError(413, f"the request body is larger than {max_body_size} bytes "
                                 f"(up to {body_limit(max_body_size)} when it carries "
                                 f"attachments)")
        return payload
    if len(items) > MAX_ATTACHMENTS:
        raise HttpError(400, f"field attachments has {len(items)} items; at most "
                             f"{MAX_ATTACHMENTS} are allowed (send the others in another "
                             f"message)")
    texts: list[tuple[str, str]] = []
    media: list[MediaItem] = []
    for index, item in enumerate(items):
        name, mime, data = _read_item(f"attachments[{index}]", item)
        if mime in IMAGE_TYPES:
            media.append(MediaItem(type="image", mime_type=mime, filename=name, data=data))
            continue
        try:
            texts.append((name, data.decode("utf-8")))
        except UnicodeDecodeError as exc:
            raise HttpError(400, f"attachments[{index}] ({name}) is not UTF-8 text (byte "
                                 f"{exc.start}) though its mime_type is {mime}; send it as "
                                 f"UTF-8, or as an image with an image type") from None
    content = payload["content"] + attached_text(texts)
    size = len(content.encode("utf-8"))
    if size > max_body_size:
        raise HttpError(413, f"the message with its text attachments is {size} bytes; at "
                             f"most {max_body_size} are allowed (send a part of the text)")
    return {**payload, "content": content, "media": media}


def _read_item(where: str, item: Any) -> tuple[str, str, bytes]:
    """An attachment's checked name, base media type and bytes."""
    if not isinstance(item, dict):
        raise HttpError(400, f"{where} must be an object with name, mime_type and data (or "
                             f"url), got {json_type(item)}")
    item = {key: value for key, value in item.items() if value is not None}
    unknown = sorted(set(item) - set(_ITEM_FIELDS))
    if unknown:
        raise HttpError(400, f"{where} has unknown field(s): {', '.join(unknown)} (known: "
                             f"{', '.join(_ITEM_FIELDS)})")
    for key in _ITEM_FIELDS:
        if key in item and not isinstance(item[key], str):
            raise HttpError(400, f"{where}.{key} must be a string, got {json_type(item[key])}")
    if "name" not in item:
        raise HttpError(400, f"{where} has no name (the file name shown to the model)")
    name = _checked_name(where, item["name"])
    where = f"{where} ({name})"
    if "mime_type" not in item:
        raise HttpError(400, f"{where} has no mime_type (such as text/plain or image/png)")
    mime = _checked_type(where, item["mime_type"])
    if ("data" in item) == ("url" in item):
        given = "both data and url" if "data" in item else "neither data nor url"
        raise HttpError(400, f"{where} has {given}; send exactly one: data (base64) or url "
                             f"(a data: URL)")
    data = (_decoded(f"{where}: data", item["data"]) if "data" in item
            else _from_data_url(where, item["url"], mime))
    if not data:
        raise HttpError(400, f"{where} is empty")
    if mime in IMAGE_TYPES and not _looks_like(mime, data):
        raise HttpError(400, f"{where} does not hold an image of type {mime}: its first "
                             f"bytes are not those of one; check mime_type")
    return name, mime, data


def _checked_name(where: str, name: str) -> str:
    if not name.strip():
        raise HttpError(400, f"{where}.name must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise HttpError(400, f"{where}.name is {len(name)} characters long; at most "
                             f"{MAX_NAME_LENGTH} are allowed")
    if "/" in name or "\\" in name:
        base = name.replace("\\", "/").rsplit("/", 1)[-1]
        raise HttpError(400, f"{where}.name must be a file name, not a path: send "
                             f"{base!r} rather than {name!r}")
    if name in (".", ".."):
        raise HttpError(400, f"{where}.name must be a file name, not {name!r}")
    if any(unicodedata.category(char) in ("Cc", "Zl", "Zp") for char in name):
        raise HttpError(400, f"{where}.name must not contain control characters or line "
                             f"breaks")
    return name


def _checked_type(where: str, mime_type: str) -> str:
    """The base type, lower case (parameters such as `; charset=utf-8` are dropped)."""
    base = mime_type.split(";", 1)[0].strip().lower()
    if base in IMAGE_TYPES or base in TEXT_TYPES or base.startswith("text/"):
        return base
    raise HttpError(415, f"{where} has mime_type {base or '(empty)'}, which hookline does "
                         f"not send to models; attach {_SUPPORTED}")


def _decoded(where: str, text: str) -> bytes:
    try:
        return base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError) as exc:  # ValueError: a character beyond ASCII
        raise HttpError(400, f"{where} is not valid base64 ({exc}); send the bytes in "
                             f"standard base64 (A-Z, a-z, 0-9, + and /, with = padding)"
                        ) from None


def _from_data_url(where: str, url: str, mime: str) -> bytes:
    if url[:8].lower().startswith(("http://", "https://")):
        raise HttpError(400, f"{where}: remote URLs are not accepted; fetch the file and "
                             f"send its bytes as data (base64) or a data: URL")
    header, comma, body = url[5:].partition(",")
    if url[:5].lower() != "data:" or not comma:
        raise HttpError(400, f"{where}: url must be a data: URL "
                             f"(data:<mime type>;base64,<data>)")
    params = [param.strip().lower() for param in header.split(";")]
    if params[0] != mime:
        raise HttpError(400, f"{where}: the data: URL says {params[0] or 'no media type'} "
                             f"but mime_type is {mime}; make them agree")
    if len(params) > 1 and params[-1] == "base64":
        return _decoded(f"{where}: the data: URL", body)
    return unquote_to_bytes(body)


def _looks_like(mime: str, data: bytes) -> bool:
    if mime == "image/webp":
        return data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    return data.startswith(_SIGNATURES[mime])


def json_type(value: Any) -> str:
    """How a JSON value's type reads in an error: "a number", "an array"..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
