"""Signals in the sandbox: a command starts with the default dispositions, as in a
terminal, and no signal a command sends from inside ends the helper that runs it (and
with it every other command of the session)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from sandbox_support import environment

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux /proc")


def ignored(status: str) -> set[int]:
    """The signals a `/proc/<pid>/status` text says are ignored."""
    mask = int(next(line for line in status.splitlines() if line.startswith("SigIgn:"))
               .split()[1], 16)
    return {number for number in range(1, 65) if mask >> (number - 1) & 1}


@pytest.mark.anyio
async def test_a_command_starts_with_no_signal_ignored(
    layout: tuple[Path, Path, Path],
) -> None:
    workspace, home, _ = layout
    env = environment(workspace, home)
    try:
        status = await env.run("cat /proc/self/status")
        piped = await env.run("yes | head -n 1")
    finally:
        await env.close()
    assert status.returncode == 0, status
    assert not ignored(status.stdout) & {signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ}
    assert (piped.returncode, piped.stdout, piped.stderr) == (0, "y\n", "")


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["INT", "TERM", "HUP", "QUIT", "USR1", "CHLD"])
async def test_no_signal_from_inside_ends_the_helper(
    layout: tuple[Path, Path, Path], name: str,
) -> None:
    workspace, home, _ = layout
    env = environment(workspace, home)
    try:
        first = await env.run("echo $$")
        attacked = await env.run(f"kill -{name} 1; sleep 0.3; echo survived")
        after = await env.run("echo $$")
    finally:
        await env.close()
    assert attacked.returncode == 0 and attacked.stdout == "survived\n", attacked
    # The same helper ran the command after: a pid namespace's pids count on from it.
    assert int(after.stdout) > int(first.stdout), (first, after)
