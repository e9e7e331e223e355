"""The chat's replies as Markdown in a terminal: how a streamed reply is shown.

Rendered Markdown cannot be printed as it streams: a `**` or a code fence changes how
the text before it looks once its closing half arrives, and the lines above the line
editor's prompt are in the scrollback, where they cannot be redrawn. So, as aider keeps
a live window under its stable lines, the reply's text is kept while it streams and its
last lines are shown raw in the line editor's header (which is redrawn, never scrolled
back); when the model's step ends (its tool calls come, or the reply is complete), the
text is rendered once with rich and printed above the prompt, and the preview goes.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["PREVIEW_LINES", "MarkdownReply"]

PREVIEW_LINES = 8
"""Lines of the streaming text shown under the finished output (its last ones)."""


class MarkdownReply:
    """The text of one streaming step. `show_preview(text or None)` draws the preview
    (the line editor's header); `width()` is the terminal's width for rendering."""

    def __init__(self, show_preview: Callable[[str | None], None],
                 width: Callable[[], int]) -> None:
        self.show_preview = show_preview
        self.width = width
        self.text = ""

    def add(self, delta: str) -> None:
        """More of the reply (already escaped for the terminal): kept and previewed."""
        self.text += delta
        self.show_preview(self._preview())

    def take(self, text: str | None = None) -> str:
        """The kept text (or `text`) rendered for the terminal, ending with a newline
        ("" when there is none); the preview is cleared and the text forgotten."""
        source, self.text = (self.text if text is None else text), ""
        self.show_preview(None)
        if not source.strip():
            return ""
        from ...terminal.markdown_view import markdown_text

        return markdown_text(source, self.width())

    def _preview(self) -> str | None:
        width = self.width()
        lines = self.text.rstrip("\n").split("\n")[-PREVIEW_LINES:]
        shown = [line if len(line) <= width else line[:width - 1] + "…" for line in lines]
        return "\n".join(shown) if any(line.strip() for line in shown) else None
