"""A git repository a command makes cannot be protected from the commands of the same
session, so hookline names it: in the chat, after the turn whose command made it (once),
and at the end of `hookline run`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from terminal_support import HOOKLINE, TMUX, Terminal, clean_env, last_line

MADE = "commands or file tools run in this workspace made"


def tool(command: str) -> str:
    return "/tool shell " + json.dumps({"command": command})


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_the_chat_names_a_repository_after_the_turn_that_made_it(terminal: Terminal) -> None:
    terminal.chat("made")
    terminal.wait_for(lambda s: last_line(s) == "you>", "the prompt")
    terminal.type(tool("git init -q sub && echo made-it"))
    screen = terminal.wait_for(lambda s: MADE in s and last_line(s) == "you>",
                               "the warning after the turn")
    assert f"warning: {MADE} sub/.git" in screen
    terminal.type(tool("echo again"))
    terminal.wait_for(lambda s: s.count("again") >= 3 and last_line(s) == "you>",
                      "the second turn")
    terminal.type("/quit")
    screen = terminal.wait_for(lambda s: "CHAT-EXIT=0" in s, "the end of the chat")
    assert screen.count(MADE) == 1, screen  # said once, not again at the end


def test_run_names_it_once_at_the_end(tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    env = {**clean_env(tmp_path / "home"), "HOOKLINE_MODEL": "offline"}
    done = subprocess.run([str(HOOKLINE), "run", tool("git init -q made")], env=env,
                          cwd=tmp_path / "workspace", capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(MADE) == 1 and f"{MADE} made/.git" in done.stderr


def test_run_names_what_git_would_run_in_a_repository_made(tmp_path: Path) -> None:
    """A command that makes a repository may give it a hook: `hookline run` names it, on
    a line of its own, for the user to remove before running git there."""
    (tmp_path / "workspace").mkdir()
    env = {**clean_env(tmp_path / "home"), "HOOKLINE_MODEL": "offline"}
    plant = ("git init -q made && printf '#!/bin/sh\\ntouch /tmp/owned\\n' > "
             "made/.git/hooks/post-checkout && chmod +x made/.git/hooks/post-checkout")
    done = subprocess.run([str(HOOKLINE), "run", tool(plant)], env=env,
                          cwd=tmp_path / "workspace", capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert ("warning: made/.git, which commands made, has git run with your rights: hook "
            "post-checkout. Unless you set these up yourself") in done.stderr, done.stderr
