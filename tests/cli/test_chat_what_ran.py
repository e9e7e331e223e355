"""What `hookline chat` shows of the work behind a reply, as `hookline run` does: a line per
tool call and per result, a command's first lines, the diff of each file tool's change;
plain when piped, in colour in a terminal (tmux). Real console scripts on the scripted
model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from terminal_support import TMUX, Terminal, last_line
from test_chat_piped import chat
from test_run_what_ran import BUGGY, FIX, TWENTY, fixing_script, workspace_and_env

from hookline.builtins.terminal import call_line

DIFF = ["--- calc.py", "+++ calc.py", "@@ -1,5 +1,5 @@", " def add(a, b):",
        "-    return a - b", "+    return a + b", " ", " ", " def sub(a, b):"]


def test_piped_chat_shows_the_call_its_result_and_a_plain_diff(tmp_path: Path) -> None:
    workspace, env = workspace_and_env(tmp_path)
    env["HOOKLINE_MODEL"] = fixing_script(tmp_path)
    (workspace / "calc.py").write_text(BUGGY)
    out = chat(["fix the bug in calc.py"], env, workspace, "--session", "fix")
    assert (workspace / "calc.py").read_text() == BUGGY.replace("a - b", "a + b", 1)
    lines = out.splitlines()
    start = lines.index(call_line({"name": "fs_edit", "arguments": json.dumps(FIX)}))
    assert lines[start + 1] == ("[tool] fs_edit ok (1 line, 34 chars): replaced 1 occurrence "
                                "in 'calc.py'")
    assert lines[start + 2:start + 2 + len(DIFF)] == DIFF
    assert lines[start + 2 + len(DIFF)] == "Fixed add()."
    assert "\x1b" not in out, "piped output carries no escape sequence"


def test_piped_chat_shows_a_commands_first_lines_as_run_does(tmp_path: Path) -> None:
    workspace, env = workspace_and_env(tmp_path)
    lines = chat([TWENTY], env, workspace, "--session", "output").splitlines()
    start = lines.index("[tool] shell ok (24 lines, 98 chars): exit code: 0")
    assert lines[start + 1:start + 10] == [
        "  --- stdout ---", *(f"  {n}" for n in range(1, 8)), "  ... 15 more lines"]


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_chat_in_a_terminal_shows_the_diff_in_colour(tmp_path: Path) -> None:
    workspace, env = workspace_and_env(tmp_path)
    env["HOOKLINE_MODEL"] = fixing_script(tmp_path)
    (workspace / "calc.py").write_text(BUGGY)
    terminal = Terminal(workspace, env)
    try:
        terminal.chat("diff", "--session", "diff")
        terminal.wait_for(lambda s: "hookline chat" in s and last_line(s) == "you>", "banner")
        terminal.type("fix the bug in calc.py")
        # The reply is printed once rendered (`Fixed add()` is also its preview, drawn
        # in the prompt's header at once, while printed lines reach the screen a little
        # later): wait for the diff and the reply below it.
        screen = terminal.wait_for(
            lambda s: "--- calc.py" in s and s.rfind("Fixed add().") > s.find("--- calc.py")
            and last_line(s) == "you>", "the reply below the diff")
        lines = [line.rstrip() for line in screen.splitlines()]
        start = lines.index("--- calc.py")
        assert lines[start:start + len(DIFF)] == [line.rstrip() for line in DIFF]
        coloured = terminal.tmux("capture-pane", "-p", "-e", "-t", terminal.target,
                                 "-S", "-3000")
        assert "\x1b[31m-    return a - b" in coloured, coloured
        assert "\x1b[32m+    return a + b" in coloured, coloured
        terminal.type("/quit")
        terminal.wait_for(lambda s: "CHAT-EXIT=0" in s, "the exit")
    finally:
        terminal.close()
