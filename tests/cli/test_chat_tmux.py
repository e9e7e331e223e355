"""`hookline chat` in a real terminal: tmux runs the console script, the test types keys
and reads the screen (capture-pane), polling each expectation up to a deadline
(`terminal_support.Terminal`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from terminal_support import TMUX, Terminal, clean_env, last_line

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")

PROMPT = "you>"


def at_prompt(screen: str) -> bool:
    return last_line(screen) == PROMPT


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    env = clean_env(tmp_path / "home")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    term = Terminal(workspace, env)
    try:
        yield term
    finally:
        term.close()


def test_chat_streams_cancels_with_ctrl_c_and_keeps_history(terminal: Terminal) -> None:
    terminal.chat("first", "--session", "tmux-test")
    screen = terminal.wait_for(lambda s: "hookline chat" in s and at_prompt(s), "the banner")
    assert "model offline" in screen and "session tmux-test" in screen

    terminal.type("hello from tmux")
    terminal.wait_for(lambda s: 'You said: "hello from tmux"' in s and at_prompt(s),
                      "the offline reply")

    # A tool that would run for 30 s, interrupted by Ctrl-C while it runs.
    terminal.type('/tool shell {"command": "sleep 30"}')
    terminal.wait_for(lambda s: '[tool] shell {"command": "sleep 30"}' in s
                      and "running shell" in s, "the tool call and the waiting indicator")
    interrupted = time.monotonic()
    terminal.keys("C-c")
    terminal.wait_for(lambda s: "(turn cancelled)" in s and at_prompt(s),
                      "the prompt after Ctrl-C", timeout=15)
    assert time.monotonic() - interrupted < 15, "Ctrl-C did not stop the 30 s tool"

    terminal.type("still there?")
    screen = terminal.wait_for(lambda s: 'You said: "still there?"' in s and at_prompt(s),
                               "a reply after the cancelled turn")
    assert "CHAT-EXIT" not in screen

    terminal.type("/quit")
    terminal.wait_for(lambda s: "CHAT-EXIT=0" in s, "a clean exit after /quit")

    # Same session, new process: the tape remembers the first one.
    terminal.chat("second", "--session", "tmux-test")
    terminal.wait_for(lambda s: "hookline chat" in s and at_prompt(s), "the second banner")
    terminal.type('/tool tape_search {"query": "hello from tmux"}')
    screen = terminal.wait_for(lambda s: "Tool `tape_search` returned" in s and at_prompt(s),
                               "the tape search result")
    assert '"content": "hello from tmux"' in screen  # the first process's user message
    terminal.type('/tool tape_search {"query": "cancelled"}')
    screen = terminal.wait_for(lambda s: s.count("Tool `tape_search` returned") == 2
                               and at_prompt(s), "the second tape search result")
    assert '"status": "cancelled"' in screen  # the interrupted run was recorded as cancelled

    terminal.keys("C-c")  # at an empty prompt: leave
    terminal.wait_for(lambda s: "CHAT-EXIT=0" in s, "a clean exit after Ctrl-C at the prompt")
