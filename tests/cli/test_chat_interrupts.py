"""Ctrl-C in `hookline chat` in a real terminal (tmux), against a real OpenAI-compatible
server (tests/openai_server.py) whose first reply streams three words and then stalls:
the cancelled reply is shown once and never carried into the next one, in Markdown and
plain modes; the next request tells the model the turn was interrupted; a second Ctrl-C
right after the cancel asks before leaving; a turn whose reply is shown is left to
finish (a plugin installed through an entry point still handles its reply)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from openai_server import OpenAIServer, Reply
from plugin_site import install_plugin
from terminal_support import TMUX, Terminal, clean_env, last_line

from hookline.cli.chat import DOUBLE_PRESS_SECONDS

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")

STALLED = Reply(text=["beta1 ", "beta2 ", "beta3"], hold=True)
"""Streams its words, then keeps the stream open until the client goes."""


def terminal_for(tmp_path: Path, server: OpenAIServer, **extra: str) -> Terminal:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    return Terminal(workspace, {**clean_env(tmp_path / "home"),
                                "HOOKLINE_MODEL": "openai-compatible:test-model",
                                "HOOKLINE_API_BASE": server.base_url,
                                "HOOKLINE_API_KEY": "sk-test", **extra})


def at_prompt(screen: str) -> bool:
    return last_line(screen) == "you>"


def first_turn_stalled(terminal: Terminal, session: str, *options: str) -> None:
    """A chat whose first turn has streamed its words and now waits (STALLED)."""
    terminal.chat("c", "--session", session, *options)
    terminal.wait_for(at_prompt, "the prompt")
    terminal.type("first")
    terminal.wait_for(lambda s: "beta3" in s, "the streamed words")


@pytest.mark.parametrize("mode", ["markdown", "plain"])
def test_a_cancelled_reply_never_leaks_into_the_next_and_the_model_is_told(
        tmp_path: Path, mode: str) -> None:
    with OpenAIServer([STALLED, Reply(text="Second reply.")]) as server:
        terminal = terminal_for(tmp_path, server)
        try:
            first_turn_stalled(terminal, "c", *(["--plain"] if mode == "plain" else []))
            terminal.keys("C-c")
            terminal.wait_for(lambda s: "(turn cancelled)" in s, "the cancel")
            terminal.type("second")
            screen = terminal.wait_for(lambda s: "Second reply." in s and at_prompt(s),
                                       "the second reply")
        finally:
            terminal.close()
    lines = [line.strip() for line in screen.splitlines()]
    assert "Second reply." in lines, screen  # alone on its line: nothing carried over
    assert screen.count("beta3") == 1, screen  # the cancelled words, shown once
    assert lines.index("(turn cancelled)") > next(
        i for i, line in enumerate(lines) if "beta3" in line), screen
    sent = [(m["role"], m["content"]) for m in json.loads(server.requests[1].raw)["messages"]]
    assert sent[1:] == [
        ("user", "first"), ("assistant", "beta1 beta2 beta3"),
        ("assistant", "[turn interrupted: the user cancelled it before it finished]"),
        ("user", "second")], sent


@pytest.mark.parametrize("mode", ["markdown", "plain"])
def test_a_cut_stream_shows_its_partial_reply_once(tmp_path: Path, mode: str) -> None:
    """The provider's stream ends without its end (a dropped connection): the words that
    came, once (the partial reply's outbound is what streamed), then the error line; none
    of them carried into the next turn's reply."""
    cut = Reply(text=["partial ", "answer ", "cut"], finish=False)
    with OpenAIServer([cut, Reply(text="the next reply")]) as server:
        terminal = terminal_for(tmp_path, server, HOOKLINE_MAX_RETRIES="0")
        try:
            terminal.chat("c", "--session", "cut", *(["--plain"] if mode == "plain" else []))
            terminal.wait_for(at_prompt, "the prompt")
            terminal.type("hello")
            terminal.wait_for(lambda s: "error:" in s and at_prompt(s), "the error")
            terminal.type("again")
            terminal.wait_for(lambda s: "the next reply" in s and at_prompt(s),
                              "the next reply")
            time.sleep(0.5)  # the first turn's late outbounds, if any, have come by now
            screen = terminal.screen()
        finally:
            terminal.close()
    lines = [line.strip() for line in screen.splitlines() if line.strip()]
    start = lines.index("you> hello")
    assert lines[start + 1] == "partial answer cut", screen
    assert lines[start + 2].startswith("error: ") and lines[start + 3] == "you> again", screen
    assert lines[start + 4:] == ["the next reply", "you>"], screen


def test_a_second_ctrl_c_right_after_a_cancel_asks_before_leaving(tmp_path: Path) -> None:
    with OpenAIServer([STALLED, Reply(text="still here")]) as server:
        terminal = terminal_for(tmp_path, server)
        try:
            first_turn_stalled(terminal, "twice")
            terminal.keys("C-c")
            terminal.keys("C-c")  # the habit of pressing twice
            screen = terminal.wait_for(lambda s: "(press Ctrl-C again to quit)" in s,
                                       "the question")
            assert "CHAT-EXIT" not in screen
            terminal.type("again")
            terminal.wait_for(lambda s: "still here" in s and at_prompt(s), "a reply")
            # The prompt stays on screen while a turn runs, and its last words show a
            # moment before its model has finished: a Ctrl-C then cancels it. Pressed long
            # after the cancel (past the double press), with the model done, it leaves.
            time.sleep(2 * DOUBLE_PRESS_SECONDS)
            terminal.keys("C-c")
            terminal.wait_for(lambda s: "CHAT-EXIT=0" in s, "the exit")
        finally:
            terminal.close()


def test_a_line_queued_behind_a_cancelled_turn_says_why_it_was_dropped(
        tmp_path: Path) -> None:
    with OpenAIServer([STALLED]) as server:
        terminal = terminal_for(tmp_path, server)
        try:
            first_turn_stalled(terminal, "queued", "--plain")
            terminal.type("a queued line")
            terminal.wait_for(lambda s: "(queued:" in s, "the queued note")
            terminal.keys("C-c")
            screen = terminal.wait_for(lambda s: "(turn cancelled)" in s and at_prompt(s),
                                       "the cancel")
        finally:
            terminal.close()
    assert "(not answered (cancelled with Ctrl-C): a queued line)" in screen, screen
    assert "session was quit" not in screen


def test_a_line_steered_into_a_turn_then_cancelled_says_so_at_once(tmp_path: Path) -> None:
    """The running turn took the steered line into its next model step; Ctrl-C cancels
    that step: the line is said to be unanswered then, not at the end of the chat."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    tool = {"name": "shell", "arguments": {"command": f"touch {workspace / 'ran'}; sleep 2"}}
    with OpenAIServer([Reply(tool_calls=[tool]), STALLED]) as server:
        terminal = terminal_for(tmp_path, server)
        try:
            terminal.chat("c", "--session", "steered", "--plain")
            terminal.wait_for(at_prompt, "the prompt")
            terminal.type("first")
            deadline = time.monotonic() + 30
            while not (workspace / "ran").exists():
                assert time.monotonic() < deadline, "the tool never ran"
                time.sleep(0.05)
            terminal.type(">> also note 8888")
            terminal.wait_for(lambda s: "beta3" in s, "the step that took the steered line")
            assert "also note 8888" in json.dumps(server.requests[1].messages)
            terminal.keys("C-c")
            screen = terminal.wait_for(lambda s: "(turn cancelled)" in s and at_prompt(s),
                                       "the cancel")
        finally:
            terminal.close()
    assert "(not answered (cancelled with Ctrl-C): >> also note 8888)" in screen, screen


RECORDER = """
import os
from pathlib import Path

import anyio

from hookline.kernel import hookimpl

MARKS = Path(os.environ["RECORDER_DIR"])


class Recorder:
    def __init__(self, framework):
        self.framework = framework

    @hookimpl(trylast=True)  # after the chat's own: the reply is on screen
    async def dispatch_outbound(self, message):
        (MARKS / "finishing").write_text("1")
        await anyio.sleep(2)
        (MARKS / "recorded").write_text(message["content"])
        return True
"""


def test_ctrl_c_after_the_reply_leaves_and_lets_the_turn_finish(tmp_path: Path) -> None:
    site = install_plugin(tmp_path / "site", "recorder", RECORDER, "recorder = recorder:Recorder")
    with OpenAIServer([Reply(text="The whole reply.")]) as server:
        terminal = terminal_for(tmp_path, server, PYTHONPATH=str(site),
                                RECORDER_DIR=str(tmp_path))
        try:
            terminal.chat("finishing")
            terminal.wait_for(at_prompt, "the prompt")
            terminal.type("hello")
            terminal.wait_for(lambda s: "The whole reply." in s, "the reply")
            deadline = time.monotonic() + 30
            while not (tmp_path / "finishing").exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert not (tmp_path / "recorded").exists()  # the turn is still finishing
            terminal.keys("C-c")
            screen = terminal.wait_for(lambda s: "CHAT-EXIT=" in s, "the exit")
        finally:
            terminal.close()
    assert "CHAT-EXIT=0" in screen and "(turn cancelled)" not in screen, screen
    assert (tmp_path / "recorded").read_text() == "The whole reply."


def test_a_retry_wait_shows_its_line_and_a_counting_status(tmp_path: Path) -> None:
    limited = Reply.failure(429, "Rate limit reached", headers={"Retry-After": "4"})
    with OpenAIServer([limited, Reply(text="after the wait")]) as server:
        terminal = terminal_for(tmp_path, server)
        try:
            terminal.chat("c", "--session", "retry")
            terminal.wait_for(at_prompt, "the prompt")
            terminal.type("hello")
            waiting = terminal.wait_for(
                lambda s: "…waiting 4 s to retry 2s" in s, "the status line counting the wait")
            screen = terminal.wait_for(lambda s: "after the wait" in s and at_prompt(s),
                                       "the reply after the wait")
        finally:
            terminal.close()
    assert "[retry] HTTP 429: waiting 4.0 s, then attempt 2 of 3" in waiting, waiting
    assert "waiting 4 s to retry" not in screen, "the status goes when the reply comes"
