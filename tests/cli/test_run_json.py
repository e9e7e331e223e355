"""`hookline run --json`: the turn as JSON lines on stdout, against a real OpenAI-compatible
server on loopback. Every line is one object with `type`, `version` and exactly the
fields docs/cli.md documents for its type (the table is read from the page); one test
per event type; nothing but JSON on stdout, warnings and the `error:` line on stderr."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from openai_server import OpenAIServer, Reply
from test_cli import hookline
from test_run_inputs import run
from test_run_what_ran import workspace_and_env

from hookline.cli.run_json import JSON_VERSION

CLI_PAGE = Path(__file__).parents[2] / "docs" / "cli.md"


def documented() -> dict[str, set[str]]:
    """The event types of docs/cli.md's JSON output table, each with its fields."""
    text = CLI_PAGE.read_text("utf-8")
    section = text[text.index("### JSON output"):]
    section = section[:section.index("\n### ", 1)]
    rows = re.findall(r"^\| `(\w+)` \|[^|\n]*\| ([^|\n]*) \|$", section, re.MULTILINE)
    return {kind: set(re.findall(r"`(\w+)`", fields)) for kind, fields in rows
            if kind != "type"}  # the header row


def events(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    """stdout's events, each checked against the documented schema."""
    schema = documented()
    found = []
    for line in done.stdout.splitlines():
        event = json.loads(line)
        assert event["version"] == JSON_VERSION == 1, line
        assert set(event) == {"type", "version"} | schema[event["type"]], line
        found.append(event)
    return found


def of(found: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in found if event["type"] == kind]


def test_the_documented_table_names_every_event_type() -> None:
    assert set(documented()) == {"start", "text", "tool_call", "tool_result", "usage",
                                 "retry", "compaction", "reply", "error"}


def test_a_turn_with_tools_is_one_documented_object_per_line(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("some notes\n")
    calls = [{"name": "fs_read", "arguments": {"path": "notes.txt"}, "id": "c1"},
             {"name": "fs_read", "arguments": {"path": "missing.txt"}, "id": "c2"}]
    with OpenAIServer([Reply(tool_calls=calls), Reply(text="read it")]) as server:
        done = run(tmp_path, server, "--json", "read my notes")
    assert done.returncode == 0, done.stderr
    found = events(done)
    assert [event["type"] for event in found] == [
        "start", "tool_call", "tool_call", "usage", "tool_result", "tool_result", "usage",
        "reply"]
    first, second = of(found, "tool_call")
    assert first == {"type": "tool_call", "version": 1, "id": "c1", "name": "fs_read",
                     "arguments": {"path": "notes.txt"}}
    assert second["arguments"] == {"path": "missing.txt"}
    read, failed = of(found, "tool_result")
    assert (read["id"], read["outcome"], read["error"]) == ("c1", "ran", None)
    assert "some notes" in read["output"]
    assert (failed["id"], failed["outcome"]) == ("c2", "failed")
    assert "missing.txt" in failed["error"] and "missing.txt" in failed["output"]
    assert of(found, "usage")[0] == {"type": "usage", "version": 1,
                                     "model": "openai-compatible:test-model",
                                     "input_tokens": 11, "output_tokens": 7,
                                     "cached_tokens": 0}
    [reply] = of(found, "reply")
    assert reply["content"] == "read it" and reply["session_id"].startswith("cli:")
    assert found[0] == {"type": "start", "version": 1, "session_id": reply["session_id"],
                        "model": "openai-compatible:test-model"}
    assert done.stderr == "", "no tool lines, no status: stderr is for warnings and errors"


def test_text_deltas_only_when_streaming(tmp_path: Path) -> None:
    with OpenAIServer([Reply(text="one two three four"), Reply(text="five six")]) as server:
        streamed = run(tmp_path, server, "--json", "--stream", "count")
        whole = run(tmp_path, server, "--json", "count again")
    assert streamed.returncode == whole.returncode == 0, streamed.stderr + whole.stderr
    deltas = [event["delta"] for event in of(events(streamed), "text")]
    assert len(deltas) > 1 and "".join(deltas) == "one two three four"
    assert of(events(streamed), "reply")[0]["content"] == "one two three four"
    assert not of(events(whole), "text") and of(events(whole), "reply")[0]["content"] == \
        "five six"


def test_an_empty_reply_is_said_as_one(tmp_path: Path) -> None:
    """A script tells an empty reply from a lost one: an empty `reply` object, and a
    warning on stderr (plain output has only the warning)."""
    with OpenAIServer([Reply(text=""), Reply(text="")]) as server:
        as_json = run(tmp_path, server, "--json", "say nothing")
        plain = run(tmp_path, server, "say nothing again")
    assert as_json.returncode == plain.returncode == 0, as_json.stderr + plain.stderr
    assert [event["content"] for event in of(events(as_json), "reply")] == [""]
    assert plain.stdout == ""
    for done in (as_json, plain):
        assert "warning: the model's reply was empty: there is nothing to print" in done.stderr


def test_an_error_is_the_last_object_and_the_usual_line(tmp_path: Path) -> None:
    with OpenAIServer([Reply.failure(400, "the model refuses this request")]) as server:
        done = run(tmp_path, server, "--json", "hello")
        refused = run(tmp_path, server, "--json", "-o", "top_p", "2", "hello")
    assert done.returncode == 1
    *_, last = events(done)
    assert last["type"] == "error" and "the model refuses this request" in last["message"]
    assert done.stderr == f"error: {last['message']}\n"
    assert [event["type"] for event in events(done)] == ["start", "error"], "started, then failed"
    assert refused.returncode == 1 and [event["type"] for event in events(refused)] == ["error"]
    assert "model option top_p takes a number from 0 to 1" in refused.stdout


def test_a_retried_call_is_a_retry_object(tmp_path: Path) -> None:
    busy = Reply.failure(503, "busy", headers={"Retry-After": "0"})
    with OpenAIServer([busy, Reply(text="ok now")]) as server:
        done = run(tmp_path, server, "--json", "hello")
    assert done.returncode == 0, done.stderr
    found = events(done)
    assert of(found, "retry") == [{"type": "retry", "version": 1, "reason": "HTTP 503",
                                   "wait": 0.0, "attempt": 2, "attempts": 3}]
    assert found[-1]["type"] == "reply" and found[-1]["content"] == "ok now"


def test_a_compaction_is_a_compaction_object(tmp_path: Path) -> None:
    # The server reports 11 input tokens a call: each later process recalls the lowest
    # ratio a measurement may set, one token in six characters.
    replies = [Reply(text="x" * 9000), Reply(text="y" * 9000), Reply(text="the summary"),
               Reply(text="short")]
    with OpenAIServer(replies) as server:
        window = {"HOOKLINE_CONTEXT_WINDOW": "4000"}
        assert run(tmp_path, server, "one", **window).returncode == 0
        assert run(tmp_path, server, "-c", "two", **window).returncode == 0
        done = run(tmp_path, server, "--json", "-c", "three", **window)
    assert done.returncode == 0, done.stderr
    [compaction] = of(events(done), "compaction")
    assert compaction["reason"] == "budget" and compaction["tokens_before"] > 0
    assert 0 < compaction["tokens_after"] < compaction["tokens_before"] / 2
    assert compaction["summary_chars"] == len("the summary")


def test_stdout_is_json_alone_while_warnings_go_to_stderr(tmp_path: Path) -> None:
    workspace, env = workspace_and_env(tmp_path)
    del env["HOOKLINE_MODEL"]  # the offline model not chosen: it warns on stderr
    done = hookline("run", "--json", '/tool shell {"command": "echo hi"}', env=env,
                    cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert "warning:" in done.stderr and "offline" in done.stderr
    types = [event["type"] for event in events(done)]
    assert types[:2] == ["start", "tool_call"] and types[-1] == "reply"
    assert "tool_result" in types


def test_half_an_emoji_in_a_tool_s_arguments_is_escaped_not_a_failure(tmp_path: Path) -> None:
    """A lone surrogate (`\\ud83d`, valid JSON, no character) from any model: the tool
    gets U+FFFD, and the event that shows the arguments escapes it (UTF-8 cannot write it)."""
    workspace, env = workspace_and_env(tmp_path)
    arguments = json.dumps({"path": "a.txt", "content": "half \ud83d"})
    script = tmp_path / "surrogate.json"
    script.write_text(json.dumps([{"tool_calls": [{"name": "fs_write", "arguments": arguments}]},
                                  {"text": "done"}]))
    env["HOOKLINE_MODEL"] = f"scripted:{script}"
    done = hookline("run", "--json", "go", env=env, cwd=workspace)
    assert done.returncode == 0, done.stderr
    (call,) = of(events(done), "tool_call")
    assert call["arguments"]["content"] == "half \ud83d" and "\\ud83d" in done.stdout
    assert (workspace / "a.txt").read_text() == "half \ufffd"
