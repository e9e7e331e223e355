"""`hookline chat` renders each model step's Markdown in a terminal (tmux) once the step
ends, with the prompt redrawn below it; never with --plain or when piped. Escape
sequences in a reply stay escaped either way. Real console scripts, scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from terminal_support import TMUX, Terminal, clean_env, last_line
from test_chat_piped import chat
from test_run_markdown import REPLY

FIRST_STEP = ["Let me **look", "** at it."]
"""Streamed in two deltas: the emphasis closes in the second one."""


def script(tmp_path: Path) -> str:
    path = tmp_path / "chat-markdown.json"
    path.write_text(json.dumps([
        {"text": FIRST_STEP, "tool_calls": [{"name": "shell",
                                             "arguments": {"command": "echo looked"}}]},
        {"text": REPLY},
    ]))
    return f"scripted:{path}"


def at_prompt(screen: str) -> bool:
    return last_line(screen) == "you>"


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_chat_renders_each_step_in_a_terminal_and_not_with_plain(
        terminal: Terminal, tmp_path: Path) -> None:
    terminal.env["HOOKLINE_MODEL"] = script(tmp_path)
    terminal.chat("md", "--session", "md")
    terminal.wait_for(lambda s: "hookline chat" in s and at_prompt(s), "the banner")
    terminal.type("check it")
    # The rendered list (the preview shows `- second point` as written).
    screen = terminal.wait_for(lambda s: "• second point" in s and at_prompt(s), "the reply")
    lines = [line.rstrip() for line in screen.splitlines()]
    step = next(i for i, line in enumerate(lines) if "Let me look at it." in line)
    call = next(i for i, line in enumerate(lines) if line.startswith("[tool] shell"))
    assert step < call, "the first step is printed, rendered, before its tool call"
    assert "**" not in screen and "# Findings" not in screen, screen
    assert "Findings" in screen and "• first point" in screen, screen
    assert "\\x1b]0;owned" in screen, "the escape sequence is shown, not obeyed"
    assert screen.count("Let me look at it.") == 1, "the preview leaves no copy behind"
    terminal.type("/quit")
    terminal.wait_for(lambda s: "CHAT-EXIT=0" in s, "the exit")

    terminal.env["HOOKLINE_MODEL"] = script(tmp_path)
    terminal.chat("plain", "--session", "plain", "--plain")
    terminal.wait_for(lambda s: "hookline chat" in s and at_prompt(s), "the plain banner")
    terminal.type("check it")
    screen = terminal.wait_for(lambda s: "- second point" in s and at_prompt(s),
                               "the plain reply")
    assert "Let me **look** at it." in screen and "# Findings" in screen, screen
    assert "- first point" in screen


def test_piped_chat_prints_the_reply_as_written(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = {**clean_env(tmp_path / "home"), "HOOKLINE_MODEL": script(tmp_path)}
    out = chat(["check it"], env, workspace, "--session", "piped")
    assert "Let me **look** at it.\n" in out
    assert "# Findings\n\nThe **add** function is `wrong`.\n\n- first point\n" in out
