"""The chat's Markdown replies (`MarkdownReply`): the streaming text is previewed (its last
lines, cut to the terminal's width) and rendered once, when the step ends."""

from __future__ import annotations

import pytest

from hookline.builtins.channels.cli.markdown_reply import PREVIEW_LINES, MarkdownReply


def test_the_preview_shows_the_last_lines_and_the_end_renders_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")  # rich styles only a capable terminal
    monkeypatch.delenv("NO_COLOR", raising=False)
    previews: list[str | None] = []
    reply = MarkdownReply(previews.append, lambda: 30)
    reply.add("# Title\n\nsome **bold")
    assert previews[-1] == "# Title\n\nsome **bold"
    reply.add("** words\n" + "".join(f"line {n}\n" for n in range(20)) + "x" * 50)
    shown = previews[-1]
    assert shown is not None
    assert shown.split("\n") == [f"line {n}" for n in range(20 - PREVIEW_LINES + 1, 20)] + [
        "x" * 29 + "…"]
    rendered = reply.take()
    assert previews[-1] is None and reply.text == ""
    plain = _plain(rendered)
    assert "Title" in plain and "bold words" in plain and "**" not in plain
    assert "\x1b[1mbold\x1b[0m" in rendered, "styles reach the terminal as escapes"
    assert rendered.endswith("\n")
    assert all(len(line) <= 30 for line in plain.split("\n"))
    assert reply.take() == "", "nothing kept: nothing printed"


def test_a_reply_given_whole_replaces_what_streamed() -> None:
    reply = MarkdownReply(lambda text: None, lambda: 40)
    reply.add("draft")
    rendered = reply.take("the *final* reply")
    plain = _plain(rendered)
    assert "final" in plain and "*" not in plain and "draft" not in plain


def _plain(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)
