"""`hookline run` without --stream shows a live status line on a terminal's stderr (step,
running tool, elapsed), erased before the reply prints; piped, stderr gets the tool lines
alone, with no status and no escape sequence."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from openai_server import OpenAIServer, Reply
from terminal_support import TMUX, Terminal, clean_env
from test_cli import hookline

SLOW_TOOL = '/tool shell {"command": "sleep 3; echo finished"}'


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_the_status_line_shows_the_running_tool_then_disappears(terminal: Terminal) -> None:
    terminal.start("status", "run", "--no-stream", "--plain", SLOW_TOOL)
    screen = terminal.wait_for(lambda s: "running shell" in s, "the status line")
    assert re.search(r"…step 1: running shell \d+s", screen)
    terminal.wait_for(lambda s: re.search(r"running shell [12]s", s) is not None,
                      "the clock moving while the tool runs")
    screen = terminal.wait_for(lambda s: "EXIT=0" in s, "the end of the run")
    assert "…step" not in screen and "running shell" not in screen, "the status stayed"
    # The status line was erased before each line printed: the tool lines, then the reply.
    assert screen.lstrip().startswith('[tool] shell {"command": "sleep 3; echo finished"}\n'
                                      '[tool] shell ok (3 lines, 36 chars): exit code: 0\n'
                                      '  --- stdout ---\n'
                                      '  finished\n'
                                      '[offline model] Calling tool `shell`.'), screen
    assert "finished" in screen


def test_piped_stderr_gets_the_tool_lines_but_no_status(tmp_path: Path) -> None:
    env = {**clean_env(tmp_path / "home"), "HOOKLINE_MODEL": "offline"}  # no notice either
    (tmp_path / "workspace").mkdir()
    done = hookline("run", "--no-stream", '/tool shell {"command": "sleep 1; echo finished"}',
                    env=env,
                    cwd=tmp_path / "workspace")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        '[tool] shell {"command": "sleep 1; echo finished"}',
        "[tool] shell ok (3 lines, 36 chars): exit code: 0",
        "  --- stdout ---",
        "  finished"]
    assert "\x1b" not in done.stdout + done.stderr and "…step" not in done.stderr
    assert "finished" in done.stdout


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_a_warning_said_mid_turn_starts_its_own_line(tmp_path: Path) -> None:
    """The offline model's notice is logged once the status line shows: the line is erased
    first, so the warning does not run on from "…step 1: thinking 0s"."""
    (tmp_path / "workspace").mkdir()
    terminal = Terminal(tmp_path / "workspace", clean_env(tmp_path / "home"))
    try:
        terminal.start("notice", "run", "--no-stream", "--plain", "hello")
        screen = terminal.wait_for(lambda s: "EXIT=0" in s, "the end of the run")
    finally:
        terminal.close()
    lines = screen.splitlines()
    assert any(line.startswith("warning: no model is configured") for line in lines), screen
    assert not any("…step" in line for line in lines), screen


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_a_retry_wait_shows_in_the_status_line(tmp_path: Path) -> None:
    limited = Reply.failure(429, "Rate limit reached", headers={"Retry-After": "4"})
    (tmp_path / "workspace").mkdir()
    with OpenAIServer([limited, Reply(text="after the wait")]) as server:
        terminal = Terminal(tmp_path / "workspace", {
            **clean_env(tmp_path / "home"), "HOOKLINE_MODEL": "openai-compatible:test-model",
            "HOOKLINE_API_BASE": server.base_url, "HOOKLINE_API_KEY": "sk-test"})
        try:
            terminal.start("retry", "run", "--no-stream", "--plain", "hello")
            waiting = terminal.wait_for(lambda s: "…step 1: waiting 4 s to retry 2s" in s,
                                        "the status line counting the wait")
            screen = terminal.wait_for(lambda s: "EXIT=0" in s, "the end of the run")
        finally:
            terminal.close()
    assert "[retry] HTTP 429: waiting 4.0 s, then attempt 2 of 3" in waiting, waiting
    assert "after the wait" in screen and "to retry" not in screen, screen
