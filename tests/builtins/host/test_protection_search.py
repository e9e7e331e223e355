"""The search for what to protect: bounded in entries and bytes read, said when cut
short, not fooled by files a command shapes (a FIFO, a huge `.git` file, a folder named
like a file, a `HEAD` that is a link), and a workspace that is itself a repository."""

from __future__ import annotations

import os
import subprocess
import threading
import tracemalloc
from pathlib import Path

import pytest
from sandbox_support import environment, run_once, said_once

from hookline.builtins.host import direnv, gitconfig, protection
from hookline.kernel.errors import HooklineError


@pytest.mark.anyio
async def test_a_search_cut_short_is_said_once_with_the_fix(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A workspace too large to look through: the repositories past the limit are not
    protected, and the user is told so once, with what to do."""
    workspace, home, _ = layout
    monkeypatch.setattr(protection, "MAX_SEARCHED", 5)
    for number in range(10):
        (workspace / f"file{number}").write_text("")
    (workspace / "sub" / "lib" / ".git").mkdir(parents=True)
    env = environment(workspace, home)
    try:
        for _ in range(2):
            result = await env.run("touch sub/lib/.git/config && echo written")
            assert "written" in result.stdout, result.stderr
            await env.close()  # the next command starts a new helper, which searches again
    finally:
        await env.close()
    said = [r.getMessage() for r in caplog.records if "first part only" in r.getMessage()]
    assert len(said) == 1 and "more than 5 entries" in said[0], said
    assert "sandbox_protect" in said[0]


@pytest.mark.anyio
async def test_what_an_earlier_search_found_stays_protected_when_a_later_one_is_cut(
        layout: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A command fills the workspace with files: the next process's search stops before
    the repository past them, which the first process's search found and the home kept."""
    workspace, home, _ = layout
    monkeypatch.setattr(protection, "MAX_SEARCHED", 5)
    (workspace / "sub" / "lib" / ".git").mkdir(parents=True)
    first = environment(workspace, home)
    try:
        assert "written" not in (await first.run("touch sub/lib/.git/x && echo written")).stdout
    finally:
        await first.close()
    for number in range(10):
        (workspace / f"file{number}").write_text("")
    monkeypatch.setattr(protection, "_watches", type(protection._watches)())  # a new process
    later = environment(workspace, home)
    try:
        result = await later.run("touch sub/lib/.git/config && echo written")
    finally:
        await later.close()
    assert "written" not in result.stdout and "Read-only file system" in result.stderr
    assert not (workspace / "sub" / "lib" / ".git" / "config").exists()


@pytest.mark.parametrize("kind", [".envrc", "git config", "git include"])
def test_a_search_reads_a_bounded_amount_of_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Thousands of large `.envrc` files or repositories' configs a command wrote, or
    repositories that all include one large file, would hold up every turn: past
    `MAX_CONFIGS_READ` bytes the search reads nothing more, and says it was cut short;
    repositories are still found, so a command cannot hide one behind such files."""
    workspace = tmp_path.resolve()
    monkeypatch.setattr(protection, "MAX_CONFIGS_READ", 1000)
    (workspace / "shared.conf").write_text("[alias]\n" + "\ta = log\n" * 40)  # over 400 bytes
    for number in range(4):
        folder = workspace / f"p{number}"
        if kind == ".envrc":
            folder.mkdir()
            (folder / ".envrc").write_text("dotenv\n" * 60)  # 420 bytes
            (folder / ".env").write_text("A=1\n")
            continue
        subprocess.run(["git", "init", "-q", str(folder)], check=True)
        with (folder / ".git" / "config").open("a") as config:
            if kind == "git config":
                config.write("[alias]\n" + "\ta = log\n" * 40)
            else:
                config.write(f"[include]\n\tpath = {workspace / 'shared.conf'}\n")
    read = []
    real_file_start = gitconfig.file_start

    def file_start(path: str, size: int, budget: object = None) -> bytes:
        data = real_file_start(path, size, budget)  # type: ignore[arg-type]
        read.append(len(data))
        return data

    monkeypatch.setattr(gitconfig, "file_start", file_start)
    monkeypatch.setattr(direnv, "file_start", file_start)
    found, cut = protection.to_protect(str(workspace), 10_000)
    assert cut and sum(read) < 1000 + 600, read
    shown = {os.path.relpath(path, workspace) for path in found}
    if kind == ".envrc":  # p3's .envrc was not read: what it loads is not known
        assert "p0/.env" in shown and "p3/.env" not in shown, shown
    else:  # every repository is still found, past the budget too
        assert {f"p{number}/.git" for number in range(4)} <= shown, shown


def test_the_user_s_own_git_config_is_not_counted_against_the_search(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every repository reads your `~/.gitconfig`, which commands cannot write: a long one
    does not cut short the search of a workspace of many repositories."""
    workspace = tmp_path.resolve() / "workspace"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".gitconfig").write_text("[alias]\n" + "\ta = log\n" * 200)
    monkeypatch.setattr(protection, "MAX_CONFIGS_READ", 2000)
    for number in range(4):
        subprocess.run(["git", "init", "-q", str(workspace / f"p{number}")], check=True)
    found, cut = protection.to_protect(str(workspace), 10_000)
    assert not cut and len(found) == 4, found


def test_a_folder_named_as_a_file_the_search_reads_is_searched_too(tmp_path: Path) -> None:
    """A command that names a folder `.envrc`, `mise.toml` or `x.code-workspace` cannot
    hide a repository in it from the search."""
    workspace = tmp_path.resolve()
    names = (".envrc", "mise.toml", "x.code-workspace")
    for name in names:
        subprocess.run(["git", "init", "-q", str(workspace / name / "lib")], check=True)
    found, cut = protection.to_protect(str(workspace), 10_000)
    gits = sorted(os.path.relpath(path, workspace) for path in found if path.endswith(".git"))
    assert gits == [f"{name}/lib/.git" for name in sorted(names)] and not cut


def test_a_git_file_a_command_made_a_fifo_or_huge_is_not_read_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """hookline reads `.git` files outside the sandbox, where commands make them: a FIFO
    swapped in after a look must not hang it, nor a gigabyte without a newline fill its
    memory."""
    for name in ("fifo", "huge", "linked"):
        (tmp_path / name).mkdir()
    os.mkfifo(tmp_path / "fifo" / ".git")
    with open(tmp_path / "huge" / ".git", "wb") as file:
        file.truncate(1 << 30)  # sparse: a gigabyte of zeros
    (tmp_path / "linked" / ".git").write_text("gitdir: ../store\n")
    real_isfile = os.path.isfile
    # As if the FIFO had been a regular file when looked at, and was swapped just after.
    monkeypatch.setattr(os.path, "isfile", lambda path: path.endswith("fifo/.git")
                        or real_isfile(path))
    found: list[list[str]] = []

    def search() -> None:
        tracemalloc.start()
        try:
            found.append(protection.to_protect(str(tmp_path), protection.MAX_SEARCHED)[0])
            found.append([str(tracemalloc.get_traced_memory()[1])])
        finally:
            tracemalloc.stop()

    searching = threading.Thread(target=search, daemon=True)
    searching.start()
    searching.join(20)
    assert found, "the search hung on the FIFO"
    assert sorted(os.path.relpath(path, tmp_path) for path in found[0]) == [
        "fifo/.git", "huge/.git", "linked/.git", "store"]
    assert int(found[1][0]) < 1 << 20, "the search read the huge file whole"


@pytest.mark.anyio
async def test_a_workspace_that_is_a_bare_repository_keeps_its_git_files_only(
        layout: tuple[Path, Path, Path]) -> None:
    """A bare repository with its worktrees beside it (`git clone --bare`, then `git
    worktree add`): started there, its hooks and config are kept, its worktrees are work."""
    workspace, home, _ = layout
    subprocess.run(["git", "init", "-q", "--bare", str(workspace)], check=True)
    (workspace / "main").mkdir()
    env = environment(workspace, home)
    try:
        result = await env.run("echo 'touch /tmp/pwned' > hooks/pre-commit; "
                               "echo '[core] fsmonitor = evil' >> config; "
                               "touch main/edited && echo edited")
        with pytest.raises(HooklineError, match="'hooks' is protected"):
            await env.write_text("hooks/post-receive", "touch /tmp/pwned\n")
    finally:
        await env.close()
    assert result.stderr.count("Read-only file system") == 2, result.stderr
    assert "edited" in result.stdout and not (workspace / "hooks" / "pre-commit").exists()
    assert "fsmonitor" not in (workspace / "config").read_text()


@pytest.mark.anyio
async def test_a_workspace_a_command_makes_a_repository_is_named_with_what_git_runs(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    """git finds a bare repository in any folder above where it runs: a command that makes
    the workspace one has git run its config in every folder below it."""
    workspace, home, _ = layout
    env = environment(workspace, home)
    try:
        made = await env.run("git init -q --bare . && git config core.fsmonitor 'touch "
                             "/tmp/pwned' && echo made")
        await env.say_what_commands_made()
        again = await env.run("echo '[core] pager = evil' >> config")
    finally:
        await env.close()
    assert "made" in made.stdout, made.stderr
    said_once(caplog, "HEAD, config, hooks, info, objects, refs")
    runs = [record.getMessage() for record in caplog.records
            if "which commands made, has git run" in record.getMessage()]
    assert runs == [f"the workspace {workspace}, which commands made, has git run with your "
                    "rights: core.fsmonitor = 'touch /tmp/pwned'. Unless you set these up "
                    "yourself, remove them before you run git there"], runs
    assert "Read-only file system" in again.stderr


@pytest.mark.anyio
async def test_a_repository_whose_head_is_a_link_is_named(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    """git takes a `HEAD` that links into `refs/` for a repository's."""
    workspace, home, _ = layout
    await run_once(workspace, home, "mkdir -p sub/refs/heads sub/objects && "
                   "ln -s refs/heads/main sub/HEAD && printf '[core]\\n' > sub/config")
    said_once(caplog, "sub")
    later = await run_once(workspace, home, "echo '[core] fsmonitor = evil' >> sub/config")
    assert "Read-only file system" in later.stderr


@pytest.mark.anyio
async def test_a_repository_made_behind_files_that_spend_the_search_s_bytes_is_named(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that writes large files the search reads, then a repository past them,
    cannot have it go unnamed: the search finds it unread, and says it was cut short."""
    workspace, home, _ = layout
    monkeypatch.setattr(protection, "MAX_CONFIGS_READ", 2000)
    await run_once(workspace, home,
                   "for i in 1 2 3 4 5 6; do mkdir -p a/d$i && head -c 600 /dev/zero | "
                   "tr '\\0' '#' > a/d$i/.envrc; done; git init -q z/y/repo && "
                   "printf '#!/bin/sh\\n' > z/y/repo/.git/hooks/pre-commit && "
                   "chmod +x z/y/repo/.git/hooks/pre-commit")
    said_once(caplog, "z/y/repo/.git")
    cut = [r.getMessage() for r in caplog.records if "first part only" in r.getMessage()]
    assert len(cut) == 1 and "what commands make past that part is not named" in cut[0], cut


@pytest.mark.parametrize("head", [b"ref:refs/heads/main\n", b"ref:\trefs/heads/main\n",
                                  b"ABCDEF0123456789ABCDEF0123456789ABCDEF01\n",
                                  b"abcdef0123456789abcdef0123456789abcdef01 and more\n"])
def test_every_head_git_takes_marks_a_repository(tmp_path: Path, head: bytes) -> None:
    """git reads `HEAD` leniently (no space after `ref:`, a commit id in capitals or with
    text after it): a repository with such a head is still one to keep."""
    workspace = tmp_path.resolve()
    for name in ("objects", "refs"):
        (workspace / "remote.git" / name).mkdir(parents=True)
    (workspace / "remote.git" / "HEAD").write_bytes(head)
    subprocess.run(["git", "--git-dir", str(workspace / "remote.git"), "rev-parse"],
                   check=True)  # git takes it for a repository
    assert protection.to_protect(str(workspace), 10_000) == ([str(workspace / "remote.git")],
                                                             False)


@pytest.mark.anyio
async def test_a_linked_worktree_s_repository_is_kept_with_it(
        layout: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    """A `.git` file leads to a worktree's folder, whose `commondir` names the repository
    where git reads config and hooks: made by a command, all three are named at the end of
    its turn and kept from then on."""
    workspace, home, _ = layout
    await run_once(workspace, home,
                   "git init -q app && mv app/.git common && rm common/HEAD && mkdir wt && "
                   "echo 'ref: refs/heads/main' > wt/HEAD && echo ../common > wt/commondir && "
                   "echo 'gitdir: ../wt' > app/.git && git -C app rev-parse --git-dir")
    said_once(caplog, "app/.git, common, wt")
    later = await run_once(workspace, home, "printf '#!/bin/sh\\n' > common/hooks/pre-commit")
    assert "Read-only file system" in later.stderr, later.stderr


def test_a_workspace_whose_head_leads_to_a_commondir_is_a_repository(tmp_path: Path) -> None:
    workspace = tmp_path.resolve()
    for name in ("objects", "refs"):
        (workspace / "c" / name).mkdir(parents=True)
    (workspace / "HEAD").write_text("ref: refs/heads/main\n")
    (workspace / "commondir").write_text("c\n")
    found, _ = protection.to_protect(str(workspace), 10_000)
    assert {str(workspace / "HEAD"), str(workspace / "hooks"), str(workspace / "c")} <= set(found)


def test_a_folder_the_search_cannot_list_is_kept_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As a user who cannot list a folder (mode 311) but whose git may enter it."""
    workspace = tmp_path.resolve()
    (workspace / "proj" / "app").mkdir(parents=True)
    real_scandir = os.scandir

    def scandir(path: str) -> object:
        if path == str(workspace / "proj"):
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert protection.to_protect(str(workspace), 10_000) == ([str(workspace / "proj")], False)


@pytest.mark.parametrize("commondir", ["link", " C", "C ", "C\r\n"])
def test_a_commondir_is_read_as_git_reads_it(tmp_path: Path, commondir: str) -> None:
    """Through a link, the whole file but its trailing line ends."""
    workspace = tmp_path.resolve()
    named = "C" if commondir == "link" else commondir.rstrip("\r\n")
    subprocess.run(["git", "init", "-q", "--bare", str(workspace / "src" / named)], check=True)
    (workspace / "src" / named / "HEAD").unlink()
    (workspace / "src" / "HEAD").write_text("ref: refs/heads/main\n")
    if commondir == "link":
        (workspace / "src" / "named").write_text("C\n")
        (workspace / "src" / "commondir").symlink_to("named")
    else:
        (workspace / "src" / "commondir").write_text(commondir)
    subprocess.run(["git", "--git-dir", str(workspace / "src"), "rev-parse"], check=True)
    found = protection.to_protect(str(workspace), 10_000)[0]
    assert {str(workspace / "src"), str(workspace / "src" / named)} <= set(found), found



def test_what_a_command_makes_a_search_find_never_pushes_out_what_was_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept list is bounded: what earlier searches found stays first, and what a later
    one adds (thousands of paths a command's repository names) is what the bound drops."""
    from hookline.builtins.host import remembered

    monkeypatch.setattr(remembered, "MAX_PATHS", 3)
    workspace, home = tmp_path / "ws", tmp_path / "home"
    (workspace / "deep" / ".git").mkdir(parents=True)
    home.mkdir()
    first = [str(workspace / "deep" / ".git")]
    assert remembered.remember(home, str(workspace), first, whole=True) == first
    made = [str(workspace / f"p{number}") for number in range(5)]
    remembered.remember(home, str(workspace), [*made, *first], whole=True)
    cut = remembered.remember(home, str(workspace), [], whole=False)
    assert cut == first, "kept first, though the whole search found it last"
