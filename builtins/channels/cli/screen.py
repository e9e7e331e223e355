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

if TYPE_CHECKING:
    from .line_editor import LineEditor

__all__ = ["CLEAR_LINE", "CYAN", "DIM", "RED", "RESET", "Screen"]

CLEAR_LINE = "\r\x1b[K"
DIM, RED, CYAN, RESET = "\x1b[2m", "\x1b[31m", "\x1b[36m", "\x1b[0m"


class Screen:
    """The terminal side of `CliChannel` (its attributes are set by the channel)."""

    output: TextIO | None
    interactive: bool | None
    status_note: str
    _editor: LineEditor | None
    _at_line_start: bool
    _prompt_shown: bool
    _indicator: bool

    def _show_lines(self, lines: list[str]) -> None:
        """Tool lines on lines of their own (`[tool]` lines cyan on a colour terminal; a
        diff keeps its own colours)."""
        if not lines:
            return
        self._begin_output()
        if not self._at_line_start:
            self._write("\n")
        for line in lines:
            shown = self._style(line, CYAN) if line.startswith("[tool]") else line
            self._write(shown + "\n")

    def _begin_output(self) -> None:
        self._clear_indicator()
        if self._prompt_shown and self._editor is None:
            self._write("\n")
            self._prompt_shown = False

    def _show_indicator(self, text: str) -> None:
        text = f"{text} · {self.status_note}" if self.status_note else text
        if self._editor is not None:
            self._editor.set_status(text)
            return
        if not self._is_interactive():
            return
        self._clear_indicator()
        if not self._at_line_start:
            return
        self._write(self._style(f"…{text}", DIM), track=False)
        self._indicator = True

    def _clear_indicator(self) -> None:
        if self._editor is not None:
            self._editor.set_status(None)
        if self._indicator:
            self._indicator = False
            self._write(CLEAR_LINE, track=False)

    def _is_interactive(self) -> bool:
        if self.interactive is not None:
            return self.interactive
        return is_terminal(self._out())

    def _style(self, text: str, code: str) -> str:
        if not self._is_interactive() or os.environ.get("NO_COLOR"):
            return text
        return f"{code}{text}{RESET}"

    def _out(self) -> TextIO:
        return self.output if self.output is not None else sys.stdout

    def _write(self, text: str, *, track: bool = True) -> None:
        if not text:
            return
        if self._editor is not None:
            if track:
                self._editor.write(text)
                self._at_line_start = self._editor.at_line_start
            return
        out = self._out()
        with contextlib.suppress(ValueError, OSError):  # closed or broken terminal
            out.write(text)
            out.flush()
        if track:
            self._at_line_start = text.endswith("\n")
