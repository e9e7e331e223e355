"""What `hookline run` shows of the work behind a reply, through the console script: a
line per tool call and per result, the first lines of a command's output (all of them
with `-v`) and the diff of each file tool's change on stderr (coloured only on a
terminal), the reply alone on stdout, nothing but the reply with `-q`, and the turn's
token counts with `--usage`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from terminal_support import TMUX, Terminal, clean_env
from test_cli import hookline

from hookline.builtins.terminal import FileChanges, UsageTotals, render_diff
from hookline.builtins.terminal.tool_notes import call_line, result_lines

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
FIX = {"path": "calc.py", "old": "    return a - b\n\n\ndef sub",
       "new": "    return a + b\n\n\ndef sub"}


def workspace_and_env(tmp_path: Path, model: str = "offline") -> tuple[Path, dict[str, str]]:
    """A workspace beside its hookline home, and the model chosen on purpose (no notice)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return workspace, {**clean_env(tmp_path / "home"), "HOOKLINE_MODEL": model}


def scripted(tmp_path: Path, turns: list[dict[str, object]]) -> str:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(turns), encoding="utf-8")
    return f"scripted:{script}"


def fixing_script(tmp_path: Path) -> str:
    """The model of the daily case: one edit, then a one-line reply."""
    return scripted(tmp_path, [
        {"tool_calls": [{"name": "fs_edit", "arguments": FIX}],
         "usage": {"input_tokens": 120, "output_tokens": 8, "cached_tokens": 100}},
        {"text": "Fixed add().", "usage": {"input_tokens": 200, "output_tokens": 5}},
    ])


@pytest.mark.parametrize("stream", [False, True])
def test_an_edit_shows_its_call_its_result_and_its_diff(tmp_path: Path, stream: bool) -> None:
    workspace, env = workspace_and_env(tmp_path)
    env["HOOKLINE_MODEL"] = fixing_script(tmp_path)
    (workspace / "calc.py").write_text(BUGGY)
    done = hookline("run", *(["--stream"] if stream else []), "fix the bug in calc.py",
                    env=env, cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert (workspace / "calc.py").read_text() == BUGGY.replace("a - b", "a + b", 1)
    assert done.stdout == "Fixed add().\n", "stdout is the reply alone"
    assert done.stderr.splitlines() == [
        call_line({"name": "fs_edit", "arguments": json.dumps(FIX)}),
        "[tool] fs_edit ok (1 line, 34 chars): replaced 1 occurrence in 'calc.py'",
        "--- calc.py",
        "+++ calc.py",
        "@@ -1,5 +1,5 @@",
        " def add(a, b):",
        "-    return a - b",
        "+    return a + b",
        " ",
        " ",
        " def sub(a, b):",
    ]
    assert "\x1b" not in done.stdout + done.stderr, "piped output carries no escape sequence"


def test_two_edits_of_one_file_in_a_step_show_one_diff_after_both(tmp_path: Path) -> None:
    workspace, env = workspace_and_env(tmp_path)
    second = {"path": "calc.py", "old": "def sub(a, b):", "new": "def subtract(a, b):"}
    env["HOOKLINE_MODEL"] = scripted(tmp_path, [
        {"tool_calls": [{"name": "fs_edit", "arguments": FIX},
                        {"name": "fs_edit", "arguments": second}]},
        {"text": "Done."},
    ])
    (workspace / "calc.py").write_text(BUGGY)
    done = hookline("run", "fix and rename", env=env, cwd=workspace)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert [line.split(" ", 2)[2][:2] for line in lines[:4]] == ['{"', '{"', "ok", "ok"]
    assert lines[4:] == ["--- calc.py", "+++ calc.py", "@@ -1,6 +1,6 @@", " def add(a, b):",
                         "-    return a - b", "+    return a + b", " ", " ",
                         "-def sub(a, b):", "+def subtract(a, b):", "     return a - b"]


def test_a_new_file_is_all_added_and_a_rewrite_is_a_real_diff(tmp_path: Path) -> None:
    workspace, env = workspace_and_env(tmp_path)
    new = hookline("run", '/tool fs_write {"path": "notes/a.txt", "content": "one\\ntwo\\n"}',
                   env=env, cwd=workspace)
    assert new.returncode == 0, new.stderr
    assert new.stderr.splitlines()[1:] == [
        "[tool] fs_write ok (1 line, 30 chars): wrote 8 bytes to 'notes/a.txt'",
        "--- /dev/null", "+++ notes/a.txt", "@@ -0,0 +1,2 @@", "+one", "+two"]
    again = hookline("run", '/tool fs_write {"path": "notes/a.txt", "content": "one\\n2\\n"}',
                     env=env, cwd=workspace)
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines()[2:] == [
        "--- notes/a.txt", "+++ notes/a.txt", "@@ -1,2 +1,2 @@", " one", "-two", "+2"]


def test_a_long_diff_is_cut_and_a_failed_call_has_none(tmp_path: Path) -> None:
    workspace, env = workspace_and_env(tmp_path)
    content = "".join(f"line {n}\n" for n in range(100))
    long = hookline("run", "/tool fs_write " + json.dumps({"path": "long.txt",
                                                           "content": content}),
                    env=env, cwd=workspace)
    assert long.returncode == 0, long.stderr
    lines = long.stderr.splitlines()
    assert len(lines) == 2 + 40 + 1, long.stderr
    assert lines[-2] == "+line 36" and lines[-1] == "... 63 more lines"
    assert len(lines[0]) <= 100 and lines[0].endswith("…"), "the call line is shortened"
    failed = hookline("run", '/tool fs_edit {"path": "long.txt", "old": "absent", "new": "x"}',
                      env=env, cwd=workspace)
    assert failed.returncode == 0, failed.stderr
    assert failed.stderr.splitlines()[1].startswith(
        "[tool] fs_edit failed: fs.edit: 'old' text not found in 'long.txt'")
    assert len(failed.stderr.splitlines()) == 2, "a call that changed nothing shows no diff"


def test_control_characters_in_arguments_and_content_reach_stderr_escaped(
        tmp_path: Path) -> None:
    workspace, env = workspace_and_env(tmp_path)
    hostile = "title\x1b]0;pwned\x07\x1b[2J"
    done = hookline("run", "/tool fs_write " + json.dumps({"path": "h.txt", "content": hostile}),
                    env=env, cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert (workspace / "h.txt").read_text() == hostile
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert "+title\\x1b]0;pwned\\x07\\x1b[2J" in done.stderr.splitlines()


TWENTY = '/tool shell {"command": "seq 1 20; echo oops >&2"}'
"""A command whose output (what the model sees) is 24 lines: its exit code, the stdout
header and 20 lines, the stderr header and one line."""


def test_a_commands_output_shows_its_first_lines_then_how_many_more(tmp_path: Path) -> None:
    workspace, env = workspace_and_env(tmp_path)
    done = hookline("run", TWENTY, env=env, cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[1:] == [
        "[tool] shell ok (24 lines, 98 chars): exit code: 0",
        "  --- stdout ---", *(f"  {n}" for n in range(1, 8)), "  ... 15 more lines"]


def test_verbose_shows_the_whole_output_and_quiet_none(tmp_path: Path) -> None:
    workspace, env = workspace_and_env(tmp_path)
    verbose = hookline("run", "-v", TWENTY, env=env, cwd=workspace)
    assert verbose.returncode == 0, verbose.stderr
    assert verbose.stderr.splitlines()[1:] == [
        "[tool] shell ok (24 lines, 98 chars): exit code: 0",
        "  --- stdout ---", *(f"  {n}" for n in range(1, 21)), "  --- stderr ---", "  oops"]
    quiet = hookline("run", "-q", TWENTY, env=env, cwd=workspace)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == "" and "oops" in quiet.stdout, "the model still saw it all"


def test_output_lines_are_cut_escaped_and_keep_secrets_hidden(tmp_path: Path) -> None:
    workspace, env = workspace_and_env(tmp_path)
    command = ("echo postgresql://app:hunter2@db.internal/app; printf 'a\\033[2Jb\\n'; "
               "head -c 500 /dev/zero | tr '\\0' x")
    done = hookline("run", "/tool shell " + json.dumps({"command": command}), env=env,
                    cwd=workspace)
    assert done.returncode == 0, done.stderr
    url, escaped, long = done.stderr.splitlines()[3:6]
    assert long == "  " + "x" * 197 + "…", "cut to 200 characters when stderr is no terminal"
    assert escaped == "  a\\x1b[2Jb" and "\x1b" not in done.stderr
    assert url == "  postgresql://***@db.internal/app"
    assert "hunter2" in done.stdout, "the model was given the output as it was"


@pytest.mark.parametrize("stream", [False, True])
def test_quiet_prints_the_reply_and_nothing_else(tmp_path: Path, stream: bool) -> None:
    workspace, env = workspace_and_env(tmp_path)
    env["HOOKLINE_MODEL"] = fixing_script(tmp_path)
    (workspace / "calc.py").write_text(BUGGY)
    done = hookline("run", "-q", *(["--stream"] if stream else []), "fix the bug", env=env,
                    cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("Fixed add().\n", "")
    assert "a + b" in (workspace / "calc.py").read_text(), "the tool still ran"


def test_usage_sums_the_turns_model_calls(tmp_path: Path) -> None:
    workspace, env = workspace_and_env(tmp_path)
    env["HOOKLINE_MODEL"] = fixing_script(tmp_path)
    (workspace / "calc.py").write_text(BUGGY)
    done = hookline("run", "-q", "--usage", "fix the bug", env=env, cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Fixed add().\n"
    assert done.stderr == ("usage: 320 tokens in (100 cached), 13 out, over 2 model calls; "
                           "cost not reported\n"
                           "session: 320 tokens in (100 cached), 13 out, over 2 model calls; "
                           "cost not reported\n"
                           "context: 200 of 128,000 tokens (0%)\n")  # the last call's input


def test_usage_of_the_offline_model_is_its_word_counts(tmp_path: Path) -> None:
    workspace, env = workspace_and_env(tmp_path)
    done = hookline("run", "--usage", "hello there", env=env, cwd=workspace)
    assert done.returncode == 0, done.stderr
    found = re.fullmatch(r"usage: (\d+) tokens in \(0 cached\), (\d+) out, over 1 model "
                         r"call; cost not reported\nsession: \1 tokens in \(0 cached\), \2 out, "
                         r"over 1 model call; cost not reported\n"
                         r"context: \1 of 128,000 tokens \(0%\)\n", done.stderr)
    assert found, done.stderr
    assert int(found[1]) >= 2 and int(found[2]) == len(done.stdout.split())


def test_usage_says_so_when_the_model_reports_none(tmp_path: Path) -> None:
    workspace, env = workspace_and_env(tmp_path)
    env["HOOKLINE_MODEL"] = scripted(tmp_path, [{"text": "no counts"}])
    done = hookline("run", "--usage", "hi", env=env, cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "no counts\n"
    # The session's tape has no counts either: no session line.
    assert done.stderr == "usage: not reported (the model gave no token counts for its 1 call)\n"


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_on_a_terminal_the_diff_is_coloured(terminal: Terminal) -> None:
    (terminal.cwd / "a.txt").write_text("old\n")
    terminal.start("diff", "run", '/tool fs_write {"path": "a.txt", "content": "new\\n"}')
    terminal.wait_for(lambda s: "EXIT=0" in s, "the end of the run")
    # With -e, tmux writes the screen's colours as it renders them (its own sequences).
    screen = terminal.tmux("capture-pane", "-p", "-e", "-t", terminal.target)
    sgr = r"(?:\x1b\[[0-9;]*m)*"
    assert re.search(rf"\x1b\[31m{sgr}-old", screen), screen
    assert re.search(rf"\x1b\[32m{sgr}\+new", screen), screen
    assert re.search(rf"\x1b\[36m{sgr}@@ -1 \+1 @@", screen), screen
    assert re.search(rf"^{sgr}\[tool\] fs_write ok", screen, re.MULTILINE), screen


# -- the parts, on real files ------------------------------------------------------------


@pytest.mark.anyio
async def test_a_file_not_changed_as_the_call_says_is_shown_from_the_arguments(
        tmp_path: Path) -> None:
    """When the workspace file is not what the call made of it (the session's environment
    is another machine's, say), the diff comes from the call's arguments alone."""
    (tmp_path / "calc.py").write_text(BUGGY)
    changes = FileChanges(str(tmp_path))
    call = {"name": "fs_edit", "arguments": json.dumps(FIX)}
    await changes.before(call)
    record = {"name": "fs_edit", "outcome": "ran", "arguments": FIX, "output": "replaced"}
    diffs = await changes.diffs([record])  # the file here never changed
    assert diffs[0] == ["--- calc.py", "+++ calc.py",
                        "@@ the replaced text (line numbers not known) @@",
                        "-    return a - b", "+    return a + b", " ", " ", " def sub"]
    write = {"name": "fs_write", "outcome": "ran", "output": "wrote",
             "arguments": {"path": "calc.py", "content": "x\n"}}
    await changes.before({"name": "fs_write", "arguments": write["arguments"]})
    assert (await changes.diffs([write]))[0] == [
        "--- calc.py (what was there before is not known)", "+++ calc.py", "@@ -0,0 +1 @@",
        "+x"]


@pytest.mark.anyio
async def test_a_path_outside_the_workspace_is_never_read(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("do not show\n")
    changes = FileChanges(str(workspace))
    arguments = {"path": "../secret.txt", "old": "do not show", "new": "shown"}
    await changes.before({"name": "fs_edit", "arguments": json.dumps(arguments)})
    diffs = await changes.diffs([{"name": "fs_edit", "outcome": "ran", "arguments": arguments}])
    assert "-do not show" in diffs[0] and "@@ the replaced text (line numbers not known) @@" \
        in diffs[0], "only the arguments are shown, never the file outside"


def test_a_question_about_every_occurrence_of_a_large_file_says_so(tmp_path: Path) -> None:
    """A file too large to read for the question: the diff from the arguments says the
    edit replaces every place the text occurs."""
    from hookline.builtins.terminal.tool_view import MAX_SNAPSHOT_BYTES, proposed_change

    (tmp_path / "big.cfg").write_text("allow_network = false\n" * (MAX_SNAPSHOT_BYTES // 10))
    arguments = {"path": "big.cfg", "old": "allow_network = false",
                 "new": "allow_network = true", "replace_all": True}
    lines, refused = proposed_change(str(tmp_path), "fs_edit", arguments)
    assert refused is None
    assert "@@ the replaced text, at every place it occurs (replace_all: the places are " \
           "not known) @@" in lines, lines


def test_render_diff_colours_only_when_asked() -> None:
    lines = ["--- a", "+++ a", "@@ -1 +1 @@", "-old", "+new", " same"]
    assert render_diff(lines, colour=False) == lines
    assert render_diff(lines, colour=True) == [
        "\x1b[1m--- a\x1b[0m", "\x1b[1m+++ a\x1b[0m", "\x1b[36m@@ -1 +1 @@\x1b[0m",
        "\x1b[31m-old\x1b[0m", "\x1b[32m+new\x1b[0m", " same"]
    assert render_diff(lines, colour=False, limit=2) == ["--- a", "+++ a", "... 4 more lines"]


def test_result_lines_of_records_without_an_outcome() -> None:
    """Another agent's records may carry only `is_error`."""
    assert result_lines([{"name": "x", "output": "bad\nworse", "is_error": True},
                         {"name": "y", "output": ""}]) == [
        "[tool] x failed: bad\\nworse", "[tool] y ok (0 lines, 0 chars): (no output)"]


def test_usage_totals_add_a_reported_cost() -> None:
    totals = UsageTotals()
    totals.calls = 2
    totals.add({"prompt_tokens": 10, "completion_tokens": 2, "cost": 0.25})
    totals.add({"input_tokens": 5, "output_tokens": 1, "cost": 0.5})
    assert totals.line() == ("usage: 15 tokens in (0 cached), 3 out, over 2 model calls; "
                             "cost 0.75 (as reported)")
    totals.calls = 3
    assert "(1 reported none)" in totals.line()
