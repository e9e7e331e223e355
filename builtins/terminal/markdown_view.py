"""A reply rendered as Markdown for a terminal (headings, emphasis, lists, code blocks).

Only `run` and `chat` on a terminal use it, and only then is rich imported, so start-up
and piped output pay nothing; piped output and `--plain` get the text as the model gave
it. The text is escaped first (`terminal_text`): rich passes an escape sequence inside
the text on to the terminal, and a reply must never move the cursor or retitle a window.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from .tool_notes import terminal_text

__all__ = ["markdown_text", "render_markdown"]


def render_markdown(text: str, out: Any) -> None:
    """Write `text` to the terminal `out` as rendered Markdown."""
    from rich.console import Console

    width = Console(file=out).width
    out.write(markdown_text(text, width, colour=None))
    out.flush()


def markdown_text(text: str, width: int, colour: bool | None = True) -> str:
    """`text` rendered as Markdown for a terminal `width` columns wide: lines with the
    terminal's escape sequences for styles (with `colour` None, as the environment says:
    `NO_COLOR`, `TERM`), each ending with a newline, none with trailing spaces (a line
    copied from the terminal is what was written). Code is neither wrapped nor indented:
    a long command copied from it must run as it is, so the terminal folds it."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=colour, width=max(20, width),
                      highlight=False, emoji=False)
    console.print(_markdown(text), crop=False)
    return _TRAILING_SPACES.sub(r"\1", buffer.getvalue())


_TRAILING_SPACES = re.compile(r"[ ]+((?:\x1b\[[0-9;]*m)*)$", re.MULTILINE)


def _markdown(text: str) -> Any:
    from rich.markdown import CodeBlock, Markdown

    class Code(CodeBlock):
        """A code block highlighted as rich does, but never wrapped nor padded."""

        def __rich_console__(self, console: Any, options: Any) -> Any:
            from rich.syntax import Syntax

            code = str(self.text).rstrip()
            highlighted = Syntax(code, self.lexer_name, theme=self.theme).highlight(code)
            highlighted.no_wrap, highlighted.overflow = True, "ignore"
            yield highlighted

    class Reply(Markdown):
        elements: ClassVar[dict[str, Any]] = {**Markdown.elements, "fence": Code,
                                              "code_block": Code}

    return Reply(_line_breaks_kept(terminal_text(text)), hyperlinks=False, justify="default")


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _line_breaks_kept(text: str) -> str:
    """Each line followed by another ends in a hard line break (two spaces), outside
    fenced code: a reply's single newlines (a poem, an address, steps one per line) stay
    newlines, as chat interfaces show them, where CommonMark would join the lines of a
    paragraph into one."""
    lines = text.split("\n")
    fence = ""
    for index, line in enumerate(lines[:-1]):
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1).startswith(fence):
                fence = ""
        elif opened:
            fence = opened.group(1)
        elif line.strip() and lines[index + 1].strip():
            lines[index] = line + "  "
    return "\n".join(lines)
