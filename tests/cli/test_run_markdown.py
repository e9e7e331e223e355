"""`hookline run` renders a whole reply's Markdown on a terminal (tmux), and never when
piped or with --plain; escape sequences in the reply stay escaped either way."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from terminal_support import TMUX, Terminal
from test_cli import hookline

REPLY = ("# Findings\n\nThe **add** function is `wrong`.\n\n- first point\n- second point\n"
         "\x1b]0;owned\x07 \x1b[31mred\x1b[0m")


def script(tmp_path: Path) -> str:
    path = tmp_path / "markdown.json"
    path.write_text(json.dumps([{"text": REPLY}]))
    return f"scripted:{path}"


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_a_whole_reply_is_rendered_on_a_terminal(terminal: Terminal, tmp_path: Path) -> None:
    terminal.env["HOOKLINE_MODEL"] = script(tmp_path)
    terminal.start("md", "run", "check it")
    screen = terminal.wait_for(lambda s: "EXIT=" in s, "the end of the run")
    assert "Findings" in screen and "# Findings" not in screen, screen
    assert "add" in screen and "**add**" not in screen
    assert "• first point" in screen and "- first point" not in screen
    assert "\\x1b]0;owned" in screen, "the escape sequence is shown, not obeyed"

    terminal.env["HOOKLINE_MODEL"] = script(tmp_path)
    terminal.start("plain", "run", "--plain", "check it")
    screen = terminal.wait_for(lambda s: "EXIT=" in s, "the end of the plain run")
    assert "# Findings" in screen and "**add**" in screen


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_code_wider_than_the_terminal_copies_as_written(
        terminal: Terminal, tmp_path: Path) -> None:
    """The terminal folds a long code line (tmux joins it back, as a copy does), with no
    indent before it and no spaces after any line."""
    command = "pip install " + " ".join(f"package-{n}" for n in range(20))
    path = tmp_path / "code.json"
    path.write_text(json.dumps([{"text": f"Run:\n\n```sh\n{command}\n```\n\nThen test."}]))
    terminal.env["HOOKLINE_MODEL"] = f"scripted:{path}"
    terminal.start("code", "run", "how?")
    screen = terminal.wait_for(lambda s: "EXIT=" in s, "the end of the run")
    assert len(command) > 160 and f"\n{command}\n" in screen, screen
    assert [line for line in screen.splitlines() if line.endswith(" ")] == []


def test_piped_output_is_the_text_as_written(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env.update(HOOKLINE_HOME=str(tmp_path / "home"), HOOKLINE_MODEL=script(tmp_path))
    (tmp_path / "workspace").mkdir()
    out = hookline("run", "check it", env=env, cwd=tmp_path / "workspace")
    assert out.returncode == 0, out.stderr
    assert out.stdout == REPLY + "\n"


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_single_newlines_stay_newlines(terminal: Terminal, tmp_path: Path) -> None:
    """A reply's lines (a poem, steps one per line) are not joined into one paragraph, as
    CommonMark would; fenced code stays as written."""
    path = tmp_path / "lines.json"
    path.write_text(json.dumps([{"text": "Roses are red,\nviolets are blue.\n\n```\na\nb\n```"}]))
    terminal.env["HOOKLINE_MODEL"] = f"scripted:{path}"
    terminal.start("lines", "run", "a poem")
    screen = terminal.wait_for(lambda s: "EXIT=" in s, "the end of the run")
    assert "Roses are red,\nviolets are blue." in screen, screen
    assert "\na\nb\n" in screen and "Roses are red, violets" not in screen
