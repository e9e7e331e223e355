"""`hookline chat` in a real terminal: tmux runs the console script, the test types keys
and reads the screen (capture-pane), polling each expectation up to a deadline
(`terminal_support.Terminal`)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from terminal_support import HOOKLINE, TMUX, Terminal, last_line

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")

PROMPT = "you>"


def at_prompt(screen: str) -> bool:
    return last_line(screen) == PROMPT




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
    # Replies are rendered as Markdown (`tape_search` in backticks is shown as code),
    # once complete: the waits below match the rendered text, never the preview.
    screen = terminal.wait_for(lambda s: "Tool tape_search returned" in s and at_prompt(s),
                               "the tape search result")
    # Replies are wrapped at spaces to the terminal's width: compare with spaces folded.
    assert '"content": "hello from tmux"' in flat(screen)  # the first process's user message
    terminal.type('/tool tape_search {"query": "cancelled"}')
    screen = terminal.wait_for(lambda s: s.count("Tool tape_search returned") == 2
                               and at_prompt(s), "the second tape search result")
    assert '"status": "cancelled"' in flat(screen)  # the interrupted run was recorded as cancelled

    terminal.keys("C-c")  # at an empty prompt: leave
    terminal.wait_for(lambda s: "CHAT-EXIT=0" in s, "a clean exit after Ctrl-C at the prompt")


def input_line(screen: str) -> str:
    """The prompt line being edited (the last one on screen)."""
    return last_line(screen)


def test_line_editor_recalls_edits_and_searches_history_across_restarts(
        terminal: Terminal, tmp_path: Path) -> None:
    terminal.chat("edit", "--session", "editing")
    terminal.wait_for(lambda s: "hookline chat" in s and at_prompt(s), "the banner")
    terminal.type("first line")
    terminal.wait_for(lambda s: 'You said: "first line"' in s and at_prompt(s), "reply 1")
    terminal.type("second message")
    terminal.wait_for(lambda s: 'You said: "second message"' in s and at_prompt(s), "reply 2")

    terminal.keys("Up")
    terminal.wait_for(lambda s: input_line(s) == "you> second message", "Up: the last line")
    terminal.keys("Up")
    terminal.wait_for(lambda s: input_line(s) == "you> first line", "Up again: the one before")
    terminal.keys("Left", "Left", "Left", "Left")
    terminal.tmux("send-keys", "-t", terminal.target, "-l", "edited ")
    terminal.wait_for(lambda s: input_line(s) == "you> first edited line", "Left, then typing")
    terminal.keys("Right", "Right", "Right", "Right", "Enter")
    terminal.wait_for(lambda s: 'You said: "first edited line"' in s and at_prompt(s),
                      "the edited line sent")

    # Alt-Enter (Esc, Enter) starts a second line of the same message.
    terminal.tmux("send-keys", "-t", terminal.target, "-l", "top half")
    terminal.keys("Escape", "Enter")
    terminal.type("bottom half")
    terminal.wait_for(lambda s: "(4 words, 2 lines)" in s and at_prompt(s),
                      "one message of two lines")
    terminal.type("/quit")
    terminal.wait_for(lambda s: "CHAT-EXIT=0" in s, "the exit")

    history = tmp_path / "home" / "chat_history"
    assert history.stat().st_mode & 0o777 == 0o600, "the history may hold secrets"

    # A new process, another session: the history is still there, and Ctrl-R finds in it.
    terminal.chat("again", "--session", "other")
    terminal.wait_for(lambda s: "hookline chat" in s and at_prompt(s), "the second banner")
    terminal.keys("Up")
    terminal.wait_for(lambda s: input_line(s) == "you> /quit", "Up after a restart")
    terminal.keys("C-u", "C-r")
    terminal.tmux("send-keys", "-t", terminal.target, "-l", "edited")
    terminal.wait_for(lambda s: "first edited line" in input_line(s), "Ctrl-R's match")
    terminal.keys("Enter")  # leaves the search with the match on the line
    terminal.wait_for(lambda s: input_line(s) == "you> first edited line", "the match kept")
    terminal.keys("Enter")
    terminal.wait_for(lambda s: s.count('You said: "first edited line"') == 1
                      and at_prompt(s), "the found line sent in the new session")


def test_a_line_typed_while_a_reply_runs_stays_in_the_prompt(terminal: Terminal) -> None:
    terminal.chat("typing", "--session", "typing")
    terminal.wait_for(lambda s: "hookline chat" in s and at_prompt(s), "the banner")
    terminal.type('/tool shell {"command": "sleep 2; echo slept"}')
    terminal.wait_for(lambda s: "running shell" in s, "the status line while the tool runs")
    terminal.tmux("send-keys", "-t", terminal.target, "-l", "typed meanwhile")
    screen = terminal.wait_for(lambda s: input_line(s) == "you> typed meanwhile",
                               "the typed text in the input line, below the status")
    assert screen.count("typed meanwhile") == 1
    terminal.wait_for(lambda s: "Tool shell returned" in s and "running shell" not in s,
                      "the tool's result, the status line gone")
    screen = terminal.wait_for(lambda s: input_line(s) == "you> typed meanwhile",
                               "the typed text still waiting in the prompt")
    assert screen.count("typed meanwhile") == 1, "the typed text was echoed into the reply"
    terminal.keys("Enter")
    terminal.wait_for(lambda s: 'You said: "typed meanwhile"' in s and at_prompt(s),
                      "the typed line sent when Enter was pressed")


def test_the_line_editor_needs_no_sniffio(terminal: Terminal, tmp_path: Path) -> None:
    """A plain install has no sniffio (anyio no longer needs it; only the test extra's
    trio brings it in): the chat must still edit lines in a terminal."""
    blocker = tmp_path / "without-sniffio" / "sniffio"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text(  # what importing a missing module raises
        "raise ModuleNotFoundError(\"No module named 'sniffio'\", name='sniffio')\n",
        encoding="utf-8")
    terminal.env["PYTHONPATH"] = str(blocker.parent)
    terminal.chat("plain", "--session", "plain")
    terminal.wait_for(lambda s: "hookline chat" in s and at_prompt(s), "the banner")
    terminal.tmux("send-keys", "-t", terminal.target, "-l", "edited")  # no Enter yet
    terminal.keys("Left", "Left", "BSpace")
    terminal.wait_for(lambda s: input_line(s) == "you> edied", "the line edited in place")
    terminal.keys("Enter")
    screen = terminal.wait_for(lambda s: 'You said: "edied"' in s and at_prompt(s), "the reply")
    assert "failed" not in screen, screen


SLOW = '/tool shell {"command": "sleep 2"}'
"""A turn that runs for two seconds: the lines typed meanwhile wait for it."""


def replied(text: str) -> str:
    return f'You said: "{text}"'


def flat(screen: str) -> str:
    """The screen with every run of white space made one space: the rendered reply is
    wrapped to the terminal's width at spaces, which a single-line match must not see."""
    return " ".join(screen.split())


def tape_said(terminal: Terminal, session: str) -> list[str]:
    """What the user said in the session, in the tape's order (`hookline sessions show`)."""
    assert HOOKLINE
    done = subprocess.run([HOOKLINE, "sessions", "show", session], cwd=terminal.cwd,
                          env=terminal.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done
    return [line.removeprefix("you: ") for line in done.stdout.splitlines()
            if line.startswith("you: ")]


def replies_on_lines_of_their_own(screen: str) -> None:
    """No reply shares a line with the prompt, another reply, or what follows it."""
    for line in screen.splitlines():
        assert line.count("[offline model]") <= 1, line
        assert not (PROMPT in line and "[offline model]" in line), line
        if "spill_read)" in line:  # the end of every offline reply to a message
            assert line.rstrip().endswith("spill_read)."), line


def test_lines_typed_during_a_turn_each_get_a_turn_in_order_and_a_steer_joins_it(
        terminal: Terminal) -> None:
    terminal.chat("order", "--session", "order")
    terminal.wait_for(lambda s: "hookline chat" in s and at_prompt(s), "the banner")
    terminal.type(SLOW)
    terminal.wait_for(lambda s: "running shell" in s, "the slow tool running")
    for line in ("one", "two", ">> steer me", "three"):  # typed at once, during the turn
        terminal.type(line)
    screen = terminal.wait_for(
        lambda s: at_prompt(s) and all(replied(text) in flat(s)
                                       for text in ("steer me", "one", "two", "three")),
        "the answers to every line (a loaded machine may show them a moment apart)")
    assert screen.count("(queued: it gets its turn after the running one)") == 3, screen
    assert screen.count("(steered into the running turn)") == 1, screen
    folded = flat(screen)  # a reply may be wrapped at any of its spaces
    for text in ("steer me", "one", "two", "three"):
        assert replied(text) in folded, screen
    answers = [folded.index(replied(text)) for text in ("steer me", "one", "two", "three")]
    assert answers == sorted(answers), screen  # the steer answered within the slow turn
    # Each queued line's answer is labelled with it, in order.
    labels = [folded.index(f"(answering: {text})") for text in ("one", "two", "three")]
    assert labels == sorted(labels) and all(
        label < folded.index(replied(text))
        for label, text in zip(labels, ("one", "two", "three"), strict=True)), screen
    for text in ("one", "two", "three", "steer me"):
        assert folded.count(replied(text)) == 1, screen
    replies_on_lines_of_their_own(screen)

    terminal.type("/quit")
    screen = terminal.wait_for(lambda s: "CHAT-EXIT=0" in s, "a clean exit")
    tail = [line for line in screen.splitlines() if line.strip()]
    assert tail[-2:] == ["you> /quit", "CHAT-EXIT=0"], tail[-4:]  # no reply after you>
    # The steer joined the slow turn (after its tool call); each other line got its own.
    assert tape_said(terminal, "order") == [SLOW, "steer me", "one", "two", "three"]


def test_leaving_with_lines_queued_waits_for_their_answers(terminal: Terminal) -> None:
    terminal.chat("leave", "--session", "leave")
    terminal.wait_for(lambda s: "hookline chat" in s and at_prompt(s), "the banner")
    terminal.type(SLOW)
    terminal.wait_for(lambda s: "running shell" in s, "the slow tool running")
    terminal.type("queued line")
    terminal.type("/quit")
    screen = terminal.wait_for(lambda s: "CHAT-EXIT=" in s, "the exit")
    assert "(leaving once the lines already sent are answered; Ctrl-C leaves now)" in screen
    assert "CHAT-EXIT=0" in screen and replied("queued line") in screen, screen
    assert "not answered" not in screen
    replies_on_lines_of_their_own(screen)
    assert tape_said(terminal, "leave") == [SLOW, "queued line"]


def test_chat_commands_in_a_terminal_never_reach_the_model(terminal: Terminal) -> None:
    terminal.chat("commands", "--session", "commands")
    terminal.wait_for(lambda s: "hookline chat" in s and at_prompt(s), "the banner")
    terminal.type("/help")
    terminal.wait_for(lambda s: "/tool NAME {json}" in s and at_prompt(s), "the help")
    terminal.type("/whatever")
    terminal.wait_for(lambda s: "unknown command /whatever" in s and at_prompt(s),
                      "the unknown command's line")
    terminal.type("hello")
    terminal.wait_for(lambda s: replied("hello") in s and at_prompt(s), "the reply")
    terminal.type("/usage")
    screen = terminal.wait_for(lambda s: "usage: " in s and at_prompt(s), "the usage")
    assert "over 1 model call; cost not reported (session commands" in screen
    terminal.type("//help")
    screen = terminal.wait_for(lambda s: replied("/help") in s and at_prompt(s), "escaped")
    replies_on_lines_of_their_own(screen)
    terminal.type("/quit")
    terminal.wait_for(lambda s: "CHAT-EXIT=0" in s, "the exit")
    assert tape_said(terminal, "commands") == ["hello", "/help"]


def test_resuming_shows_the_last_turns_and_resume_switches_session(terminal: Terminal) -> None:
    terminal.chat("first", "--session", "kept")
    terminal.wait_for(lambda s: "hookline chat" in s and at_prompt(s), "the banner")
    for text in ("alpha question", "beta question", "gamma question"):
        terminal.type(text)
        terminal.wait_for(lambda s, t=text: replied(t) in flat(s) and at_prompt(s), text)
    terminal.type("/quit")
    terminal.wait_for(lambda s: "CHAT-EXIT=0" in s, "the exit")

    terminal.chat("again", "--session", "other")
    terminal.wait_for(lambda s: "hookline chat" in s and at_prompt(s), "banner 2")
    terminal.type("in the other one")
    terminal.wait_for(lambda s: replied("in the other one") in flat(s) and at_prompt(s),
                      "a turn of the other session")
    terminal.type("/resume kept")
    screen = terminal.wait_for(lambda s: "session kept has 3 turns; the last 2" in s
                               and at_prompt(s), "the recap after /resume")
    recap = screen[screen.index("/resume kept"):]
    assert "you: beta question" in recap and "you: gamma question" in recap, recap
    assert "alpha question" not in recap, recap
    terminal.type("delta question")
    terminal.wait_for(lambda s: replied("delta question") in flat(s) and at_prompt(s),
                      "a turn of the resumed session")
    assert tape_said(terminal, "kept")[-1] == "delta question"
    terminal.type("/resume nosuch")
    terminal.wait_for(lambda s: "error:" in s and "nosuch" in s.split("/resume nosuch")[-1],
                      "the error for an unknown session")
    terminal.type("/quit")
    terminal.wait_for(lambda s: "CHAT-EXIT=0" in s, "the second exit")

    terminal.chat("third", "--session", "kept")  # opening it shows the recap too
    terminal.wait_for(lambda s: "session kept has 4 turns; the last 2" in s and at_prompt(s),
                      "the recap on start")


def test_ctrl_z_suspends_the_chat_and_fg_brings_it_back(terminal: Terminal) -> None:
    """In an interactive shell, Ctrl-Z stops the chat and `fg` brings it back, as any
    program; it is not a ^Z character sent to the model inside the next line."""
    bash = shutil.which("bash")
    assert bash, "bash is needed for job control"
    terminal.tmux("new-session", "-d", "-s", "jobs", "-x", "160", "-y", "50", "-c",
                  str(terminal.cwd), f"{bash} --norc --noprofile -i")
    terminal.target = "jobs"
    terminal.type(f"PS1='$ '; {shlex.join([str(HOOKLINE), 'chat', '--session', 'jobs'])}")
    terminal.wait_for(lambda s: "hookline chat" in s and at_prompt(s), "the banner")
    terminal.keys("C-z")
    terminal.wait_for(lambda s: "Stopped" in s and last_line(s) == "$", "the shell's prompt")
    terminal.type("fg")
    terminal.wait_for(at_prompt, "the chat's prompt again")
    terminal.type("abc")
    screen = terminal.wait_for(lambda s: 'You said: "abc"' in s and at_prompt(s),
                               "the line after the chat came back")
    assert "\\x1a" not in screen and "^Z" not in screen.split("Stopped")[-1]


def test_the_status_line_s_clock_follows_what_runs_and_the_meter_comes_last(
        terminal: Terminal) -> None:
    terminal.chat("clock", "--session", "clock")
    terminal.wait_for(lambda s: "hookline chat" in s and at_prompt(s), "the banner")
    terminal.type("hello")  # a first call: the context meter has a figure
    terminal.wait_for(lambda s: 'You said: "hello"' in s and at_prompt(s), "the reply")
    terminal.type('/tool shell {"command": "sleep 4"}')
    screen = terminal.wait_for(
        lambda s: re.search(r"…running shell [1-9]s · context \d+% of [\d,]+$", s, re.M)
        is not None, "the clock right after the tool, the meter after it")
    assert "of 128,000 " not in screen
