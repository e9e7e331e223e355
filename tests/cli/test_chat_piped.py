"""`hookline chat` with piped input, as scripts use it: every line gets its turn, in order,
and the chat's own commands (`/help`, `/new`, `/sessions`, `/model`, `/usage`, `/attach`,
an unknown one, the `//` escape) are run by the chat and never reach the model. Real
console scripts in subprocesses, on the offline or scripted model; the tape is read back
with `hookline sessions show`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from terminal_support import clean_env
from test_cli import hookline

OFFLINE_REPLY = '[offline model] You said: "{}"'


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**clean_env(tmp_path / "home"), "HOOKLINE_MODEL": "offline"}


def chat(lines: list[str], env: dict[str, str], cwd: Path, *options: str) -> str:
    done = hookline("chat", *options, input="".join(f"{line}\n" for line in lines),
                    env=env, cwd=cwd)
    assert done.returncode == 0, done
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


def transcript(env: dict[str, str], cwd: Path, session: str | None = None) -> list[str]:
    """`hookline sessions show`'s lines for the session (default: the folder's current)."""
    done = hookline("sessions", "show", *([session] if session else []), env=env, cwd=cwd)
    assert done.returncode == 0, done
    return done.stdout.splitlines()


def said(lines: list[str]) -> list[str]:
    """What the user said, in the tape's order."""
    return [line.removeprefix("you: ") for line in lines if line.startswith("you: ")]


def test_every_piped_line_gets_its_own_turn_in_order(env: dict[str, str],
                                                     workspace: Path) -> None:
    slow = '/tool shell {"command": "sleep 1"}'  # b and c are queued while it runs
    out = chat([slow, "a", "b", "c"], env, workspace, "--session", "s")
    replies = [out.index(OFFLINE_REPLY.format(text)) for text in "abc"]
    assert replies == sorted(replies), out
    for text in "abc":  # each echoed after the prompt when its turn starts, then answered
        assert out.count(f"you> {text}\n") == 1, out
        assert out.index(f"you> {text}\n") < out.index(OFFLINE_REPLY.format(text))
    assert "not answered" not in out
    lines = transcript(env, workspace, "s")
    assert said(lines) == [slow, "a", "b", "c"]
    for text in "abc":  # each answered by a reply of its own, right after it
        after = lines[lines.index(f"you: {text}") + 1]
        assert after.startswith(f"assistant: {OFFLINE_REPLY.format(text)}"), lines


def test_help_unknown_commands_and_the_escape_stay_out_of_the_model(
        env: dict[str, str], workspace: Path) -> None:
    out = chat(["/help", "/nosuch thing", "//help me", "/etc/hosts is a path"], env,
               workspace, "--session", "s")
    assert "commands (run by the chat, never sent to the model):" in out
    for usage in ("/help", "/new", "/sessions", "/model NAME", "/usage", "/attach PATH",
                  "/quit", ">> TEXT", "//TEXT", "/tool NAME {json}"):
        assert f"\n  {usage} " in out, usage
    unknown = [line for line in out.splitlines() if "unknown command" in line]
    assert unknown == ["unknown command /nosuch: /help lists the commands (to send a "
                       "message that starts with /, type //nosuch)"]
    assert OFFLINE_REPLY.format("/help me") in out
    assert said(transcript(env, workspace, "s")) == ["/help me", "/etc/hosts is a path"]


def test_quit_and_help_take_no_arguments_as_every_command_without_any(
        env: dict[str, str], workspace: Path) -> None:
    """`/quit now` neither leaves nor reaches the model: refused, as `/new x` is."""
    done = hookline("chat", "--session", "q", input="/quit now\n/help me\nafter\n",
                    env=env, cwd=workspace)
    assert done.returncode == 0, done.stderr
    for name, got in (("quit", "now"), ("help", "me")):
        assert f"error: /{name}: /{name} takes no arguments (got '{got}')" in (
            done.stdout + done.stderr)
    assert "commands (run by the chat" not in done.stdout
    assert said(transcript(env, workspace, "q")) == ["after"]


def test_the_input_after_quit_is_said_not_read(env: dict[str, str], workspace: Path) -> None:
    done = hookline("chat", "--session", "after-quit", input="first\n/quit\nnever read\n",
                    env=env, cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert "(the input after /quit is not read)" in done.stdout + done.stderr
    assert said(transcript(env, workspace, "after-quit")) == ["first"]


def test_tool_lines_still_reach_the_offline_model(env: dict[str, str], workspace: Path) -> None:
    out = chat(['/tool shell {"command": "echo made > made.txt"}'], env, workspace)
    assert (workspace / "made.txt").read_text() == "made\n"
    assert "unknown command" not in out


def test_new_starts_a_fresh_session_made_the_folder_s_current_one(
        env: dict[str, str], workspace: Path) -> None:
    out = chat(["before", "/new", "after"], env, workspace, "--session", "old")
    fresh = next(line.split()[2].rstrip(",") for line in out.splitlines()
                 if line.startswith("new session "))
    assert fresh.startswith("cli:") and fresh != "old"
    assert said(transcript(env, workspace, "old")) == ["before"]
    assert said(transcript(env, workspace)) == ["after"]  # the folder's current session
    assert said(transcript(env, workspace, fresh)) == ["after"]


def test_sessions_lists_them_as_hookline_sessions_does(env: dict[str, str],
                                                       workspace: Path) -> None:
    chat(["in another session"], env, workspace, "--session", "other")
    out = chat(["hello", "/sessions"], env, workspace)
    listed = out[out.index("you> /sessions\n"):].splitlines()[1:]
    expected = hookline("sessions", env=env, cwd=workspace).stdout.splitlines()
    assert len(expected) == 3 and expected[0].split()[:2] == ["SESSION", "TITLE"]
    assert listed[:len(expected)] == expected
    assert any(row.startswith("* cli:default") for row in expected)  # the current one


def scripted(workspace: Path, text: str, usage: str = "", turns: int = 2) -> Path:
    """A script of `turns` model calls (the process plays it once), each replying `text`."""
    path = workspace.parent / f"{text.split()[0]}.toml"
    path.write_text(f'[[turns]]\ntext = "{text}"\n{usage}' * turns, encoding="utf-8")
    return path


def test_model_sets_the_model_of_the_following_turns_and_takes_aliases(
        env: dict[str, str], workspace: Path) -> None:
    script = scripted(workspace, "scripted reply")
    env = {**env, "HOOKLINE_MODEL_ALIASES": f"quick=scripted:{script}"}
    out = chat(["first", "/model", "/model not a model", "/model foo:bar", "/model quick",
                "second",
                f"/model scripted:{script}", "third", "/model offline", "fourth"],
               env, workspace, "--session", "s")
    assert "model offline (/model NAME changes it for the following turns)" in out
    assert "error: /model: 'not a model' is neither a model spec nor an alias" in out
    assert "error: /model: unknown provider 'foo' in 'foo:bar': one of " in out
    assert f"model quick (scripted:{script}) for the following turns of this chat" in out
    replies = [line.removeprefix("assistant: ") for line in transcript(env, workspace, "s")
               if line.startswith("assistant: ")]
    assert [reply.split(":")[0] for reply in replies] == [
        "[offline model] You said", "scripted reply", "scripted reply",
        "[offline model] You said"]
    runs = [entry["payload"]["data"]["model"] for entry in json.loads(hookline(
        "sessions", "show", "s", "--json", env=env, cwd=workspace).stdout)
        if entry["kind"] == "event" and entry["payload"].get("name") == "run"]
    assert runs == ["offline", "quick", f"scripted:{script}", "offline"]  # as named


def test_the_short_model_option_sets_the_model_of_the_session(
        env: dict[str, str], workspace: Path) -> None:
    script = scripted(workspace, "scripted reply", turns=1)
    out = chat(["hello"], env, workspace, "-m", f"scripted:{script}")
    assert out.startswith(f"hookline chat - model scripted:{script} - session"), out
    assert "scripted reply" in out and "[offline model]" not in out


def test_usage_sums_the_session_s_model_calls(env: dict[str, str], workspace: Path) -> None:
    script = scripted(workspace, "counted", "usage = { input_tokens = 11, output_tokens = 7 }\n")
    out = chat(["/usage", "one", "two", "/usage"], env, workspace, "--session", "s",
               "--model", f"scripted:{script}")
    usage = [line for line in out.splitlines() if line.startswith("usage:")]
    assert usage == [
        "usage: no model call finished (session s, the turns of this chat)",
        "usage: 22 tokens in (0 cached), 14 out, over 2 model calls; cost not reported "
        "(session s, the turns of this chat)"]


def test_attach_adds_a_file_to_the_next_message_only(env: dict[str, str],
                                                     workspace: Path) -> None:
    (workspace / "notes.txt").write_text("the notes say hi\n", encoding="utf-8")
    out = chat(["/attach missing.txt", "/attach notes.txt", "read this", "and this"], env,
               workspace, "--session", "s")
    assert "error: /attach: cannot attach missing.txt: no such file" in out
    assert "attached notes.txt (text) to the next message" in out
    entries = json.loads(hookline("sessions", "show", "s", "--json", env=env,
                                  cwd=workspace).stdout)
    sent = [entry["payload"]["content"] for entry in entries if entry["kind"] == "message"
            and entry["payload"]["role"] == "user"]
    assert sent == ["read this\n\n--- notes.txt ---\nthe notes say hi\n", "and this"]


def test_a_steer_before_the_turn_s_model_began_gets_the_next_turn(
        env: dict[str, str], workspace: Path) -> None:
    """Steered into a turn whose model has not begun, the line would reach the model ahead
    of the turn's own prompt: it is queued instead, and keeps its place."""
    script = workspace.parent / "slow.toml"
    script.write_text('[[turns]]\ntext = "first answer"\ndelay = 1\n\n'
                      '[[turns]]\ntext = "second answer"\n', encoding="utf-8")
    out = chat(["first", ">> second"], env, workspace, "--session", "s", "--model",
               f"scripted:{script}")
    assert out.index("you> first\n") < out.index("first answer") \
        < out.index("you> >> second\n") < out.index("second answer"), out
    lines = transcript(env, workspace, "s")
    assert [line for line in lines if line.startswith(("you: ", "assistant: "))] == [
        "you: first", "assistant: first answer", "you: second", "assistant: second answer"]
