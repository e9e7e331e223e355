"""`hookline chat` and `hookline run` say what was not answered when a signal or the end of
input stops them: real console scripts in subprocesses, a turn held open by a shell command
in the workspace (it marks `held`, then sleeps), the signal sent once the mark exists."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from plugin_site import install_plugin
from terminal_support import clean_env
from test_cli import HOOKLINE, hookline

pytestmark = pytest.mark.skipif(os.name != "posix", reason="signals are POSIX")

HELD = "/tool shell " + json.dumps({"command": "touch held; sleep 60"})


def signalled(args: list[str], workspace: Path, signum: int, stdin: str | None = None,
              mark: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `hookline ARGS` (with `env` added), send `signum` once its turn has made `mark`
    (by default the workspace's `held`), wait for it."""
    assert HOOKLINE
    mark = mark or workspace / "held"
    typed = workspace.parent / "stdin.txt"  # piped input: read to its end at once
    typed.write_text(stdin or "")
    with typed.open() as source:
        proc = subprocess.Popen([HOOKLINE, *args], cwd=workspace, text=True,
                                env={**clean_env(workspace.parent / "home"), **env},
                                stdin=source, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not mark.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"the turn never made {mark.name}"
            time.sleep(0.02)
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def not_answered(stdout: str) -> list[str]:
    return [line.removeprefix("not answered: ") for line in stdout.splitlines()
            if line.startswith("not answered: ")]


def test_sigterm_during_a_piped_chat_names_each_line_left_unanswered(workspace: Path) -> None:
    done = signalled(["chat", "--session", "s"], workspace, signal.SIGTERM,
                     f"{HELD}\nthe second line\n")
    assert done.returncode == 128 + signal.SIGTERM, done
    assert not_answered(done.stdout) == [HELD, "the second line"], done.stdout
    assert "Traceback" not in done.stderr


def test_ctrl_c_after_the_end_of_a_piped_chat_cancels_and_names_the_lines(
        workspace: Path) -> None:
    done = signalled(["chat", "--session", "s"], workspace, signal.SIGINT,
                     f"{HELD}\nthe second line\n")
    assert done.returncode == 1, done
    assert "(turn cancelled)" in done.stdout
    assert not_answered(done.stdout) == [HELD, "the second line"], done.stdout


def test_a_piped_chat_whose_lines_were_answered_reports_nothing(workspace: Path) -> None:
    done = hookline("chat", "--session", "s", input="hello there\n",
                    env=clean_env(workspace.parent / "home"), cwd=workspace)
    assert done.returncode == 0, done
    assert 'You said: "hello there"' in done.stdout
    assert not_answered(done.stdout) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_during_hookline_run_says_the_message_was_not_answered(
        workspace: Path, signum: int) -> None:
    done = signalled(["run", HELD], workspace, signum)
    assert done.returncode == 128 + signum, done
    name = signal.Signals(signum).name
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {name} received: the turn was cancelled and the message "
                      f"was not answered"], done.stderr  # one line (after the tool line)
    assert done.stderr.endswith(errors[0] + "\n")
    assert done.stdout == ""


def test_a_signal_during_a_streamed_run_ends_the_streamed_line(workspace: Path) -> None:
    """What streamed before the signal stays on stdout, its line ended, so the shell's
    prompt does not start after it."""
    done = signalled(["run", "--stream", HELD], workspace, signal.SIGINT)
    assert done.returncode == 130, done
    assert done.stdout.startswith("[offline model] Calling tool") and done.stdout.endswith("\n")


SLOW_SAVE = """
import os
from pathlib import Path

import anyio

from hookline.kernel import hookimpl

MARKS = Path(os.environ["MARKS"])


class SlowSave:
    def __init__(self, framework):
        self.framework = framework

    @hookimpl
    async def save_state(self):
        (MARKS / "saving").write_text("1")
        await anyio.sleep(2)
        (MARKS / "saved").write_text("1")
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_once_the_model_has_finished_lets_hookline_run_finish(
        workspace: Path, tmp_path: Path, signum: int) -> None:
    """The reply is whole; the turn is saving its state (a plugin that takes its time):
    the signal lets it finish, and the reply is printed."""
    site = install_plugin(tmp_path / "site", "slow_save", SLOW_SAVE, "slow = slow_save:SlowSave")
    done = signalled(["run", "hello"], workspace, signum, mark=tmp_path / "saving",
                     PYTHONPATH=str(site), MARKS=str(tmp_path))
    assert done.returncode == 0, done
    assert 'You said: "hello"' in done.stdout and "not answered" not in done.stderr
    assert (tmp_path / "saved").exists()


def test_ctrl_c_before_a_command_took_over_its_signals_exits_quietly() -> None:
    """Ctrl-C while the application is still imported or built (its first tenth of a
    second): status 130 and nothing printed, not a traceback of whatever was importing."""
    code = ("import hookline.cli.app as app\n"
            "def interrupted(*args, **kwargs):\n"
            "    raise KeyboardInterrupt\n"
            "app.main = interrupted\n"
            "from hookline.cli import main\n"
            "main(['run', 'hello'])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "")


BLOCKING_HOOK = """
import os
import time
from pathlib import Path

from hookline.kernel import hookimpl

MARKS = Path(os.environ["MARKS"])


class Blocking:
    def __init__(self, framework):
        self.framework = framework

    @hookimpl
    def load_state(self, message, session_id):
        (MARKS / "blocking").write_text("1")
        time.sleep(120)  # a sync call without a timeout holds the event loop
        return {}
"""


@pytest.mark.parametrize(("command", "signum"), [
    (["run", "hello"], signal.SIGTERM), (["run", "hello"], signal.SIGINT),
    (["chat"], signal.SIGTERM), (["chat"], signal.SIGINT),
], ids=["run-SIGTERM", "run-SIGINT", "chat-SIGTERM", "chat-SIGINT"])
def test_a_signal_ends_a_process_whose_event_loop_a_plugin_holds(
        workspace: Path, tmp_path: Path, command: list[str], signum: int) -> None:
    """A plugin's sync hook that blocks keeps the loop, and with it the task that takes
    signals, from running: one signal still ends the process, a few seconds later, with
    one line and status 128 + the signal number."""
    from hookline.cli.signals import HELD_SECONDS

    site = install_plugin(tmp_path / "site", "blocking", BLOCKING_HOOK,
                          "blocking = blocking:Blocking")
    started = time.monotonic()
    done = signalled(command, workspace, signum, "hello\n", mark=tmp_path / "blocking",
                     PYTHONPATH=str(site), MARKS=str(tmp_path))
    assert done.returncode == 128 + signum, done
    assert time.monotonic() - started < HELD_SECONDS + 30
    assert "event loop" in done.stderr, done
    assert "held (a plugin's hook that blocks?)" in done.stderr, done
