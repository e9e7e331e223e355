"""Sessions as first-class: `run` in a fresh session by default, `--new`, `--continue` and
`--session`, the folder's current session, and `hookline sessions`
list/show/archive/delete, through the real console script on a fresh hookline home."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from terminal_support import TMUX, Terminal
from test_cli import hookline

SLEEPER = '/tool shell {"command": "touch started; sleep 60"}'


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


def run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = hookline("run", *args, env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done


def sessions(env: dict[str, str], cwd: Path, *args: str) -> list[dict[str, Any]]:
    done = hookline("sessions", "list", "--json", *args, env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def turns(env: dict[str, str], cwd: Path) -> dict[str, int]:
    return {item["session_id"]: item["turns"] for item in sessions(env, cwd)}


def test_each_run_starts_a_fresh_current_session_and_keeps_the_old_ones(
        env: dict[str, str], folder: Path) -> None:
    first = run(env, folder, "first")
    assert "new session" not in first.stderr, "the default fresh session is not announced"
    fresh = run(env, folder, "--new", "second")
    (notice,) = [line for line in fresh.stderr.splitlines() if line.startswith("new session")]
    new_id = notice.split()[2]
    assert new_id.startswith("cli:") and "previous one is kept" in notice
    assert "new session" not in fresh.stdout, "stdout stays the reply alone"
    run(env, folder, "-c", "third goes to the new one")
    counted_turns = turns(env, folder)
    (first_id,) = set(counted_turns) - {new_id}
    assert first_id.startswith("cli:") and counted_turns == {first_id: 1, new_id: 2}
    shown = hookline("sessions", "show", new_id, "--json", env=env, cwd=folder)
    counted = {item["session_id"]: item["entries"] for item in sessions(env, folder)}
    assert counted[new_id] == len(json.loads(shown.stdout)) > 4

    table = hookline("sessions", env=env, cwd=folder)
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["SESSION", "TITLE", "TURNS", "LAST", "ACTIVITY", "WORKSPACE"]
    assert rows[0].startswith(f"* {new_id} ") and rows[0].endswith(str(folder.resolve()))
    assert rows[1].startswith(f"  {first_id} ")

    # Another folder has its own sessions.
    elsewhere = folder.parent / "other"
    elsewhere.mkdir()
    run(env, elsewhere, "somewhere else")
    [here] = sessions(env, elsewhere, "--here")
    assert here["workspace"] == str(elsewhere.resolve()) and here["turns"] == 1


def test_continue_picks_the_most_recent_session_of_the_folder(
        env: dict[str, str], folder: Path) -> None:
    first = hookline("run", "-c", "zero", env=env, cwd=folder)
    assert "no session of this folder to continue: this one starts one" in first.stderr
    run(env, folder, "--session", "alpha", "one")
    run(env, folder, "--session", "beta", "two")
    run(env, folder, "--session", "alpha", "three")
    run(env, folder, "--continue", "four")  # alpha was active last
    run(env, folder, "-c", "five")  # and still is
    assert turns(env, folder) == {"cli:default": 1, "alpha": 4, "beta": 1}
    both = hookline("run", "--new", "--continue", "x", env=env, cwd=folder)
    assert both.returncode == 2, "a usage error"
    assert ("--new and --continue choose the session in different ways; give one of them"
            in both.stderr)
    for hostile_id in ("a\x1b]0;b", "c1\x9b2J", "file\u202eevil.txt"):  # C1, reordering
        hostile = hookline("run", "--session", hostile_id, "x", env=env, cwd=folder)
        assert hostile.returncode == 2 and "--session must not contain control characters" \
            in hostile.stderr
    emoji = hookline("run", "--session", "family \U0001f468\u200d\U0001f469", "x", env=env,
                     cwd=folder)
    assert emoji.returncode == 0, emoji.stderr


def _policy_script(folder: Path) -> str:
    tests = Path(__file__).parents[1]
    return textwrap.dedent(f'''
        import sys
        sys.path[:0] = [{str(tests / "builtins" / "agent")!r}, {str(tests)!r}]
        from hookline.cli.app import create_app
        from hookline.kernel.framework.core import Framework
        from test_what_ran import Policy
        framework = Framework(workspace={str(folder)!r})
        framework.load_hooks()
        framework.registry.register(Policy(), name="policy")
        create_app(framework)(sys.argv[1:])
    ''')


def test_show_gives_a_transcript_of_what_really_ran(env: dict[str, str], folder: Path) -> None:
    script = _policy_script(folder)
    for message, status in (('/tool shell {"command": "echo as asked"}', 0),
                            ('/tool fs_write {"path": "a", "content": "x"}', 3),  # denied
                            ('/tool fs_read {"path": "secret"}', 0)):
        done = subprocess.run([sys.executable, "-c", script, "run", "--session", "work",
                               message], env=env, cwd=folder, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == status, done.stderr
    # A run killed while its tool runs: recovered as interrupted on the next opening.
    victim = subprocess.Popen([str(Path(sys.executable).parent / "hookline"), "run",
                               "--session", "work", SLEEPER],
                              env=env, cwd=folder, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 30
    while not (folder / "started").exists():
        assert time.monotonic() < deadline, "the killed run's tool never started"
        time.sleep(0.05)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(10)

    shown = hookline("sessions", "show", "work", env=env, cwd=folder)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("session work (tape ")
    assert "--- session/start" in lines[1]
    text = shown.stdout
    assert 'you: /tool shell {"command": "echo as asked"}' in text
    assert '[tool] shell {"command": "echo as asked"}' in text
    assert ('[tool] shell ran with {"command": "echo rewritten"} (rewritten before it ran: '
            'your edit or a plugin; asked: {"command": "echo as asked"})') in text
    assert "[result] shell: exit code: 0" in text
    assert "[tool] fs_write denied: writes are not allowed here" in text
    assert "[tool] fs_read not run: a plugin gave its result" in text
    assert "[result] fs_read: canned contents" in text
    assert f"you: {SLEEPER}" in text
    assert "(turn interrupted" in text
    assert text.count("you: ") == 4


def test_archive_and_delete_ask_first_and_keep_or_drop_the_session(
        env: dict[str, str], folder: Path, tmp_path: Path) -> None:
    run(env, folder, "--session", "keep-me", "to be archived")
    run(env, folder, "--session", "drop-me", "to be deleted")

    refused = hookline("sessions", "delete", "drop-me", env=env, cwd=folder, input="y\n")
    assert refused.returncode == 1 and "pass --yes to confirm" in refused.stderr
    assert set(turns(env, folder)) == {"keep-me", "drop-me"}, "nothing removed unconfirmed"

    archived = hookline("sessions", "archive", "keep-me", "--yes", env=env, cwd=folder)
    assert archived.returncode == 0, archived.stderr
    (path,) = (tmp_path / "home" / "archive").iterdir()
    assert archived.stdout.strip() == f"archived to {path}"
    assert path.name.startswith("keep-me__") and path.stat().st_mode & 0o777 == 0o600
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert {"role": "user", "content": "to be archived"} in [r["payload"] for r in records]

    deleted = hookline("sessions", "delete", "drop-me", "-y", env=env, cwd=folder)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == "deleted session drop-me (4 entries)"
    assert sessions(env, folder) == []
    gone = hookline("sessions", "show", "drop-me", env=env, cwd=folder)
    assert gone.returncode == 1
    assert gone.stderr.startswith("error: no session 'drop-me' in ")


def test_a_session_is_found_from_another_folder_unless_two_share_its_id(
        env: dict[str, str], folder: Path) -> None:
    other = folder.parent / "other"
    other.mkdir()
    run(env, folder, "--session", "mine", "written in project")
    found = hookline("sessions", "show", "mine", env=env, cwd=other)
    assert found.returncode == 0 and "you: written in project" in found.stdout
    run(env, other, "--session", "mine", "written in other")
    here = hookline("sessions", "show", "mine", env=env, cwd=other)
    assert "you: written in other" in here.stdout and "written in project" not in here.stdout
    third = folder.parent / "third"
    third.mkdir()
    ambiguous = hookline("sessions", "show", "mine", env=env, cwd=third)
    assert ambiguous.returncode == 1
    assert "exists in several folders" in ambiguous.stderr and "-w FOLDER" in ambiguous.stderr


def test_a_terminal_gets_a_transcript_with_control_characters_escaped(
        env: dict[str, str], folder: Path) -> None:
    run(env, folder, "title \x1b]0;pwned\x07 and \x1b[2J clear")
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run([str(Path(sys.executable).parent / "hookline"), "sessions",
                               "show"], env=env, cwd=folder, stdout=secondary,
                              stderr=subprocess.PIPE, timeout=60)
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
    assert b"\x1b" not in shown and b"\x07" not in shown
    assert b"you: title \\x1b]0;pwned\\x07 and \\x1b[2J clear" in shown


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_delete_asks_on_a_terminal_and_a_no_keeps_the_session(terminal: Terminal) -> None:
    env = terminal.env
    run(env, terminal.cwd, "--session", "asked", "keep me unless I say yes")
    terminal.start("no", "sessions", "delete", "asked")
    terminal.wait_for(lambda s: "for good (no copy is kept)? [y/N]:" in s, "the question")
    terminal.type("n")
    screen = terminal.wait_for(lambda s: "EXIT=" in s, "the answer taken")
    assert "nothing changed" in screen and "EXIT=1" in screen
    assert "asked" in turns(env, terminal.cwd)
    terminal.start("yes", "sessions", "delete", "asked")
    terminal.wait_for(lambda s: "[y/N]:" in s, "the question again")
    terminal.type("y")
    screen = terminal.wait_for(lambda s: "EXIT=" in s, "the deletion")
    assert "deleted session asked (" in screen and "EXIT=0" in screen
    assert turns(env, terminal.cwd) == {}
