"""`hookline run` in scripts, as a real OpenAI-compatible server on loopback receives it:
`-o KEY VALUE` model options in every request body of the turn (and a clear refusal of
an unknown key or a bad value, before any request), a fresh session for each run and
`-c` continuing the last one, and the warning when a continued session has grown long."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openai_server import OpenAIServer, Reply
from test_cli import hookline
from test_run_inputs import run
from test_run_what_ran import workspace_and_env


def said(request: Any) -> list[str]:
    """The conversation of a request, without its system prompt."""
    return [str(message.get("content")) for message in request.messages
            if message["role"] != "system"]


def test_model_options_reach_every_request_of_the_turn(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("some notes\n")
    replies = [Reply(tool_calls=[{"name": "fs_read", "arguments": {"path": "notes.txt"}}]),
               Reply(text="read it")]
    with OpenAIServer(replies) as server:
        done = run(tmp_path, server, "-o", "temperature", "0.2", "-o", "top_p", "0.9",
                   "-o", "max_tokens", "50", "-o", "stop", "END", "-o", "stop", "STOP",
                   "-o", "reasoning_effort", "low", "-o", "seed", "7", "read my notes")
        assert done.returncode == 0, done.stderr
        bodies = [request.body for request in server.requests]
    assert len(bodies) == 2
    for body in bodies:
        assert body["temperature"] == 0.2 and body["top_p"] == 0.9 and body["seed"] == 7
        assert body["max_completion_tokens"] == 50, "the chat format's name for max_tokens"
        assert body["stop"] == ["END", "STOP"] and body["reasoning_effort"] == "low"


def test_without_options_the_request_carries_none(tmp_path: Path) -> None:
    with OpenAIServer([Reply(text="hi")]) as server:
        assert run(tmp_path, server, "hello").returncode == 0
        body = server.requests[0].body
    assert not {"temperature", "top_p", "seed", "stop", "reasoning_effort"} & set(body)


def test_an_unknown_option_or_a_bad_value_is_refused_before_any_request(
        tmp_path: Path) -> None:
    with OpenAIServer([Reply(text="never")]) as server:
        unknown = run(tmp_path, server, "-o", "temprature", "0.2", "hello")
        bad = run(tmp_path, server, "-o", "temperature", "hot", "hello")
        high = run(tmp_path, server, "-o", "max_tokens", "0", "hello")
        twice = run(tmp_path, server, "-o", "top_p", "0.5", "-o", "top_p", "0.6", "hello")
        half = run(tmp_path, server, "hello", "-o", "temperature")
        assert not server.requests
    assert unknown.returncode == 1 and unknown.stderr.startswith(
        "error: [invalid_input] unknown model option 'temprature'; the known ones: "
        "temperature (a number from 0 to 2); top_p (a number from 0 to 1); ")
    assert "reasoning_effort (one of none, minimal, low, medium, high, xhigh, max)" in \
        unknown.stderr
    assert bad.stderr == ("error: [invalid_input] model option temperature takes a number "
                          "from 0 to 2, got 'hot'\n")
    assert "model option max_tokens takes a whole number from 1, got '0'" in high.stderr
    assert "model option 'top_p' is given twice" in twice.stderr and twice.returncode == 1
    assert half.returncode == 2 and "requires 2 arguments" in half.stderr


def test_each_run_is_a_fresh_session_and_c_continues_the_last_one(tmp_path: Path) -> None:
    replies = [Reply(text="one"), Reply(text="two"), Reply(text="three")]
    with OpenAIServer(replies) as server:
        for args in (["first"], ["second"], ["-c", "third"]):
            done = run(tmp_path, server, *args)
            assert done.returncode == 0, done.stderr
            assert "warning" not in done.stderr and "new session" not in done.stderr
        requests = server.requests
    assert said(requests[1]) == ["second"], "a second run does not see the first"
    assert said(requests[2]) == ["second", "two", "third"], "-c continues the last session"


def test_a_continued_session_past_half_its_budget_is_warned_about(tmp_path: Path) -> None:
    used = {"prompt_tokens": 5_000, "completion_tokens": 5}
    with OpenAIServer([Reply(text="a", usage=used), Reply(text="b", usage=used)]) as server:
        window = {"HOOKLINE_CONTEXT_WINDOW": "8000"}  # 6,400 tokens within the budget
        fresh = run(tmp_path, server, "first", **window)
        continued = run(tmp_path, server, "-c", "second", **window)
    assert fresh.returncode == continued.returncode == 0, fresh.stderr + continued.stderr
    assert fresh.stderr == "", "a fresh session is never warned about"
    [warning] = continued.stderr.splitlines()
    assert warning.startswith("warning: session cli:") and warning.endswith(
        " is long (2 turns in its context; its last request held 5,000 tokens, 78% of the "
        "6,400 the context budget allows), and every turn sends it again: run without -c (or "
        "--session) starts a fresh one, and `hookline compact "
        f"{warning.split()[2]}` summarises this one")
    assert continued.stdout == "b\n"


def test_a_continued_session_of_more_than_20_turns_is_warned_about(tmp_path: Path) -> None:
    workspace, env = workspace_and_env(tmp_path)
    lines = "".join(f"line {n}\n" for n in range(19))
    chatted = hookline("chat", "--session", "long", input=lines, env=env, cwd=workspace)
    assert chatted.returncode == 0, chatted.stderr
    twentieth = hookline("run", "--session", "long", "the 20th turn", env=env, cwd=workspace)
    assert twentieth.returncode == 0 and twentieth.stderr == "", twentieth.stderr
    later = hookline("run", "-q", "--session", "long", "the 21st turn", env=env, cwd=workspace)
    assert later.returncode == 0, later.stderr
    assert later.stderr.startswith("warning: session long is long (21 turns in its context; "
                                   "its last request held "), "also with -q"
    assert later.stderr.count("\n") == 1
    # Handed off (as a compaction does), the next request starts at the anchor: not long.
    handoff = '/tool tape_handoff {"name": "fresh start", "summary": "we talked"}'
    handed = hookline("run", "-q", "--session", "long", handoff, env=env, cwd=workspace)
    assert handed.returncode == 0, handed.stderr
    after = hookline("run", "-q", "--session", "long", "after it", env=env, cwd=workspace)
    assert after.returncode == 0 and after.stderr == "", after.stderr
