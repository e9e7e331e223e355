"""The folders that hold a protected path stay where they are: a command that moved one
away (its read-only mount goes with it) could put a copy of its own, with hooks, in its
place. Pinned when the sandbox starts and, for a repository a command made, when it is
protected; without mounts, what is put in place of a known repository is named."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sandbox_support import environment, run_once

MOVE_AWAY = ("mv deep deep.moved; mv deep/down/lib deep/down/lib.moved; "
             "mv .claude .claude.moved; ls deep/down/lib/.git/config .claude/settings.json")
"""Move each folder that holds a protected path away (its read-only mount would go with
it, leaving its place to a copy of the command's)."""


@pytest.mark.anyio
async def test_the_folders_that_hold_a_protected_path_cannot_be_moved_away(
        layout: tuple[Path, Path, Path]) -> None:
    workspace, home, _ = layout
    subprocess.run(["git", "init", "-q", str(workspace / "deep" / "down" / "lib")], check=True)
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text("{}\n")
    result = await run_once(workspace, home,
                            MOVE_AWAY + "; rmdir deep/down; touch deep/down/written")
    assert result.stderr.count("Device or resource busy") == 4, result.stderr
    assert result.returncode == 0, result.stderr  # both still at their paths
    assert (workspace / "deep" / "down" / "written").exists()  # and the folders writable


@pytest.mark.anyio
async def test_the_folders_that_hold_a_repository_made_are_pinned_with_it(
        layout: tuple[Path, Path, Path]) -> None:
    """Protected in the running sandbox, a repository a command made stays at its path
    too: its folders are pinned there (after it, so a command in one of them when that
    happens still sees it read-only)."""
    workspace, home, _ = layout
    env = environment(workspace, home)
    try:
        await env.run("git init -q a/b/made")
        await env.say_what_commands_made()  # as the builtin plugin does after each run
        result = await env.run("mv a a2; mv a/b a/b2; mv a/b/made a/b/made2; "
                               "echo '[core] fsmonitor = evil' >> a/b/made/.git/config")
    finally:
        await env.close()
    assert result.stderr.count("Device or resource busy") == 3, result.stderr
    assert "Read-only file system" in result.stderr
    assert "fsmonitor" not in (workspace / "a" / "b" / "made" / ".git" / "config").read_text()


@pytest.mark.anyio
async def test_a_repository_put_in_place_of_a_known_one_is_named(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    """Without mounts nothing is pinned: a command moves a repository away and puts a
    copy with a hook in its place. Its path was known, but it is another folder now: it
    is named with what git would run there."""
    workspace, home, _ = layout
    subprocess.run(["git", "init", "-q", str(workspace / "vendor" / "lib")], check=True)
    await run_once(workspace, home,
                   "mv vendor/lib vendor/lib.moved && cp -a vendor/lib.moved vendor/lib && "
                   "printf '#!/bin/sh\\n' > vendor/lib/.git/hooks/pre-commit && "
                   "chmod +x vendor/lib/.git/hooks/pre-commit", without=("namespaces",))
    said = [record.getMessage() for record in caplog.records]
    assert any("vendor/lib/.git, which commands made, has git run with your rights: hook "
               "pre-commit" in line for line in said), said
