"""A reply rendered as Markdown for a terminal (headings, emphasis, lists, code blocks).

Only `run` and `chat` on a terminal use it, and only then is rich imported, so start-up
and piped output pay nothing; piped output and `--plain` get the text as the model gave
it. The text is escaped first (`terminal_text`): rich passes an escape sequence inside
the text on to the terminal, and a reply must never move the cursor or retitle a window.
"""

from __future__ import annotations

from typing import Any

from .tool_notes import terminal_text

__all__ = ["markdown_text", "render_markdown"]


def render_markdown(text: str, out: Any) -> None:
    """Write `text` to the terminal `out` as rendered Markdown."""
    from rich.console import Console

    console = Console(file=out, highlight=False, emoji=False)
    console.print(_markdown(text))


def markdown_text(text: str, width: int) -> str:
    """`text` rendered as Markdown for a terminal `width` columns wide: lines with the
    terminal's escape sequences for styles, each ending with a newline (for a writer
    that is not the terminal itself, such as the chat's line editor). Colour follows
    the environment (`NO_COLOR`, `TERM`) as rich reads it."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=max(20, width),
                      highlight=False, emoji=False)
    console.print(_markdown(text))
    return buffer.getvalue()


def _markdown(text: str) -> Any:
    from rich.markdown import Markdown

    return Markdown(terminal_text(text), hyperlinks=False)
