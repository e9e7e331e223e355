"""What `hookline run` sends: the message, piped input before it, and attached files.

As llm does, `cat file | hookline run "prompt"` sends the piped text, then the prompt (a
blank line between them: llm's one space would glue the prompt to the text's last line
when it does not end with a newline); `-a PATH` attaches a UTF-8 text file (inlined
under its name) or an image (sent as an image part to models that take images).
Everything read is bounded, so a 1 GB pipe or file is refused with the limit instead of
filling memory, and a FIFO is never opened.
"""

import mimetypes
import os
import stat
import sys
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["MAX_ATTACHMENT_BYTES", "MAX_PIPED_BYTES", "attachments", "message_text"]

MAX_PIPED_BYTES = 1024 * 1024
"""Largest piped input `run` reads (1 MiB of text is about 250,000 tokens already)."""

MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024
"""Largest attached file: images are sent whole; providers refuse larger ones anyway."""

MAX_TEXT_ATTACHMENT_BYTES = MAX_PIPED_BYTES
"""Largest attached text file."""


class InputError(ValueError):
    """Input that cannot be sent; the message says why and what to do."""


def message_text(message: str | None) -> str:
    """The message: the argument, standard input for '-' (or no argument with piped
    input), or the piped input followed by the argument when both are given."""
    piped = _stdin_is_data()
    if message is None and not piped:
        raise InputError("give the message as an argument, or '-' to read it from standard "
                         "input (hookline run --help)")
    if message is None or message == "-":
        text = _read_stdin()
    elif piped:
        extra = _read_stdin()
        text = f"{extra.rstrip(chr(10))}\n\n{message}" if extra.strip() else message
    else:
        text = message
    if not text.strip():
        raise InputError("the message is empty")
    return text


def _stdin_is_data() -> bool:
    """True when standard input is a pipe or a file: data someone sent on purpose (a
    terminal is for typing, and /dev/null or a closed descriptor hold nothing)."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def _read_stdin() -> str:
    data = _read_bounded(sys.stdin.buffer, MAX_PIPED_BYTES, "standard input")
    return _decoded(data, "standard input")


def attachments(paths: list[Path]) -> tuple[str, list[Any]]:
    """The text to append for the text files, and the media items for the images."""
    from hookline.builtins.channels import IMAGE_TYPES, attached_text
    from hookline.builtins.host import open_regular_file
    from hookline.kernel.envelope import MediaItem

    texts: list[tuple[str, str]] = []
    media: list[Any] = []
    for path in paths:
        shown = str(path)
        try:
            handle, _ = open_regular_file(os.path.realpath(path), name=shown,
                                          action="attach")
        except FileNotFoundError:
            raise InputError(f"cannot attach {shown}: no such file") from None
        except IsADirectoryError:
            raise InputError(f"cannot attach {shown}: it is a folder; attach its files") from None
        except Exception as exc:  # a FIFO, a device, no permission: the reason, one line
            raise InputError(f"cannot attach {shown}: {exc}") from None
        with handle:
            mime = mimetypes.guess_type(path.name)[0] or ""
            if mime.startswith("image/") and mime not in IMAGE_TYPES:
                raise InputError(f"cannot attach {shown}: {mime} images are not sent to "
                                 f"models; attach {', '.join(sorted(IMAGE_TYPES))}")
            if mime in IMAGE_TYPES:
                data = _read_bounded(handle, MAX_ATTACHMENT_BYTES, shown)
                media.append(MediaItem(type="image", mime_type=mime, filename=path.name,
                                       data=data))
                continue
            data = _read_bounded(handle, MAX_TEXT_ATTACHMENT_BYTES, shown)
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(
                f"cannot attach {shown}: it is neither UTF-8 text nor an image "
                f"({mime or 'unknown type'}); attach text files or images "
                f"(png, jpeg, gif, webp)") from None
        texts.append((path.name, content))
    return attached_text(texts), media


def _read_bounded(stream: BinaryIO, limit: int, shown: str) -> bytes:
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"{shown} is larger than {limit // (1024 * 1024)} MiB, the most "
                         f"hookline run sends; send a part of it (head, sed -n) or attach "
                         f"a smaller file")
    return data


def _decoded(data: bytes, shown: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{shown} is not UTF-8 text (byte {exc.start}); send text, or "
                         f"attach an image with -a") from None
