"""The reply rendered as Markdown on a terminal (headings, emphasis, lists, code blocks).

Only `run` and `chat` on a terminal use it, and only then is rich imported, so start-up
and piped output pay nothing; piped output and `--plain` get the text as the model gave
it. The text is escaped first (`terminal_text`): rich passes an escape sequence inside
the text on to the terminal, and a reply must never move the cursor or retitle a window.
"""

from typing import Any

from hookline.builtins.agent import terminal_text

__all__ = ["render_markdown"]


def render_markdown(text: str, out: Any) -> None:
    """Write `text` to the terminal `out` as rendered Markdown."""
    from rich.console import Console
    from rich.markdown import Markdown

    console = Console(file=out, highlight=False, emoji=False)
    console.print(Markdown(terminal_text(text), hyperlinks=False))
