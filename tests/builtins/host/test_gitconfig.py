"""What a repository's config has git run from its worktree, read as git reads config:
sections, quotes, escapes, comments, continued lines and includes."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from hookline.builtins.host import gitconfig
from hookline.builtins.host.gitconfig import config_entries, run_by_git


@pytest.fixture(autouse=True)
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of the test's own: the user's git config is read too."""
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return home


def repository(tmp_path: Path, config: str) -> tuple[Path, Path]:
    workspace = tmp_path / "workspace"
    git = workspace / ".git"
    git.mkdir(parents=True)
    (git / "config").write_text(config)
    return workspace, git


def test_values_are_read_as_git_reads_them(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        '[core]\n\thooksPath = .husky/_   # husky sets this\n'
        '[Core "ignored subsection"] fsmonitor = "./tools/fs monitor.sh" ; a comment\n'
        '[include]\n  path = ../shared\\\n.gitconfig\n'
        '[alias] bare\n  ; a comment line\n  quoted = "a \\"b\\" \\\\ c\\td"\n'
        '[filter "a \\"quoted\\" ]name"]clean = x\n[Branch.Main]\n\tremote = origin\n')
    entries = config_entries(str(config))
    assert entries == [
        ("core", "", "hookspath", ".husky/_"),
        ("core", "ignored subsection", "fsmonitor", "./tools/fs monitor.sh"),
        ("include", "", "path", "../shared.gitconfig"),
        ("alias", "", "bare", ""),
        ("alias", "", "quoted", 'a "b" \\ c\td'),
        ("filter", 'a "quoted" ]name', "clean", "x"),
        ("branch", "main", "remote", "origin"),
    ]
    assert entries[1].name == "core.ignored subsection.fsmonitor"
    assert entries[0].name == "core.hookspath"


def test_what_git_runs_from_the_workspace_is_found_through_includes(tmp_path: Path) -> None:
    workspace, git = repository(tmp_path, (
        "[core]\n  hooksPath = .husky/_\n  fsmonitor = true\n"
        "[include]\n  path = ../.gitconfig-project\n  path = ~/outside.gitconfig\n"
        '[includeIf "gitdir:~/work/"]\n  path = ../.gitconfig-local\n'))
    (workspace / ".gitconfig-project").write_text(
        "[core]\n  fsmonitor = tools/watch.sh --quiet\n[include]\n  path = .git/config\n")
    (workspace / ".gitconfig-local").write_text("[core]\n  hooksPath = /etc/hooks\n")
    found = run_by_git(str(workspace), str(git), str(workspace))
    assert sorted(os.path.relpath(path, workspace) for path in found) == [
        ".git/config", ".gitconfig-local", ".gitconfig-project", ".husky", ".husky/_",
        "tools/watch.sh"]


def test_a_program_another_key_names_by_a_path_is_found(tmp_path: Path) -> None:
    """A filter, a diff driver, an editor, a credential helper, a pager, a remote's
    `uploadpack`, a `!` alias: git runs them, relative to the worktree; a bare name is
    looked for on PATH, not here."""
    workspace, git = repository(tmp_path, (
        '[filter "lfs"]\n\tclean = ./tools/clean %f\n\tsmudge = git-lfs smudge\n'
        '[diff "pdf"]\n\ttextconv = tools/pdf2text\n'
        "[core]\n\teditor = vim\n\tsshCommand = ./bin/ssh -v\n"
        "[credential]\n\thelper = !./bin/creds get\n\thelper = store\n"
        "[alias]\n\tst = status\n\tship = !./scripts/ship.sh --now\n"
        "[user]\n\tname = ./not/a/program\n[pager]\n\tlog = ./tools/pager\n\tdiff = false\n"
        '[remote "origin"]\n\tuploadpack = bin/upload\n\turl = ./not/a/program\n'))
    found = run_by_git(str(workspace), str(git), str(workspace))
    assert sorted(os.path.relpath(path, workspace) for path in found) == [
        "bin/creds", "bin/ssh", "bin/upload", "scripts/ship.sh", "tools/clean", "tools/pager",
        "tools/pdf2text"]


def test_a_script_an_interpreter_runs_is_found_too(tmp_path: Path) -> None:
    """`sh tools/fsmon.sh`: git runs `sh`, and `sh` runs the worktree's script."""
    workspace, git = repository(tmp_path, (
        "[core]\n\tfsmonitor = sh tools/fsmon.sh --fast\n"
        "[alias]\n\tlint = !python3 lint.py -q\n\tl = !git log --oneline\n"))
    found = run_by_git(str(workspace), str(git), str(workspace))
    assert sorted(os.path.relpath(path, workspace) for path in found) == [
        "lint.py", "tools/fsmon.sh"]


def test_a_linked_worktree_reads_its_repository_s_config(tmp_path: Path) -> None:
    workspace, git = repository(tmp_path, "[core]\n  hooksPath = githooks\n")
    linked = git / "worktrees" / "feature"
    linked.mkdir(parents=True)
    (linked / "commondir").write_text("../..\n")
    top = workspace / "feature"
    top.mkdir()
    found = run_by_git(str(top), str(linked), str(workspace))
    assert found == [str(git), str(top / "githooks")]  # the repository, where its hooks are


def test_a_relative_hooks_folder_of_the_user_s_config_is_each_repository_s(
        tmp_path: Path, user: Path) -> None:
    """`git config --global core.hooksPath .githooks` names a folder of every worktree."""
    workspace, git = repository(tmp_path, "[user]\n\tname = someone\n")
    (user / ".gitconfig").write_text("[core]\n\thooksPath = .githooks\n")
    assert run_by_git(str(workspace), str(git), str(workspace)) == [
        str(workspace / ".githooks")]


def test_includes_are_followed_to_a_bound(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command may make a thousand files that include each other: hookline reads a
    bounded number of them."""
    read: list[str] = []
    entries = gitconfig.config_entries
    monkeypatch.setattr(gitconfig, "config_entries",
                        lambda path, budget=None: read.append(path) or entries(path, budget))
    gitconfig._parsed.cache_clear()  # the user's own config files are read once changed
    workspace, git = repository(tmp_path, "[include]\n" + "".join(
        f"\tpath = ../made/{number}\n" for number in range(1000)))
    (workspace / "made").mkdir()
    for number in range(1000):
        (workspace / "made" / str(number)).write_text("[core]\n\thooksPath = hooks\n")
    found = run_by_git(str(workspace), str(git), str(workspace))
    assert len(read) == gitconfig.MAX_CONFIG_FILES
    assert len([path for path in found if "/made/" in path]) == 1000  # each is protected
    assert str(workspace / "hooks") in found


def test_a_fifo_or_endless_config_neither_hangs_nor_fills_memory(tmp_path: Path) -> None:
    workspace, git = repository(tmp_path, "[include]\n  path = ../fifo\n  path = ../huge\n")
    os.mkfifo(workspace / "fifo")
    with open(workspace / "huge", "wb") as file:
        file.truncate(1 << 30)  # sparse: a gigabyte of zeros, no newline
    found: list[list[str]] = []
    searching = threading.Thread(
        target=lambda: found.append(run_by_git(str(workspace), str(git), str(workspace))),
        daemon=True)
    searching.start()
    searching.join(20)
    assert found, "reading the config hung on the FIFO"
    assert sorted(os.path.relpath(path, workspace) for path in found[0]) == ["fifo", "huge"]


def test_what_git_would_run_in_a_repository_is_listed(tmp_path: Path) -> None:
    """What a repository a command made could have git run: its executable hooks (not
    the samples, not a file that is not executable) and each config entry that names a
    command, a hooks folder, an include or an `ext::` transport; switches and git's own
    commands are not."""
    git = tmp_path / ".git"
    (git / "hooks").mkdir(parents=True)
    for name, mode in (("pre-commit", 0o755), ("pre-push.sample", 0o755),
                       ("post-checkout", 0o644)):
        (git / "hooks" / name).write_text("#!/bin/sh\n")
        (git / "hooks" / name).chmod(mode)
    (git / "hooks" / "post-merge").symlink_to("/nowhere/yet")
    (git / "config").write_text(
        "[core]\n\tbare = false\n\tfsmonitor = true\n\tpager = less -R\n"
        '[pager]\n\tlog = false\n\tdiff = ./show\n[alias]\n\tst = status\n\tx = !evil\n'
        '[remote "origin"]\n\turl = ext::sh -c evil\n\tfetch = +refs/heads/*:refs/x/*\n'
        '[include]\n\tpath = ../more\n[filter "lfs"]\n\tsmudge = git-lfs smudge %f\n')
    (git / "config.worktree").write_text("[core]\n\thooksPath = " + "h" * 200 + "\n")
    assert gitconfig.what_git_runs(str(git)) == [
        "hook pre-commit", "hook post-merge", "core.pager = 'less -R'",
        "pager.diff = './show'", "alias.x = '!evil'", "remote.origin.url = 'ext::sh -c evil'",
        "include.path = '../more'", "filter.lfs.smudge = 'git-lfs smudge %f'",
        "core.hookspath = '" + "h" * 80 + "...'"]
    assert gitconfig.what_git_runs(str(tmp_path / "missing")) == []


def test_what_hook_managers_run_from_the_worktree_is_found(tmp_path: Path) -> None:
    """husky's hooks folder `<folder>/_` runs the hooks of `<folder>`; lefthook's hooks
    (in `.git/hooks`, or a linked worktree's repository's) read its config files."""
    workspace, git = repository(tmp_path, "[core]\n\thooksPath = .config/husky/_\n")
    assert sorted(os.path.relpath(path, workspace)
                  for path in run_by_git(str(workspace), str(git), str(workspace))) == [
        ".config/husky", ".config/husky/_"]
    (git / "config").write_text("[core]\n\tbare = false\n")
    (git / "hooks").mkdir()
    (git / "hooks" / "pre-commit.sample").write_text("lefthook run pre-commit\n")
    assert run_by_git(str(workspace), str(git), str(workspace)) == []  # not a hook git runs
    (git / "hooks" / "pre-push").write_text('#!/bin/sh\ncall_lefthook run "pre-push" "$@"\n')
    linked = git / "worktrees" / "feature"
    linked.mkdir(parents=True)
    (linked / "commondir").write_text("../..\n")
    for gitdir, top in ((git, workspace), (linked, workspace / "feature")):
        found = run_by_git(str(top), str(gitdir), str(workspace))
        assert str(top / "lefthook.yml") in found and str(top / ".lefthook") in found
        assert str(top / ".config" / "lefthook-local.toml") in found
        assert str(top / ".pre-commit-config.yaml") not in found


def test_the_config_pre_commit_s_hooks_read_is_found(tmp_path: Path) -> None:
    """pre-commit's (and prek's) hooks run `hook-impl` with their config, whose local
    hooks run any command: the default one, or the one a hook names."""
    workspace, git = repository(tmp_path, "[core]\n\tbare = false\n")
    (git / "hooks").mkdir()
    (git / "hooks" / "pre-commit").write_text(
        "#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\n"
        "INSTALL_PYTHON=/usr/bin/python3\n"
        "ARGS=(hook-impl --config=.pre-commit-config.yaml --hook-type=pre-commit)\n")
    (git / "hooks" / "pre-push").write_text(
        "#!/bin/sh\nexec prek hook-impl --config=ci/hooks.yaml --hook-type=pre-push\n")
    found = run_by_git(str(workspace), str(git), str(workspace))
    assert sorted(os.path.relpath(path, workspace) for path in found) == [
        ".pre-commit-config.yaml", "ci/hooks.yaml"]
    (git / "hooks" / "pre-push").write_text("#!/bin/sh\nexec pre-commit hook-impl\n")
    found = run_by_git(str(workspace), str(git), str(workspace))
    assert [os.path.relpath(path, workspace) for path in found] == [".pre-commit-config.yaml"]


def links_of(tmp_path: Path, hooks_path: str) -> tuple[Path, list[str]]:
    """A workspace holding a repository `sub` with `core.hooksPath = hooks_path`; what
    `run_by_git` finds to protect for it."""
    workspace = tmp_path / "ws"
    sub = workspace / "sub"
    subprocess.run(["git", "init", "-q", str(sub)], check=True)
    subprocess.run(["git", "-C", str(sub), "config", "core.hooksPath", hooks_path], check=True)
    return workspace, run_by_git(str(sub), str(sub / ".git"), str(workspace))


def test_links_in_a_loop_protect_nothing(tmp_path: Path) -> None:
    """A command's loop (`x -> y`, `y -> x`) that a hook leads into: git cannot follow it
    either, and the workspace must not become read-only for it."""
    workspace, _ = links_of(tmp_path, "hk")
    (workspace / "x").symlink_to("y")
    (workspace / "y").symlink_to("x")
    (workspace / "sub" / ".git" / "hooks" / "pre-commit").symlink_to("../../../x")
    found = run_by_git(str(workspace / "sub"), str(workspace / "sub" / ".git"),
                       str(workspace))
    assert str(workspace) not in found and str(workspace / "sub") not in found, found


def test_a_hooks_folder_through_proc_self_cwd_is_where_git_finds_it(tmp_path: Path) -> None:
    """`/proc/self/cwd` is git's working folder, the repository's top, not hookline's."""
    workspace, found = links_of(tmp_path, "/proc/self/cwd/hk")
    assert str(workspace / "sub" / "hk") in found, found


def test_a_hooks_folder_that_is_the_work_itself_keeps_only_its_hooks(tmp_path: Path) -> None:
    """`core.hooksPath = .`: the top folder is not made read-only, its hooks are."""
    workspace, found = links_of(tmp_path, "/proc/self/cwd")
    assert str(workspace / "sub") not in found and str(workspace) not in found, found
    assert str(workspace / "sub" / "pre-commit") in found, found
