"""A real terminal for interactive CLI tests: a private tmux server runs the console
script, the test types keys and reads the screen (capture-pane), polling each
expectation up to a deadline. Shared by the chat and onboard tests.

    term = Terminal(workspace, env)
    term.start("first", "chat", "--session", "s")  # prints EXIT=<status> when it ends
    term.type("hello")
    term.wait_for(lambda screen: "You said" in screen, "the reply")
    term.close()
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

__all__ = ["DEADLINE", "HOOKLINE", "TMUX", "Terminal", "clean_env", "last_line"]

TMUX = shutil.which("tmux")
HOOKLINE = shutil.which("hookline", path=str(Path(sys.executable).parent))

DEADLINE = 30.0


def clean_env(home: Path) -> dict[str, str]:
    """The test's environment without HOOKLINE_* and TMUX* variables, on `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOOKLINE_", "TMUX"))}
    env.update(HOOKLINE_HOME=str(home), LANG="C.UTF-8")
    return env


class Terminal:
    """A private tmux server (its own socket) whose panes run commands in `cwd`."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        assert TMUX and HOOKLINE, "tmux and the hookline console script are needed"
        self.cwd = cwd
        self.env = env
        self.socket = f"hookline-test-{uuid.uuid4().hex[:12]}"
        self.target = ""

    def tmux(self, *args: str) -> str:
        assert TMUX
        done = subprocess.run([TMUX, "-L", self.socket, "-f", os.devnull, "-u", *args],
                              env=self.env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, f"tmux {' '.join(args)} failed: {done.stderr}"
        return done.stdout

    def start(self, name: str, *args: str, marker: str = "EXIT") -> None:
        """Run `hookline ARGS` in a new tmux session; `<marker>=<status>` is printed after
        it, and the pane stays open so the screen can still be read."""
        command = shlex.join([str(HOOKLINE), *args])
        self.tmux("new-session", "-d", "-s", name, "-x", "160", "-y", "50", "-c", str(self.cwd),
                  f"{command}; echo {marker}=$?; sleep 600")
        self.target = name

    def chat(self, name: str, *options: str) -> None:
        """Start `hookline chat`; its exit code is printed after it as CHAT-EXIT=."""
        self.start(name, "chat", *options, marker="CHAT-EXIT")

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.target, "-l", text)
        self.tmux("send-keys", "-t", self.target, "Enter")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.target, *keys)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", self.target, "-S", "-3000")

    def wait_for(self, predicate: Callable[[str], bool], what: str,
                 timeout: float = DEADLINE) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if predicate(screen):
                return screen
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}; the screen shows:\n{screen}")
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run([str(TMUX), "-L", self.socket, "kill-server"], env=self.env,
                       capture_output=True, timeout=30)


def last_line(screen: str) -> str:
    lines = [line.rstrip() for line in screen.splitlines() if line.strip()]
    return lines[-1] if lines else ""
