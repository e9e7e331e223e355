"""Finding a session again: titles in `hookline sessions`, `sessions search TEXT`,
`sessions show --last N` and `sessions rename ID TITLE`, through the real console script
on a fresh hookline home with the offline model."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_cli import hookline
from test_sessions import run, sessions

HOSTILE = "title \x1b]0;pwned\x07 and \x1b[2J clear\nsecond line"
LONG = "please refactor " + "the parser module " * 10


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    environ["HOOKLINE_HOME"] = str(tmp_path / "home")
    return environ


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def titles(env: dict[str, str], cwd: Path) -> dict[str, str]:
    return {item["session_id"]: item["title"] for item in sessions(env, cwd)}


def search(env: dict[str, str], cwd: Path, text: str) -> list[dict[str, Any]]:
    done = hookline("sessions", "search", text, "--json", env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def on_a_terminal(env: dict[str, str], cwd: Path, *args: str) -> bytes:
    """What `hookline *args` writes to a terminal (a pseudo-terminal as its stdout)."""
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run([str(Path(sys.executable).parent / "hookline"), *args], env=env,
                              cwd=cwd, stdout=secondary, stderr=subprocess.PIPE, timeout=60)
        os.close(secondary)
        assert done.returncode == 0, done.stderr
        shown = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the other end is closed: all read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(primary)
    return shown


def test_list_titles_sessions_by_their_first_message_on_one_harmless_line(
        env: dict[str, str], folder: Path) -> None:
    run(env, folder, "--session", "short", "fix the parser")
    run(env, folder, "--session", "short", "a later message is not the title")
    run(env, folder, "--session", "long", LONG)
    run(env, folder, "--session", "hostile", HOSTILE)
    found = titles(env, folder)
    assert found["short"] == "fix the parser"
    assert len(found["long"]) == 50 and found["long"].endswith("…")
    assert found["long"] == LONG[:49].rstrip() + "…"
    assert found["hostile"] == "title ]0;pwned and [2J clear second line"

    for shown in (hookline("sessions", env=env, cwd=folder).stdout.encode(),
                  on_a_terminal(env, folder, "sessions", "list")):
        text = shown.decode()
        assert b"\x1b" not in shown and b"\x07" not in shown
        header, *rows = text.splitlines()
        assert header.split() == ["SESSION", "TITLE", "TURNS", "LAST", "ACTIVITY", "WORKSPACE"]
        assert len(rows) == 3, "one line per session, whatever the messages held"
        (row,) = [row for row in rows if row.split()[0] == "short"]
        assert row.split()[1:5] == ["fix", "the", "parser", "2"]
        # The title column is as wide as the longest title: the columns stay aligned.
        turns_at = header.index("TURNS")
        assert all(row[turns_at - 1] == " " and row[turns_at] in "12" for row in rows)


def test_list_columns_stay_aligned_with_wide_titles(env: dict[str, str], folder: Path) -> None:
    """Japanese and emoji take two columns each: the columns after them still line up."""
    run(env, folder, "--session", "wide", "日本語のタイトル 🎉")
    run(env, folder, "--session", "narrow", "plain title")
    from hookline.cli.sessions import _columns

    header, *rows = hookline("sessions", env=env, cwd=folder).stdout.splitlines()
    turns_at = _columns(header[:header.index("TURNS")])
    for row in rows:
        before = next(cut for cut in range(len(row) + 1) if _columns(row[:cut]) >= turns_at)
        assert row[before] == "1", (header, rows)
    assert _columns("日本 🎉 é") == 9 and _columns("e\u0301") == 1


def test_search_finds_sessions_by_their_text_in_any_case(env: dict[str, str],
                                                         folder: Path) -> None:
    run(env, folder, "--session", "alpha", "Deploy the Gateway tonight")
    run(env, folder, "--session", "beta", "unrelated words about lunch")
    run(env, folder, "--session", "gamma", "the gateway is down again")
    run(env, folder, "--session", "quoted", 'she said "open sesame" twice')
    run(env, folder, "--session", "long", "x " * 100 + "the needle is here " + "y " * 100)

    found = search(env, folder, "GATEWAY")
    assert [item["session_id"] for item in found] == ["gamma", "alpha"], "most recent first"
    assert [item["title"] for item in found] == ["the gateway is down again",
                                                 "Deploy the Gateway tonight"]
    assert all("gateway" in item["match"]["line"].lower() for item in found)
    assert search(env, folder, "the gateway tonight")[0]["session_id"] == "alpha"
    assert [item["session_id"] for item in search(env, folder, '"open SESAME"')] == ["quoted"]

    (long,) = search(env, folder, "needle")
    line = long["match"]["line"]
    assert "the needle is here" in line and line.startswith("…") and line.endswith("…")
    assert len(line) <= 82, "a line shortened around the match"

    # The assistant's text counts (the offline model repeats the message in its reply);
    # the JSON around the text does not: every message's meta holds a run_id.
    replies = search(env, folder, "you SAID")
    assert {item["match"]["role"] for item in replies} == {"assistant"}
    assert len(replies) == 5
    assert search(env, folder, "run_id") == []
    assert search(env, folder, "role") == []

    table = hookline("sessions", "search", "gateway", env=env, cwd=folder)
    assert table.returncode == 0, table.stderr
    header, first, first_match, second, second_match = table.stdout.splitlines()
    assert header.split() == ["SESSION", "LAST", "ACTIVITY", "TITLE"]
    assert first.startswith("gamma ") and first.endswith(" the gateway is down again")
    assert first_match.startswith("    assistant: ") and "gateway" in first_match
    assert second.startswith("alpha ") and second_match.startswith("    ")

    nothing = hookline("sessions", "search", "zebra", env=env, cwd=folder)
    assert nothing.returncode == 0, nothing.stderr
    assert nothing.stdout.strip() == "(no session mentions 'zebra')"
    assert search(env, folder, "zebra") == []
    empty = hookline("sessions", "search", "  ", env=env, cwd=folder)
    assert empty.returncode == 1
    assert empty.stderr.strip() == ("error: give some text to search for "
                                    "(hookline sessions search TEXT)")


def test_search_shows_a_hostile_match_harmlessly(env: dict[str, str], folder: Path) -> None:
    run(env, folder, "--session", "hostile", HOSTILE)
    # The newest match is the offline model's reply, which repeats the message.
    (found,) = search(env, folder, "pwned")
    assert found["match"]["role"] == "assistant"
    assert 'said: "title ]0;pwned and [2J clear second line"' in found["match"]["line"]
    shown = on_a_terminal(env, folder, "sessions", "search", "PWNED")
    assert b"\x1b" not in shown and b"\x07" not in shown
    assert b'    assistant: \xe2\x80\xa6model] You said: "title ]0;pwned and [2J' in shown
    assert b"hostile" in shown and b"title ]0;pwned and [2J clear second line" in shown


def test_show_json_on_a_terminal_escapes_what_is_not_printable(env: dict[str, str],
                                                                folder: Path) -> None:
    """JSON escapes ASCII's control characters itself, not the 8-bit CSI (U+009B), DEL or
    a right-to-left override: on a terminal they are escaped too; piped, the JSON is as
    stored."""
    said = "a \u009b2J b \u202e evil \x7f end"
    run(env, folder, "--session", "marks", said)
    shown = on_a_terminal(env, folder, "sessions", "show", "marks", "--json")
    for raw in ("\u009b", "\u202e", "\x7f"):
        assert raw.encode() not in shown
    assert b'"content": "a \\u009b2J b \\u202e evil \\u007f end"' in shown
    piped = hookline("sessions", "show", "marks", "--json", env=env, cwd=folder)
    entries = json.loads(piped.stdout)
    assert said in [entry["payload"].get("content") for entry in entries]
    assert "\u202e" in piped.stdout, "a pipe gets the characters as they are"


def test_show_last_gives_only_the_last_turns(env: dict[str, str], folder: Path) -> None:
    for message in ("turn one", "turn two", "turn three"):
        run(env, folder, "--session", "counted", message)
    shown = hookline("sessions", "show", "counted", "--last", "2", env=env, cwd=folder)
    assert shown.returncode == 0, shown.stderr
    header = shown.stdout.splitlines()[0]
    assert header.startswith("session counted (tape ") and "the last 2 of 3 turns)" in header
    assert "you: turn two" in shown.stdout and "you: turn three" in shown.stdout
    assert "turn one" not in shown.stdout and "session/start" not in shown.stdout
    assert shown.stdout.splitlines()[1] == "you: turn two"

    everything = hookline("sessions", "show", "counted", "--last", "9", env=env, cwd=folder)
    assert "the last 3 of 3 turns)" in everything.stdout
    assert "--- session/start" in everything.stdout and "you: turn one" in everything.stdout

    raw = hookline("sessions", "show", "counted", "--last", "1", "--json", env=env, cwd=folder)
    entries = json.loads(raw.stdout)
    assert entries[0]["payload"] == {"role": "user", "content": "turn three"}
    assert [entry["kind"] for entry in entries] == ["message", "message", "event"]

    for bad in ("0", "-1"):
        refused = hookline("sessions", "show", "counted", "--last", bad, env=env, cwd=folder)
        assert refused.returncode == 1
        assert refused.stderr.strip() == (f"error: --last takes a positive number of turns, "
                                          f"got {bad}")
    words = hookline("sessions", "show", "counted", "--last", "two", env=env, cwd=folder)
    assert words.returncode == 2
    assert "Invalid value for '--last': 'two' is not a valid int" in words.stderr


def test_rename_titles_a_session_for_list_and_search(env: dict[str, str],
                                                     folder: Path) -> None:
    run(env, folder, "--session", "alpha", "the first message")
    run(env, folder, "--session", "beta", "another session")
    before = {item["session_id"]: item for item in sessions(env, folder)}

    done = hookline("sessions", "rename", "alpha", "Parser  work\n", env=env, cwd=folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "renamed session alpha: Parser work"
    assert titles(env, folder) == {"alpha": "Parser work", "beta": "another session"}
    assert search(env, folder, "first message")[0]["title"] == "Parser work"

    again = hookline("sessions", "rename", "alpha", "Lexer work", env=env, cwd=folder)
    assert again.returncode == 0, again.stderr
    after = {item["session_id"]: item for item in sessions(env, folder)}
    assert after["alpha"]["title"] == "Lexer work", "renaming again replaces the title"
    # A rename is not activity: the order, the dates and the turns stay as they were,
    # and --continue still picks the session last talked to.
    assert [item["session_id"] for item in sessions(env, folder)] == ["beta", "alpha"]
    assert after["alpha"]["last_activity"] == before["alpha"]["last_activity"]
    assert after["alpha"]["turns"] == 1
    run(env, folder, "--continue", "carry on")
    assert {item["session_id"]: item["turns"] for item in sessions(env, folder)} == {
        "alpha": 1, "beta": 2}
    run(env, folder, "--session", "alpha", "back to alpha")
    transcript = hookline("sessions", "show", "alpha", env=env, cwd=folder).stdout
    assert "--- renamed: Parser work" in transcript and "--- renamed: Lexer work" in transcript
    assert titles(env, folder)["alpha"] == "Lexer work"

    hostile = hookline("sessions", "rename", "beta", "\x1b[2Jwiped\x07", env=env, cwd=folder)
    assert hostile.returncode == 0, hostile.stderr
    assert titles(env, folder)["beta"] == "[2Jwiped"


def test_rename_refuses_an_empty_title_and_an_unknown_session(env: dict[str, str],
                                                              folder: Path) -> None:
    run(env, folder, "--session", "alpha", "the first message")
    for empty in ("", "  \n\t"):
        refused = hookline("sessions", "rename", "alpha", empty, env=env, cwd=folder)
        assert refused.returncode == 1
        assert refused.stderr.strip() == (
            "error: a session's title cannot be empty; give some text, for example: "
            "hookline sessions rename ID 'fixing the parser'")
    too_long = hookline("sessions", "rename", "alpha", "t" * 201, env=env, cwd=folder)
    assert too_long.returncode == 1
    assert "at most 200 characters (this one has 201)" in too_long.stderr
    unknown = hookline("sessions", "rename", "nosuch", "A title", env=env, cwd=folder)
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == (f"error: no session 'nosuch' in {folder.resolve()} or "
                                      f"elsewhere; 'hookline sessions' lists them")
    assert titles(env, folder) == {"alpha": "the first message"}, "nothing was renamed"
    assert sessions(env, folder)[0]["entries"] == 4, "nothing was written"
