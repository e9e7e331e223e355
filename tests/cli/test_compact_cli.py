"""Compaction and the context meter from the command line, against a loopback
OpenAI-compatible server over real HTTP: `hookline compact` summarises the session and
the next `run -c` starts from the summary; a session crossing its budget is compacted by
itself (one line on stderr) and its next request fits; `run --usage` shows the meter with
the input tokens the server reported; the chat's `/compact` in a real terminal."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from openai_server import OpenAIServer, Reply
from terminal_support import TMUX, Terminal, clean_env, last_line

HOOKLINE = Path(sys.executable).parent / "hookline"
SPEC = "openai-compatible:test-model"
SUMMARY = "SUMMARY: the user asked about apples; the answers were long."


def environ(workspace: Path, server: OpenAIServer, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env.update(HOOKLINE_HOME=str(workspace.parent / "home"), HOOKLINE_MODEL=SPEC,
               HOOKLINE_API_BASE=server.base_url, HOOKLINE_API_KEY="sk-test", **extra)
    return env


def hookline(workspace: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HOOKLINE), *args], cwd=workspace, env=env, text=True,
                          capture_output=True, timeout=120, stdin=subprocess.DEVNULL)


def is_summary(request: object) -> bool:
    """The prompt is the summary call's system message, or starts its last message."""
    messages = request.messages  # type: ignore[attr-defined]
    return bool(messages) and any("You are summarising a conversation" in str(
        message["content"])[:40] for message in (messages[0], messages[-1]))


def test_hookline_compact_and_the_next_run_starts_from_the_summary(workspace: Path) -> None:
    cached = {"prompt_tokens": 1600, "completion_tokens": 10,
              "prompt_tokens_details": {"cached_tokens": 1500}}
    replies = [Reply(text="apples " * 300, usage={"prompt_tokens": 900, "completion_tokens": 600}),
               Reply(text=SUMMARY, usage=cached),
               Reply(text="more apples", usage={"prompt_tokens": 300, "completion_tokens": 2})]
    with OpenAIServer(replies) as server:
        env = environ(workspace, server)
        assert hookline(workspace, env, "run", "tell me about apples").returncode == 0
        done = hookline(workspace, env, "compact", "--focus", "the apples")
        assert done.returncode == 0, done.stderr
        said, used = done.stdout.splitlines()
        assert said.startswith("session cli:") and "compacted about " in said
        session_id = said.split()[1].rstrip(":")
        assert done.stderr == (f"compacting session {session_id}: the model summarises its "
                               f"context ...\n"), "said before the model is asked"
        before, after = (int(number.replace(",", "")) for number in
                         re.findall(r"about ([\d,]*\d)", said))
        # The reply's 2,100 characters are gone, at the ratio the turn's call measured.
        assert 0 < after < before - 300, (before, after)
        assert used == ("the summary call: 1,600 tokens in (1,500 cached), 10 out, over 1 "
                        "model call; cost not reported")
        turn, summary_request = server.requests[0], server.requests[1]
        assert is_summary(summary_request)
        # It repeats the turn's request (tools, system prompt, messages) for the prompt
        # cache, then the reply, then the prompt; no tool may be called.
        assert summary_request.tools == turn.tools and summary_request.tools
        assert summary_request.body["tool_choice"] == "none"
        count = len(turn.messages)
        assert summary_request.messages[:count] == turn.messages
        assert summary_request.messages[count]["content"] == "apples " * 300
        assert "focus on: the apples" in summary_request.messages[-1]["content"]
        pears = hookline(workspace, env, "run", "--usage", "-c", "and pears?")
        assert pears.returncode == 0, pears.stderr
        after = server.requests[2].messages
    # The session's usage counts the summary call, which no turn's `run` event holds.
    assert "session: 2,800 tokens in (1,500 cached), 612 out, over 3 model calls" in \
        pears.stderr
    texts = [str(message["content"]) for message in after]
    assert any(SUMMARY in text for text in texts) and texts[-1] == "and pears?"
    assert not any("apples apples" in text for text in texts)
    shown = hookline(workspace, env, "sessions", "show")
    assert "--- compaction" in shown.stdout and "apples apples" in shown.stdout


def test_a_session_past_its_budget_compacts_itself_and_says_so(workspace: Path) -> None:
    # The server reports 11 input tokens a call: each later process recalls the lowest
    # ratio a measurement may set, one token in six characters.
    replies = [Reply(text="x" * 9000), Reply(text="y" * 9000), Reply(text=SUMMARY),
               Reply(text="short")]
    with OpenAIServer(replies) as server:
        env = environ(workspace, server, HOOKLINE_CONTEXT_WINDOW="4000")
        assert hookline(workspace, env, "run", "one").returncode == 0
        assert hookline(workspace, env, "run", "-c", "two").returncode == 0
        done = hookline(workspace, env, "run", "-c", "three")
        sizes = [len(json.dumps(request.body)) for request in server.requests]
    assert done.returncode == 0, done.stderr
    assert done.stdout == "short\n"
    assert "[context] compacted (the context passed its budget; about " in done.stderr
    assert is_summary(server.requests[2]) and sizes[3] < sizes[1], sizes


def test_run_usage_shows_the_context_meter_with_the_reported_input(workspace: Path) -> None:
    reply = Reply(text="hi", usage={"prompt_tokens": 12_345, "completion_tokens": 6})
    with OpenAIServer([reply]) as server:
        done = hookline(workspace, environ(workspace, server, HOOKLINE_CONTEXT_WINDOW="32000"),
                        "run", "--usage", "hello")
    assert done.returncode == 0, done.stderr
    assert "context: 12,345 of 32,000 tokens (39%)" in done.stderr


def test_hookline_compact_refuses_what_it_cannot_compact(workspace: Path) -> None:
    """The offline model (its "summary" would replace the context), an unknown session
    and another folder's session are errors that say what to do; nothing is written."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env["HOOKLINE_HOME"] = str(workspace.parent / "home")
    assert hookline(workspace, env, "run", "hello there").returncode == 0
    offline = hookline(workspace, env, "compact")
    assert offline.returncode == 1 and offline.stdout == ""
    assert offline.stderr.startswith("error: [config] the offline model cannot summarise")
    assert "HOOKLINE_MODEL" in offline.stderr
    shown = hookline(workspace, env, "sessions", "show")
    assert "--- compaction" not in shown.stdout and "hello there" in shown.stdout

    unknown = hookline(workspace, env, "compact", "nosuch")
    assert unknown.returncode == 1
    assert unknown.stderr == ("error: no session 'nosuch' in "
                              f"{workspace.resolve()} or elsewhere; 'hookline sessions' "
                              "lists them\n")
    listed = hookline(workspace, env, "sessions", "list", "--json")
    (session,) = json.loads(listed.stdout)
    elsewhere = workspace.parent / "elsewhere"
    elsewhere.mkdir()
    other = hookline(elsewhere, env, "compact", session["session_id"])
    assert other.returncode == 1 and "belongs to another folder" in other.stderr


def test_a_summary_no_shorter_than_the_context_is_not_written(workspace: Path) -> None:
    replies = [Reply(text="ok"), Reply(text="a long summary of a short talk " * 40),
               Reply(text="still here")]
    with OpenAIServer(replies) as server:
        env = environ(workspace, server)
        assert hookline(workspace, env, "run", "hi").returncode == 0
        done = hookline(workspace, env, "compact")
        after = hookline(workspace, env, "run", "-c", "and now?")
        sent = [message["content"] for message in server.requests[-1].messages[1:]]
    assert done.returncode == 1 and done.stdout == "", done.stdout
    assert "would not make the context of about" in done.stderr
    assert "shorter; nothing was written" in done.stderr
    assert after.returncode == 0 and sent == ["hi", "ok", "and now?"], sent


def test_a_server_refusing_the_repeated_request_gets_the_conversation_as_a_text(
        workspace: Path) -> None:
    """A server that refuses `tool_choice` (HTTP 400) still compacts: the summary call is
    sent again as the text form, without tools; a rate limit is not sent again."""
    refusal = Reply.failure(400, "tool_choice is not supported by this server")
    with OpenAIServer([Reply(text="apples " * 300), refusal, Reply(text=SUMMARY)]) as server:
        env = environ(workspace, server)
        assert hookline(workspace, env, "run", "tell me about apples").returncode == 0
        done = hookline(workspace, env, "compact")
        repeated, as_text = server.requests[1], server.requests[2]
    assert done.returncode == 0, done.stderr
    assert "compacted about " in done.stdout
    assert repeated.tools and is_summary(repeated)
    assert not as_text.tools and "<conversation>" in as_text.messages[-1]["content"]

    limited = Reply.failure(429, "slow down", headers={"Retry-After": "0"})
    with OpenAIServer([Reply(text="pears " * 300), limited, limited, limited]) as server:
        env = environ(workspace.parent, server)
        assert hookline(workspace, env, "run", "--new", "tell me about pears").returncode == 0
        done = hookline(workspace, env, "compact")
        calls = len(server.requests)
    assert done.returncode == 1 and "rate limited" in done.stderr
    assert calls == 4, "the repeated request, retried twice, and nothing more"


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_chat_compact_in_a_terminal(workspace: Path) -> None:
    used = {"prompt_tokens": 50, "completion_tokens": 5}
    replies = [Reply(text="bananas " * 200, usage=used), Reply(text=SUMMARY, usage=used)]
    with OpenAIServer(replies) as server:
        term = Terminal(workspace, {**clean_env(workspace.parent / "home"),
                                    **{k: v for k, v in environ(workspace, server).items()
                                       if k.startswith("HOOKLINE_")}})
        try:
            term.chat("compact", "--session", "long")
            term.wait_for(lambda s: last_line(s) == "you>", "the prompt")
            term.type("tell me about bananas")
            term.wait_for(lambda s: "bananas bananas" in s and last_line(s) == "you>", "reply")
            term.type("/compact keep the fruit")
            screen = term.wait_for(lambda s: "the summary call: " in s, "the lines")
            assert "compacting: the model summarises" in screen
            assert "session long: compacted about" in screen
            term.type("/usage")
            screen = term.wait_for(lambda s: "(every turn and compaction on its tape)" in s,
                                   "/usage")
            usage = [line for line in screen.splitlines()
                     if line.startswith(("usage: ", "session: "))]
            assert len(usage) == 2 and all(
                "100 tokens in (0 cached), 10 out, over 2 model calls" in line
                for line in usage), "the summary call counts in the chat's and the session's"
            (compacted,) = re.findall(r"compacted about [\d,]+ tokens of context into about "
                                      r"([\d,]*\d)", screen)
            assert f"context: {compacted} of 128,000 tokens" in screen, "what is left"
            assert "focus on: keep the fruit" in server.requests[1].messages[-1]["content"]
        finally:
            term.close()


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_ctrl_c_cancels_a_chat_s_compact_and_the_chat_goes_on(workspace: Path) -> None:
    """The summary call hangs; Ctrl-C cancels `/compact`, not the chat (which used to end,
    status 0), and the next line is answered."""
    replies = [Reply(text="bananas " * 200), Reply(text=["SUMMARY "], hold=True),
               Reply(text="typed after, answered")]
    with OpenAIServer(replies) as server:
        term = Terminal(workspace, {**clean_env(workspace.parent / "home"),
                                    **{k: v for k, v in environ(workspace, server).items()
                                       if k.startswith("HOOKLINE_")}})
        try:
            term.chat("compact-cancel", "--session", "long")
            term.wait_for(lambda s: last_line(s) == "you>", "the prompt")
            term.type("tell me about bananas")
            term.wait_for(lambda s: "bananas bananas" in s and last_line(s) == "you>", "reply")
            term.type("/compact")
            term.wait_for(lambda s: "compacting: the model summarises" in s, "the summary call")
            term.keys("C-c")
            term.wait_for(lambda s: "(/compact cancelled with Ctrl-C: nothing was written)" in s
                          and last_line(s) == "you>", "the cancelled command")
            term.type("a line after it")
            screen = term.wait_for(lambda s: "typed after, answered" in s, "the answer")
            assert "compacted about" not in screen
        finally:
            term.close()


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_chat_shows_the_context_meter_in_its_status_line_and_usage(workspace: Path) -> None:
    used = {"prompt_tokens": 8_000, "completion_tokens": 5}
    slow = Reply(text=["a slow ", "reply"], usage=used, chunk_delay=3.0)
    with OpenAIServer([Reply(text="first", usage=used), slow]) as server:
        env = environ(workspace, server, HOOKLINE_CONTEXT_WINDOW="32000")
        term = Terminal(workspace, {**clean_env(workspace.parent / "home"),
                                    **{k: v for k, v in env.items() if k.startswith("HOOKLINE_")}})
        try:
            term.chat("meter", "--session", "meter")
            term.wait_for(lambda s: last_line(s) == "you>", "the prompt")
            term.type("hello")
            term.wait_for(lambda s: "first" in s and last_line(s) == "you>", "the reply")
            term.type("again")
            term.wait_for(lambda s: "context 25% of 32,000" in s, "the meter while it runs")
            term.wait_for(lambda s: "a slow reply" in s and last_line(s) == "you>", "reply 2")
            term.type("/usage")
            term.wait_for(lambda s: "context: 8,000 of 32,000 tokens (25%)" in s, "/usage")
        finally:
            term.close()


LLAMA_CPP_OVERFLOW = {"code": 400, "type": "exceed_context_size_error",
                      "message": "the request exceeds the available context size, try "
                                 "increasing it", "n_prompt_tokens": 5100, "n_ctx": 3000}
"""llama.cpp's server's refusal: its window is in the body, not in the message."""


@pytest.mark.parametrize("refused", [
    Reply.failure(400, "This model's maximum context length is 3000 tokens. However, your "
                       "messages resulted in 5100 tokens."),
    Reply(status=400, error=LLAMA_CPP_OVERFLOW)], ids=["openai", "llama.cpp"])
def test_an_overflow_refusal_compacts_and_retries_over_http(
        workspace: Path, refused: Reply) -> None:
    replies = [Reply(text="b" * 3000), refused, Reply(text=SUMMARY), Reply(text="fits now"),
               Reply(text="third answer", usage={"prompt_tokens": 600, "completion_tokens": 2})]
    with OpenAIServer(replies) as server:
        env = environ(workspace, server)
        assert hookline(workspace, env, "run", "first").returncode == 0
        done = hookline(workspace, env, "run", "-c", "second")
        usage = hookline(workspace, env, "run", "-c", "--usage", "third")
        requests = server.requests
    assert done.returncode == 0, done.stderr
    assert done.stdout == "fits now\n"
    assert "[context] compacted (the model refused the request as too long" in done.stderr
    assert is_summary(requests[2])
    assert requests[3].messages[-1]["content"] == "second"
    assert "of 3,000" in usage.stderr, "the window the refusal stated, learned"


def test_consecutive_requests_share_their_start_byte_for_byte(workspace: Path) -> None:
    replies = [Reply(tool_calls=[{"name": "fs_read", "arguments": {"path": "notes.txt"}}]),
               Reply(text="read it"), Reply(text="second answer")]
    (workspace / "notes.txt").write_text("some notes\n")
    with OpenAIServer(replies) as server:
        env = environ(workspace, server)
        assert hookline(workspace, env, "run", "read my notes").returncode == 0
        assert hookline(workspace, env, "run", "-c", "and then?").returncode == 0
        bodies = [request.body for request in server.requests]
    for earlier, later in itertools.pairwise(bodies):
        assert json.dumps(later["tools"]) == json.dumps(earlier["tools"])
        shared = later["messages"][:len(earlier["messages"])]
        assert json.dumps(shared) == json.dumps(earlier["messages"])


def test_hookline_compact_says_each_retry_of_its_summary_call(workspace: Path) -> None:
    limited = Reply.failure(429, "Rate limit reached", headers={"Retry-After": "1"})
    with OpenAIServer([Reply(text="apples " * 300), limited, Reply(text=SUMMARY)]) as server:
        env = environ(workspace, server)
        assert hookline(workspace, env, "run", "tell me about apples").returncode == 0
        done = hookline(workspace, env, "compact")
    assert done.returncode == 0, done.stderr
    (retry,) = [line for line in done.stderr.splitlines() if line.startswith("[retry]")]
    assert "waiting 1.0 s, then attempt 2 of 3" in retry


def test_ctrl_c_during_hookline_compact_is_one_line(workspace: Path) -> None:
    import signal
    import time

    replies = [Reply(text="apples " * 300), Reply(text=["SUMMARY "], hold=True)]
    with OpenAIServer(replies) as server:
        env = environ(workspace, server)
        assert hookline(workspace, env, "run", "tell me about apples").returncode == 0
        proc = subprocess.Popen([str(HOOKLINE), "compact"], cwd=workspace, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while len(server.requests) < 2:  # the summary call is waiting
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.splitlines()[-1] == ("error: compaction cancelled (Ctrl-C): nothing was "
                                       "written; the session is as it was"), stderr
    assert stdout == "" and "Traceback" not in stderr


def test_a_turn_that_ends_while_hookline_compact_summarises_is_never_left_out(
        workspace: Path) -> None:
    """Another process runs a turn of the session while `hookline compact` waits for its
    summary: the anchor would land after that turn, which the summary does not hold, and
    the next request would lose it. Nothing is written; the turn stays in the context."""
    slow_summary = Reply(text=SUMMARY, chunk_delay=0.5)
    replies = [Reply(text="apples " * 300), slow_summary, Reply(text="noted"),
               Reply(text="4711")]
    with OpenAIServer(replies) as server:
        env = environ(workspace, server)
        assert hookline(workspace, env, "run", "tell me about apples").returncode == 0
        compacting = subprocess.Popen([str(HOOKLINE), "compact"], cwd=workspace, env=env,
                                      text=True, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while not any(map(is_summary, server.requests)) and time.monotonic() < deadline:
                time.sleep(0.05)
            other = hookline(workspace, env, "run", "-c", "REMEMBER: the code is 4711")
            assert other.returncode == 0, other.stderr
            _out, err = compacting.communicate(timeout=60)
        finally:
            compacting.kill()
        assert compacting.returncode == 1, err
        assert "the session went on while it was summarised" in err
        assert "nothing was written" in err
        asked = hookline(workspace, env, "run", "-c", "what is the code?")
        assert asked.returncode == 0, asked.stderr
        sent = [message["content"] for message in server.requests[-1].messages]
    assert "REMEMBER: the code is 4711" in sent, sent
    assert not any(SUMMARY in str(content) for content in sent), sent
