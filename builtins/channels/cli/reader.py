"""Reading the lines typed into `hookline chat` when the line editor is not used, and
whether it can be.

Without the editor (pipes, files, `TERM=dumb`) reading polls the input with a short
timeout, so the reading thread never outlives the channel; when the input has no
selectable file descriptor (Windows consoles, test doubles) it falls back to a blocking
`readline` whose thread is abandoned on cancellation.
"""

from __future__ import annotations

import os
import select
import sys
from typing import Any

from ...terminal.tool_notes import is_terminal

__all__ = ["NO_LINE", "POLL_SECONDS", "LineReader", "can_edit"]

POLL_SECONDS = 0.2
NO_LINE = object()
"""Returned by a poll that saw no complete line."""


class LineReader:
    """Lines from a text stream, read in a worker thread.

    With a selectable file descriptor (POSIX terminals, pipes, files) it reads raw bytes
    after `select` says there are some, so a call returns within `timeout` seconds when
    no line is complete. Otherwise it calls the stream's `readline`.
    """

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.fd = _selectable_fd(stream)
        self._buffer = b""
        self._eof = False

    def read(self, timeout: float) -> Any:
        """A line without its newline, None at end of input, or `NO_LINE`."""
        if self.fd is None:
            line = self.stream.readline()
            return line.rstrip("\r\n") if line else None
        while True:
            if b"\n" in self._buffer:
                line, _, self._buffer = self._buffer.partition(b"\n")
                return line.rstrip(b"\r").decode("utf-8", errors="replace")
            if self._eof:
                if not self._buffer:
                    return None
                line, self._buffer = self._buffer, b""
                return line.decode("utf-8", errors="replace")
            ready, _, _ = select.select([self.fd], [], [], timeout)
            if not ready:
                return NO_LINE
            chunk = os.read(self.fd, 65536)
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True


def _selectable_fd(stream: Any) -> int | None:
    if os.name != "posix":
        return None
    try:
        fd = stream.fileno()
        select.select([fd], [], [], 0)
    except (AttributeError, OSError, ValueError):
        return None
    return fd



def can_edit(stream: Any, output: Any) -> bool:
    """The line editor needs the process's own terminal at both ends, and asyncio."""
    if stream is not sys.stdin or output is not sys.stdout or os.environ.get("TERM") == "dumb":
        return False
    if not (is_terminal(stream) and is_terminal(output)):
        return False
    return _running_on_asyncio()


def _running_on_asyncio() -> bool:
    """Whether the running event loop is asyncio's. sniffio says so when it is installed;
    anyio no longer needs it, and trio does, so without it only asyncio can be running."""
    try:
        import sniffio
    except ImportError:
        import asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True
    try:
        return sniffio.current_async_library() == "asyncio"
    except sniffio.AsyncLibraryNotFoundError:
        return False
