"""The chat's line editor: prompt_toolkit, used when `hookline chat` runs in a terminal.

Why prompt_toolkit rather than the standard library's `readline`: readline edits a line,
keeps a history and searches it, but it cannot keep the prompt on screen while a reply
streams. Whatever is printed while it reads lands in the middle of the typed text, and a
line typed during a reply is echoed into the reply. prompt_toolkit owns the screen:
finished lines of the reply print above a prompt that stays at the bottom, the unfinished
line and a status line (`…running shell 3s`) sit just above it, and what the user types
stays in the input line. It is also what Bub and aider use, so the keys are the familiar
ones (emacs bindings, Ctrl-R reverse search, Up/Down history).

Keys besides prompt_toolkit's defaults: Enter sends the line; Alt-Enter (Esc then Enter)
starts a new line in the same message (a pasted block keeps its lines too); Ctrl-C clears
a typed line, and on an empty line is passed on as SIGINT, as a terminal in cooked mode
would (the chat command cancels the running turn or leaves); Ctrl-D on an empty line
ends the input.

The history file keeps one JSON string per line, is created with mode 0600 (people type
secrets), is read from its last `MAX_HISTORY_BYTES` only and is rewritten to its last
`MAX_HISTORY_ENTRIES` entries when it grows past twice that size, so neither memory nor
disk grows without bound. A history file that is not a regular file (a FIFO, a link, a
device) is not read or written: the session still works, without history.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import anyio
from prompt_toolkit.history import History

from hookline.kernel.errors import HooklineError

from ...host.files import open_regular_file
from ...privacy.files import make_private_dir, write_private_file

__all__ = ["MAX_HISTORY_BYTES", "MAX_HISTORY_ENTRIES", "BoundedFileHistory", "LineEditor"]

MAX_HISTORY_ENTRIES = 1000
MAX_HISTORY_BYTES = 1 << 20
MAX_ENTRY_CHARS = 64 * 1024
"""Longer lines (a pasted file) are sent but not kept in the history."""

_DIM = "\x1b[2m"
_RESET = "\x1b[0m"


class BoundedFileHistory(History):
    """prompt_toolkit history in a file, bounded in memory and on disk (module docstring)."""

    def __init__(self, path: Path, *, max_entries: int = MAX_HISTORY_ENTRIES) -> None:
        super().__init__()
        self.path = Path(path)
        self.max_entries = max_entries

    def load_history_strings(self) -> Iterable[str]:
        """The kept entries, newest first (prompt_toolkit's order)."""
        return reversed(self._read_entries())

    def store_string(self, string: str) -> None:
        if len(string) > MAX_ENTRY_CHARS or not string.strip():
            return
        line = json.dumps(string, ensure_ascii=False) + "\n"
        with contextlib.suppress(OSError):
            make_private_dir(self.path.parent)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                         | os.O_NONBLOCK, 0o600)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return
                os.write(fd, line.encode("utf-8", errors="replace"))
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if size > 2 * MAX_HISTORY_BYTES:
                self._compact()

    def _read_entries(self) -> list[str]:
        try:  # a regular file only: a FIFO or a link in its place is not read
            handle, info = open_regular_file(str(self.path))
        except (HooklineError, OSError):
            return []
        start = max(0, info.st_size - MAX_HISTORY_BYTES)
        try:
            with handle:
                handle.seek(start)
                data = handle.read(MAX_HISTORY_BYTES)
        except OSError:
            return []
        lines = data.split(b"\n")
        if start:
            lines = lines[1:]  # the first one was cut by the seek
        entries: list[str] = []
        for raw in lines:
            try:
                value = json.loads(raw.decode("utf-8", errors="replace"))
            except ValueError:
                continue  # a torn or foreign line: skip it, keep the rest
            if isinstance(value, str):
                entries.append(value)
        return entries[-self.max_entries:]

    def _compact(self) -> None:
        entries = self._read_entries()
        text = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in entries)
        with contextlib.suppress(OSError):
            write_private_file(self.path, text.encode("utf-8", "replace"), durable=False)


class LineEditor:
    """One prompt_toolkit prompt for the whole chat, with the reply's unfinished line and
    a status line shown above it (see the module docstring).

    `write` takes the reply's text as it streams: finished lines are printed above the
    prompt, the rest waits in the prompt's header until its line is complete.
    """

    def __init__(self, *, prompt: str, history: Path | None) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import InMemoryHistory

        self.prompt = prompt
        self._text: str | None = None
        """The line the next `read` starts with (a command to edit)."""
        self.partial = ""
        self.preview: str | None = None
        self.status: str | None = None
        self.status_note = ""
        self._status_since = 0.0
        self._session: Any = PromptSession(
            history=BoundedFileHistory(history) if history is not None else InMemoryHistory(),
            key_bindings=self._key_bindings(),
            refresh_interval=0.5,  # the status line's clock
            enable_suspend=True,  # Ctrl-Z suspends, as in a shell (not a ^Z in the line)
        )

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """While active, anything else printed to stdout or stderr appears above the
        prompt instead of inside it."""
        from prompt_toolkit.patch_stdout import patch_stdout

        with patch_stdout(raw=True):
            yield

    async def read(self) -> str | None:
        """The next message typed (its lines joined by newlines), or None at end of input."""
        try:
            # The chat command listens for SIGINT itself (see the Ctrl-C binding).
            text, self._text = self._text or "", None
            return str(await self._session.prompt_async(self._message, default=text,
                                                        handle_sigint=False))
        except EOFError:
            return None

    def write(self, text: str) -> None:
        """Reply text: finished lines above the prompt, the unfinished one in its header."""
        import sys

        text = self.partial + text
        head, newline, self.partial = text.rpartition("\n")
        width = self._width()
        if len(self.partial) > width:  # a long paragraph: print what fills whole lines
            cut = self.partial.rfind(" ", 0, width)
            cut = cut + 1 if cut > 0 else width
            head = f"{head}{newline}{self.partial[:cut].rstrip()}"
            newline, self.partial = "\n", self.partial[cut:]
        if newline:
            sys.stdout.write(head + "\n")
            sys.stdout.flush()
        self._invalidate()

    @property
    def at_line_start(self) -> bool:
        return not self.partial

    @property
    def width(self) -> int:
        """The columns a line printed above the prompt may use."""
        return self._width()

    def set_preview(self, text: str | None) -> None:
        """Lines shown in the header, redrawn in place (None: none): a reply that is
        printed only once it is complete (`markdown_reply.py`)."""
        if text != self.preview:
            self.preview = text
            self._invalidate()

    def set_prompt(self, prompt: str, text: str | None = None) -> None:
        """Change the prompt (a question's); with `text`, the next line read starts as it."""
        self.prompt = prompt
        self._text = text
        self._invalidate()

    async def settle(self) -> None:
        """Let what was printed so far reach the terminal (it goes through prompt_toolkit's
        stdout proxy, a moment later) before the prompt changes below it."""
        import sys

        sys.stdout.flush()
        await anyio.sleep(0.1)

    def set_status(self, text: str | None, note: str = "") -> None:
        """The status line above the prompt (None: none), its clock started when the text
        changed, and `note` after it (the context meter)."""
        if text != self.status:
            self.status = text
            self._status_since = time.monotonic()
        self.status_note = note
        self._invalidate()

    def _message(self) -> Any:
        from prompt_toolkit.application import get_app
        from prompt_toolkit.formatted_text import ANSI

        app = get_app()
        width = app.output.get_size().columns  # the screen's own, whatever COLUMNS says
        if app.is_done:  # what stays in the scrollback: the prompt and the line only
            return ANSI(_wrapped(self.prompt, width))
        header = ""
        if self.partial:
            header += self.partial + "\n"
        if self.preview:
            header += self.preview + "\n"
        if self.status:
            elapsed = int(time.monotonic() - self._status_since)
            clock = f" {elapsed}s" if elapsed else ""
            note = f" · {self.status_note}" if self.status_note else ""
            header += f"{_DIM}…{self.status}{clock}{note}{_RESET}\n"
        return ANSI(_wrapped(header + self.prompt, width))

    def _invalidate(self) -> None:
        app = getattr(self._session, "app", None)
        if app is not None and app.is_running:
            app.invalidate()

    def _width(self) -> int:
        import shutil

        return max(20, shutil.get_terminal_size().columns - 1)

    def _key_bindings(self) -> Any:
        from prompt_toolkit.key_binding import KeyBindings

        bindings = KeyBindings()

        @bindings.add("escape", "enter")
        def _newline(event: Any) -> None:
            event.current_buffer.insert_text("\n")

        @bindings.add("c-c")
        def _interrupt(event: Any) -> None:
            buffer = event.current_buffer
            if buffer.text:
                buffer.reset()
            else:
                os.kill(os.getpid(), signal.SIGINT)

        return bindings


_ESCAPE = re.compile(r"(\x1b\[[0-9;?]*[A-Za-z])")


def _wrapped(text: str, width: int) -> str:
    """`text` with each line but the last (the one typed on) broken to fit `width`
    columns, at a space where one is near: prompt_toolkit cuts the lines above the input
    at the screen's edge, and a question must show the whole command it asks about.
    Colour sequences take no column."""
    from prompt_toolkit.utils import get_cwidth

    *above, last = text.split("\n")
    lines = []
    for line in above:
        piece, used, space = "", 0, None  # space: (index in piece, columns before it)
        for index, part in enumerate(_ESCAPE.split(line)):
            if index % 2:  # a colour sequence
                piece += part
                continue
            for char in part:
                if used and used + get_cwidth(char) > width:
                    if space is not None and space[1] > width // 2:  # the space stays
                        lines.append(piece[:space[0] + 1])
                        piece, used = piece[space[0] + 1:], used - space[1] - 1
                    else:
                        lines.append(piece)
                        piece, used = "", 0
                    space = None
                if char == " ":
                    space = (len(piece), used)
                piece += char
                used += get_cwidth(char)
        lines.append(piece)
    return "\n".join([*lines, last])
