"""What the `cli` channel writes to the terminal, and how: through the line editor when
one runs (its output lands above the prompt), else to the output stream, tracking whether
the cursor is at the start of a line; the transient status indicator; colours only on a
terminal and without NO_COLOR. Split from `channel.py`, which decides what to show."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING, TextIO

from ...terminal.tool_notes import is_terminal
from .options import ChatOptions

if TYPE_CHECKING:
    from .line_editor import LineEditor

__all__ = ["CLEAR_LINE", "CYAN", "DIM", "RED", "RESET", "Screen"]

CLEAR_LINE = "\r\x1b[K"
DIM, RED, CYAN, RESET = "\x1b[2m", "\x1b[31m", "\x1b[36m", "\x1b[0m"


class Screen:
    """The terminal of one `CliChannel`: where it writes (`output` and `interactive` are
    read from the channel's options at each write, so `configure` changes them) and what
    is on it now."""

    def __init__(self, options: ChatOptions) -> None:
        self.options = options
        self.editor: LineEditor | None = None
        """The line editor while it reads the lines: output then lands above its prompt."""
        self.at_line_start = True
        self.prompt_shown = False
        self.indicator = False
        """The transient indicator is drawn (without the line editor)."""
        self.status_note = ""
        """Said after the status indicator: the context meter."""

    def say(self, text: str) -> None:
        """A line of the channel's own (banner, notices), on a line of its own."""
        self.begin_output()
        self.end_line()
        self.write(text + "\n")

    def show_lines(self, lines: list[str]) -> None:
        """Tool lines on lines of their own (`[tool]` lines cyan on a colour terminal; a
        diff keeps its own colours)."""
        if not lines:
            return
        self.begin_output()
        self.end_line()
        for line in lines:
            shown = self.style(line, CYAN) if line.startswith("[tool]") else line
            self.write(shown + "\n")

    def begin_output(self) -> None:
        self.clear_indicator()
        if self.prompt_shown and self.editor is None:
            self.write("\n")
            self.prompt_shown = False

    def end_line(self) -> None:
        """Move to a fresh line unless the cursor is at the start of one."""
        if not self.at_line_start:
            self.write("\n")

    def show_indicator(self, text: str) -> None:
        if self.editor is not None:  # its clock follows the text, the note comes after
            self.editor.set_status(text, self.status_note)
            return
        text = f"{text} · {self.status_note}" if self.status_note else text
        if not self.is_interactive():
            return
        self.clear_indicator()
        if not self.at_line_start:
            return
        self.write(self.style(f"…{text}", DIM), track=False)
        self.indicator = True

    def clear_indicator(self) -> None:
        if self.editor is not None:
            self.editor.set_status(None)
        if self.indicator:
            self.indicator = False
            self.write(CLEAR_LINE, track=False)

    def is_interactive(self) -> bool:
        if self.options.interactive is not None:
            return self.options.interactive
        return is_terminal(self.out())

    def style(self, text: str, code: str) -> str:
        if not self.is_interactive() or os.environ.get("NO_COLOR"):
            return text
        return f"{code}{text}{RESET}"

    def out(self) -> TextIO:
        output = self.options.output
        return output if output is not None else sys.stdout

    def write(self, text: str, *, track: bool = True) -> None:
        if not text:
            return
        if self.editor is not None:
            if track:
                self.editor.write(text)
                self.at_line_start = self.editor.at_line_start
            return
        out = self.out()
        with contextlib.suppress(ValueError, OSError):  # closed or broken terminal
            out.write(text)
            out.flush()
        if track:
            self.at_line_start = text.endswith("\n")
