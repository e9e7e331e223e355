"""What commands must not change in the workspace, and what they made of it.

git runs a repository's hooks and config with the user's rights (Mercurial and Jujutsu
theirs), shells and git the startup files of a home folder, a shell entering a folder
what direnv and mise load, editors and agents their settings, and hookline what
`.hookline` and its own Python environment hold: `protected_paths` and `to_protect` find
them, each sandbox keeps them read-only and the file tools refuse them. A command may
make one (`git init`, `git clone`, a `.hookline`) where no sandbox protects it yet: the
`MadeWatch` of the workspace, shared by every sandbox of this process there (each
session's, an approved escalation's, an MCP server's), looks after each run that started
a command in any of them or wrote with the file tools, names each thing made once, and
has every one of them protect it from then on; where a sandbox cannot keep them
read-only (no mounts), it also names what commands changed of what runs later
(`changes.py`).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import re
import stat
import sys
import sysconfig
import threading
import weakref
from collections.abc import Callable
from pathlib import Path

from hookline.kernel.errors import HooklineError

from .changes import Fingerprint, changed, fingerprint
from .direnv import ENVRC, loaded_by_envrc
from .files import ReadBudget, file_start, is_inside, open_regular_file
from .followed import FollowedLinks, link_target
from .gitconfig import common_dir, is_git_folder, run_by_git, what_git_runs
from .hardlinks import separate_hard_links
from .mise import config_root, loaded_by_mise, may_be_config
from .remembered import remember

__all__ = ["MadeWatch", "in_repository", "protected_paths", "to_protect", "watch_for"]

logger = logging.getLogger(__name__)  # every command shows its warnings (cli ALWAYS_WARN)

GIT = ".git"

OTHER_REPOSITORIES = (".hg", ".jj")
"""The folders of other version control systems that run what their config names with
the user's rights: Mercurial the `[hooks]` and `[extensions]` of `.hg/hgrc`, Jujutsu the
aliases and tools of its repository config. Kept like a `.git`, at any depth."""

REPOSITORY_FOLDERS = (GIT, *OTHER_REPOSITORIES)

EDITOR_WORKSPACE = ".code-workspace"
"""How a VS Code workspace file ends, at any depth: opened, it runs its tasks (one on
folder open, once you allowed automatic tasks) and settings as `.vscode` does."""

RUN_FROM_FILE_ENDINGS = (ENVRC, EDITOR_WORKSPACE)
"""How the names `_run_from_file` looks at end (besides mise's), for a search of the
workspace to pass over every other file at the cost of one test."""

PROTECTED = (*REPOSITORY_FOLDERS, ".hookline")
"""Names in the workspace kept read-only: what runs later outside the sandbox reads them."""

STARTUP = (".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc",
           ".zprofile", ".zshenv", ".zlogin", ".zlogout", ".gitconfig", ".config", ".local",
           ".pam_environment", ".xprofile", ".xsessionrc", "bin")
"""Files and folders of a home folder that shells, git and login sessions run or read with
the user's rights (`.local/bin` leads PATH, and `bin` where Debian's stock `.profile`
puts it first; `.config` holds git's, fish's, autostart's and systemd's): watched when
missing, where the workspace holds the home folder."""

GIT_DIR = ("HEAD", "config", "config.worktree", "commondir", "hooks", "info", "objects",
           "refs", "packed-refs", "worktrees", "modules")
"""A repository's own files that git reads to find it and what to run: kept one by one
where the workspace itself is a bare repository (its worktrees, beside them, are work)."""

_COMMIT = re.compile(rb"[0-9a-fA-F]{40}")
"""A detached `HEAD` as git reads one: 40 hex digits or more (SHA-256 has 64), in any
case, whatever follows them."""

MAX_NAMED = 20
"""Paths a warning names, at most (the rest are counted)."""

MAX_SEARCHED = 200_000
"""Entries of the workspace looked through for what to protect in it, at most (about a
second): a workspace as large as a home folder must not hold up the first command."""

MAX_CONFIGS_READ = 2 * 1024 * 1024
"""Bytes of repositories' config (with what it includes), hooks' first lines, `.envrc`
and mise files one search reads, at most (`ReadBudget`; a project's are a few hundred
each, and the user's own git config is not counted)."""

MAX_GITDIR_LINE = 4096
"""Bytes of a `.git` file read for its `gitdir:` line: a command may make that file a
FIFO or gigabytes without a newline, and hookline reads it outside the sandbox."""


def protected_paths(workspace: str, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Paths inside the workspace no command or file tool may change: `.git` (and where a
    worktree's `.git` file points), what the config of the repository at or above the
    workspace has git run from it (`gitconfig.run_by_git`: a `core.hooksPath` folder, say),
    `.hookline`, the `sandbox_protect` entries, the Python environment hookline runs
    from when it lies there (a `.venv` of the project): hookline runs it again, outside
    the sandbox, and a `.pth` file dropped in its site-packages runs at every start; and
    the hidden entries of the user's home folder when the workspace holds it."""
    found = _named(workspace, (*PROTECTED, *extra))
    found.extend(_git_file_target(os.path.join(workspace, GIT)))
    found.extend(_run_by_enclosing_repository(workspace))
    found.extend(_home_startup(workspace))
    environment = _own_environment(workspace)
    if environment is not None:
        found.append(environment)
    return tuple(dict.fromkeys(found))


def _named(workspace: str, names: tuple[str, ...]) -> list[str]:
    """Where each of `names` (relative to the workspace, or `~`) leads."""
    return [os.path.realpath(os.path.join(workspace, os.path.expanduser(name)))
            for name in names]


def _own_environment(workspace: str) -> str | None:
    """The Python environment hookline runs from, when it lies in the workspace."""
    environment = os.path.realpath(sys.prefix)
    inside = is_inside(environment, workspace) and environment != workspace
    return environment if inside else None


def _settings_run(workspace: str, extra: tuple[str, ...]) -> list[str]:
    """What runs later, outside the sandbox, from the `sandbox_protect` settings and from
    hookline's own Python environment in the workspace: the settings (folders looked into
    one level, `changes.py`), and the environment's scripts, `pyvenv.cfg` and the top of
    its site-packages, where a `.pth` file or a `sitecustomize` runs at every start (not
    the packages' own files)."""
    found = _named(workspace, extra)
    environment = _own_environment(workspace)
    if environment is not None:
        where = {"base": environment, "platbase": environment}
        found += [os.path.join(environment, "pyvenv.cfg"),
                  *(sysconfig.get_path(name, vars=where)
                    for name in ("scripts", "purelib", "platlib"))]
    return list(dict.fromkeys(found))


def _home_startup(workspace: str) -> list[str]:
    """Where the workspace holds a home folder (hookline started there, its own home kept
    elsewhere): every hidden entry of it and the `STARTUP` names, which run with its
    user's rights outside the sandbox; its other folders (projects) stay writable. A link
    is kept where it points (`_home_links` watches the link itself)."""
    return [os.path.realpath(os.path.join(home, name)) for home in _held_homes(workspace)
            for name in dict.fromkeys([*(os.path.basename(path) for path in _hidden(home)),
                                       *STARTUP])]


def _home_run(workspace: str) -> list[str]:
    """What a home folder the workspace holds has run at the next shell, login or git
    command: its startup files, `.local/bin` (which leads PATH) and git's `.config/git`
    (the folders looked into one level, `changes.py`). Not all of `.config` and `.local`,
    which programs change all day."""
    files = [name for name in STARTUP if name not in (".config", ".local")]
    return [os.path.join(home, name) for home in _held_homes(workspace)
            for name in (*files, ".local/bin", ".config/git")]


def _home_links(workspace: str) -> dict[str, str]:
    """The hidden entries of the home folder the workspace holds that are links (dotfiles
    kept with stow), with what each reads: a mount cannot be put on a link, so a command
    may replace one, which the watch looks for."""
    return {path: link_target(path) for home in _held_homes(workspace) for path in _hidden(home)
            if os.path.islink(path)}


def _held_homes(workspace: str) -> list[str]:
    """The home folders the workspace holds: the user's own, and for root, who may write
    every one, each account's (root started in `/home` would have commands plant code in
    the other users' startup files)."""
    homes = [os.path.expanduser("~")]
    if os.geteuid() == 0:
        import pwd

        homes += [entry.pw_dir for entry in pwd.getpwall()]
    found = (os.path.realpath(home) for home in homes if home)
    return [home for home in dict.fromkeys(found)
            if home != "/" and os.path.isdir(home) and is_inside(home, workspace)]


def _hidden(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [entry.path for entry in entries if entry.name.startswith(".")]
    except OSError:
        return []


def in_repository(target: str, workspace: str) -> str | None:
    """The `.git` (or `OTHER_REPOSITORIES` folder; as a path relative to the workspace)
    that `target` is or lies in, at any depth: the file tools refuse it even where no
    command was kept from it, since a repository made during the session is not
    protected from commands."""
    parts = os.path.relpath(target, workspace).split(os.sep)
    depth = next((index for index, part in enumerate(parts) if part in REPOSITORY_FOLDERS), None)
    return None if depth is None else os.path.join(*parts[:depth + 1])


def to_protect(workspace: str, limit: int) -> tuple[list[str], bool]:
    """What a search of the workspace finds to protect: every `.git` in it at any depth
    (a nested clone, a submodule's or worktree's `.git` file), where such a file points
    inside it, each folder of `OTHER_REPOSITORIES`, every bare repository (`_is_git_dir`:
    git runs its hooks when you push to it), and what their config has git run from the
    workspace, missing or not (a helper protects what exists; the file tools may not make
    the rest, and one a command makes is said at the end of its turn): git, run there
    later outside the sandbox, runs their hooks and config. So are what a direnv `.envrc`
    loads (`direnv.py`) and mise's config files with what they load (`mise.py`), which
    your shell runs as you enter a folder, and VS Code's workspace files
    (`EDITOR_WORKSPACE`). Where the workspace itself is a bare repository, its
    `GIT_DIR` entries are kept, not the whole workspace. Searched breadth first, links
    not followed; the flag says whether `limit` entries or `MAX_CONFIGS_READ` cut it
    short (once the bytes are spent, repositories are still found, their files unread)."""
    found: list[str] = []
    folders, searched = collections.deque([workspace]), 0
    budget = ReadBudget(MAX_CONFIGS_READ)
    while folders:
        folder = folders.popleft()
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
        except PermissionError:  # git may still enter it (mode 311): kept whole, unread
            if folder != workspace:
                found.append(os.path.realpath(folder))
            continue
        except OSError:
            continue
        searched += len(listed)
        if searched > limit:
            return found, True
        if _is_git_dir(folder, {entry.name for entry in listed}):
            bare = os.path.realpath(folder)
            found.extend(run_by_git(bare, bare, workspace, budget))
            if folder != workspace:
                found.append(bare)
                continue
            found.extend(os.path.join(bare, name) for name in GIT_DIR)
            listed = [entry for entry in listed if entry.name not in GIT_DIR]
        for entry in listed:
            if entry.name == GIT:
                targets = _git_file_target(entry.path)
                found.extend(path for path in [os.path.realpath(entry.path), *targets]
                             if is_inside(path, workspace))
                found.extend(_run_by_repository(entry.path, targets, workspace, budget))
            elif entry.name in OTHER_REPOSITORIES:
                found.append(os.path.realpath(entry.path))
            elif entry.is_dir(follow_symlinks=False):  # a folder named `.envrc` is searched
                folders.append(entry.path)
            elif entry.name.endswith(RUN_FROM_FILE_ENDINGS) or may_be_config(entry.name):
                found.extend(_run_from_file(entry, workspace, budget))
    return found, budget.spent


def _run_from_file(entry: os.DirEntry[str], workspace: str, budget: ReadBudget) -> list[str]:
    """What a file of the workspace has run later outside the sandbox, told by its name:
    what an `.envrc` loads, a mise config file with what it loads, a VS Code workspace
    file; missing or not."""
    if entry.name == ENVRC:
        return loaded_by_envrc(entry.path, workspace, budget)
    if config_root(entry.path) is not None:
        return loaded_by_mise(entry.path, workspace, budget)
    if entry.name.endswith(EDITOR_WORKSPACE):
        return [os.path.realpath(entry.path)]
    return []


def _run_by_repository(git: str, targets: list[str], workspace: str,
                       budget: ReadBudget | None = None) -> list[str]:
    """What the config of the repository whose `.git` is at `git` (a folder, or a file
    pointing to `targets`) has git run or read from inside the workspace."""
    top = os.path.realpath(os.path.dirname(git))
    return [path for gitdir in targets or [os.path.realpath(git)] if os.path.isdir(gitdir)
            for path in run_by_git(top, gitdir, workspace, budget)]


def _run_by_enclosing_repository(workspace: str) -> list[str]:
    """`_run_by_repository` for the nearest `.git` at or above the workspace: a
    workspace inside a repository is reached by that repository's hooks."""
    folder = workspace
    while not os.path.lexists(os.path.join(folder, GIT)):
        parent = os.path.dirname(folder)
        if parent == folder:
            return []
        folder = parent
    git = os.path.join(folder, GIT)
    return _run_by_repository(git, _git_file_target(git), workspace)


def _git_file_target(path: str) -> list[str]:
    """Where a `.git` file (a worktree's, a submodule's) points, resolved; nothing for a
    `.git` folder or anything but a regular file (opened without blocking)."""
    with contextlib.suppress(OSError, HooklineError, UnicodeDecodeError):
        handle, _info = open_regular_file(os.path.realpath(path))
        with handle:
            line = handle.readline(MAX_GITDIR_LINE).decode().strip()
        if line.startswith("gitdir:"):
            target = os.path.join(os.path.dirname(path), line.removeprefix("gitdir:").strip())
            return [os.path.realpath(target)]
    return []


def _is_git_dir(folder: str, names: set[str]) -> bool:
    """Whether `folder`, holding `names`, is a repository as git tells one: a valid `HEAD`
    (`_valid_head`), and `objects` and `refs` there or in the repository its `commondir`
    names (a linked worktree's own folder)."""
    if "HEAD" not in names or not _valid_head(os.path.join(folder, "HEAD")):
        return False
    if {"objects", "refs"} <= names:
        return True
    common = common_dir(folder) if "commondir" in names else None
    return common is not None and all(os.path.lexists(os.path.join(common, name))
                                      for name in ("objects", "refs"))


def _valid_head(path: str) -> bool:
    """A `HEAD` git takes: a link into `refs/`, `ref:` then `refs/...` (spaces between or
    not), or a commit id."""
    target = link_target(path)
    if target:
        return target.startswith("refs/")
    head = file_start(path, 256)
    if head.startswith(b"ref:"):
        return head[4:].lstrip().startswith(b"refs/")
    return _COMMIT.match(head) is not None


def _git_folders(path: str) -> list[str]:
    """The repository folders a protected path is: a `.git` folder (or where a `.git`
    file points), a bare repository; none for anything else."""
    if os.path.basename(path) == GIT:
        return _git_file_target(path) or [path]
    if is_git_folder(path):
        return [path]
    parent = os.path.dirname(path)  # one of the workspace's own `GIT_DIR` entries
    return [parent] if os.path.basename(path) in GIT_DIR and is_git_folder(parent) else []


class MadeWatch:
    """What commands made in a workspace that needs protecting, across the sandboxes of
    this process that write it (`watch_for`).

    The first search (`search`, at the first helper's start) is what existed before any
    command ran; after each run in which a command started or a file tool wrote
    (`started`), `say_what_made`
    searches again, names what is new (or another folder at a known path), once, and
    hands it to every sandbox that joined (`join`), which protects it in its running
    helpers."""

    def __init__(self, workspace: str, protected: tuple[str, ...],
                 extra: tuple[str, ...] = (), home: Path | None = None) -> None:
        self.workspace = workspace
        self.protected = protected
        self._home = home
        """Where what the searches found is kept (`remembered.py`); None: nowhere."""
        self._followed = FollowedLinks()
        self._separated: set[str] = set()
        """What `separate_hard_links` looked at already: a protected file keeps one name."""
        self._lock = threading.Lock()
        self._existing: dict[str, tuple[int, int] | None] | None = None
        """What there was at the first search, and what was said since, with the identity
        each had then (`_identity`; None: no search yet)."""
        self._missing: frozenset[str] = frozenset()
        """What the last search found to protect that does not exist (yet)."""
        self._started = False
        self._cut_said = False
        self._protectors: list[weakref.WeakMethod[Callable[[list[str]], None]]] = []
        self._links = _home_links(workspace)
        """Links kept as they were (`_home_links`): one replaced is named as made."""
        self._unkept: Fingerprint | None = None
        """What git runs (and a held home folder's shells, the settings and hookline's
        environment), as it was at the last look, once a sandbox could not keep it
        read-only (`unkept`); None while every one could."""
        self._run_later = [*_home_run(workspace), *_settings_run(workspace, extra)]

    def join(self, protect: Callable[[list[str]], None]) -> None:
        """Have `protect`, a sandbox's method, called with what commands made, once found.
        Held weakly: a sandbox dropped without `close` still ends (its helper with it) as
        soon as nothing else holds it."""
        with self._lock:
            self._protectors = [ref for ref in self._protectors if ref() is not None]
            self._protectors.append(weakref.WeakMethod(protect))

    def search(self) -> list[str]:
        """What there is to protect now (`to_protect`), for a new helper; a search cut
        short is said once. Blocking."""
        found, cut = self._searched()
        self._separate([*self.protected, *found])
        with self._lock:
            if self._existing is None:
                self._existing = self._existing_protected(found)
            self._missing = _absent(found)
        self._say_cut(cut)
        return found

    def _separate(self, paths: list[str]) -> None:
        """`separate_hard_links` for what no look separated yet (each helper's start would
        walk the same folders again: once protected, a file gets no other name)."""
        with self._lock:
            fresh = [path for path in dict.fromkeys(paths) if path not in self._separated]
            self._separated.update(fresh)
        separate_hard_links(fresh)

    def _searched(self) -> tuple[list[str], bool]:
        """`to_protect`, with what earlier searches found when this one was cut short."""
        found, cut = to_protect(self.workspace, MAX_SEARCHED)
        if self._home is not None:
            found = remember(self._home, self.workspace, found, whole=not cut)
        return self._followed.take(found), cut

    def _say_cut(self, cut: bool) -> None:
        """A search cut short, said once: at the start, or after the turn whose commands
        made the workspace too large to search (they may have done so on purpose)."""
        with self._lock:
            say = cut and not self._cut_said
            self._cut_said = self._cut_said or cut
        if say:
            logger.warning(
                "the workspace %s is too large to search whole (more than %s entries, or "
                "%s MB of git config, hooks, .envrc and mise files), so what runs later from "
                "it (nested git repositories, what direnv and mise load) is looked for in the "
                "first part only (and kept where an earlier search found it): a command may "
                "change one no search found, and what commands make past that part is not "
                "named. Add each to sandbox_protect, or start hookline in a smaller folder",
                self.workspace, f"{MAX_SEARCHED:,}",
                MAX_CONFIGS_READ // 2**20)

    def started(self) -> None:
        """A command is starting, in any of the workspace's sandboxes, or the file tools
        write: the next `say_what_made` looks."""
        self._started = True

    def unkept(self, found: list[str]) -> None:
        """A sandbox of the workspace cannot keep its protected paths read-only (no
        mounts): from now on each look also names what commands changed of what git runs
        (`changes.py`), of a held home folder's startup files, of the `sandbox_protect`
        settings or of hookline's own environment (`_settings_run`), from how they are
        now (`found`, what that sandbox's `search` found), before its first command."""
        with self._lock:
            if self._unkept is not None:
                return
        files = fingerprint([*found, *self._run_later])
        with self._lock:
            if self._unkept is None:
                self._unkept = files

    def known(self) -> frozenset[str]:
        """Everything protected found so far, and what the last search found missing, after
        a first search if none ran yet: the file tools refuse it too. Blocking."""
        if self._existing is None:
            self.search()
        return frozenset(self._existing or ()) | self._missing

    @property
    def started_since_said(self) -> bool:
        """A command started since the last `say_what_made`: only then is there anything
        for it to look at."""
        return self._started

    def say_what_made(self) -> None:
        """A protected path or repository a command made was not protected from the
        commands that ran since, which may have given it hooks: the user, who may run git
        there later, is told, once for each, and every sandbox protects it from now on.
        Nothing unless a command started (or a file tool wrote) since the last look (the
        builtin plugin looks at the end of each run, a sandbox's `close` once more).
        Blocking."""
        with self._lock:
            if self._existing is None or not self._started:
                return
            self._started = False
            seen = self._existing
        found, cut = self._searched()
        self._say_cut(cut)
        now = self._existing_protected(found)
        files = fingerprint([*found, *self._run_later]) if self._unkept is not None else None
        with self._lock:
            if self._existing is not None:
                self._existing = {**self._existing, **now}  # `seen` stays as it was
            self._missing = _absent(found)
            protectors = [ref() for ref in self._protectors]
            before = self._unkept
            if files is not None:
                self._unkept = files
        made = sorted(path for path, identity in now.items()
                      if path not in seen or seen[path] != identity)
        if before is not None and files is not None:
            self._say_what_changed(changed(before, files), made)
        if relinked := self._followed.changed():
            logger.warning("commands changed the link %s, which git follows to run hooks "
                           "or read config (no mount can keep a link in the worktree's top "
                           "folder): unless you changed them yourself, look where each leads "
                           "before you run git there",
                           _listed([self._shown(path) for path in relinked], ", "))
        if not made:
            return
        self._separate(made)
        for protect in protectors:
            if protect is not None:
                protect(made)
        logger.warning(
            "commands or file tools run in this workspace made %s, which hookline keeps "
            "read-only only from now on: until now commands could change them, and what "
            "runs later outside the sandbox, with your rights, reads them (git a "
            "repository's hooks and config, core.fsmonitor for one; your shell what direnv "
            "or mise load; an editor or agent its settings): look at them before you run "
            "git, a shell, an editor or an agent there",
            _listed(sorted(self._shown(path) for path in made), ", "))
        self._say_what_runs(made)

    def _say_what_changed(self, files: list[str], made: list[str]) -> None:
        """Changes to what runs later outside the sandbox (git, a shell, an editor, an
        agent, hookline), where no sandbox kept it (those in a repository made are said
        with it)."""
        files = [file for file in files if not any(is_inside(file, path) for path in made)]
        if not files:
            return
        logger.warning(
            "commands may have changed %s: git, your shell, an editor or agent you open there, "
            "or hookline itself, runs them later with your rights, and the sandbox cannot "
            "keep them read-only here (see the warning at start). Unless you changed them "
            "yourself, look at them first", _listed([self._shown(file) for file in files], ", "))

    def _say_what_runs(self, made: list[str]) -> None:
        """What git would run in each repository commands made (`what_git_runs`): a fresh
        `git init` or `git clone` has nothing, so anything is said, on a line of its own,
        for the user to look at before running git there. A `.git` file is followed to
        where it points, inside the workspace or not (a command's `TMPDIR`, say)."""
        gitdirs = [gitdir for path in made for gitdir in _git_folders(path)]
        for gitdir in dict.fromkeys(gitdirs):
            runs = what_git_runs(gitdir)
            if not runs:
                continue
            logger.warning(
                "%s, which commands made, has git run with your rights: %s. Unless you "
                "set these up yourself, remove them before you run git there",
                self._shown(gitdir), _listed(runs, "; "))

    def _shown(self, path: str) -> str:
        """`path` relative to the workspace when it lies in it, else in full."""
        if path == os.path.realpath(self.workspace):
            return f"the workspace {path}"
        return os.path.relpath(path, self.workspace) if is_inside(path, self.workspace) else path

    def _existing_protected(self, found: list[str]) -> dict[str, tuple[int, int] | None]:
        replaced = [path for path, target in self._links.items() if link_target(path) != target]
        existing = {}
        for path in [*self.protected, *found, *replaced]:
            with contextlib.suppress(OSError):
                existing[path] = _identity(os.lstat(path))
        return existing


def _absent(found: list[str]) -> frozenset[str]:
    return frozenset(path for path in found if not os.path.lexists(path))


def _listed(names: list[str], separator: str) -> str:
    """The first `MAX_NAMED` of `names`, the rest counted."""
    rest = len(names) - MAX_NAMED
    return separator.join(names[:MAX_NAMED]) + (f" and {rest:,} more" if rest > 0 else "")


def _identity(entry: os.stat_result) -> tuple[int, int] | None:
    """A folder's device and inode: another one at a known path was put there in place of
    what was (moved away with the folder that held it by a command that started before
    that folder was pinned). None for a file: programs replace theirs as they save them (a
    shell its history, an editor its settings)."""
    return (entry.st_dev, entry.st_ino) if stat.S_ISDIR(entry.st_mode) else None


_watches: weakref.WeakValueDictionary[tuple[str, tuple[str, ...]], MadeWatch] = (
    weakref.WeakValueDictionary())
_watches_lock = threading.Lock()


def watch_for(workspace: str, extra: tuple[str, ...] = (), home: Path | None = None
              ) -> MadeWatch:
    """The watch of `workspace` in this process, with `extra` (`sandbox_protect`), shared
    by every sandbox that writes it; it goes with the last of them. Its protected paths
    are found once, when it is made: keyed by what they were found from, not by what was
    found (a dotfile new in a home folder held would make another watch)."""
    with _watches_lock:
        watch = _watches.get((workspace, extra))
        if watch is None:
            watch = _watches[(workspace, extra)] = MadeWatch(
                workspace, protected_paths(workspace, extra), extra, home)
        return watch
