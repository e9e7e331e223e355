"""What commands changed of what runs later, where no sandbox could keep it read-only.

Without mounts (Ubuntu 24.04's AppArmor default, some containers; the start warning says
so) a command can change a repository's hooks and config, and what they run from the
worktree: git runs it later, outside the sandbox, with the user's rights (and a shell,
the startup files of a home folder the workspace holds; an editor or agent, the
`sandbox_protect` settings; hookline, its own environment). `fingerprint` takes what the
workspace's search found (`protection.to_protect`) and those files, so that after
each turn the watch names what changed since, for the user to look at first.

A repository is looked at where git, Mercurial or Jujutsu read what they run (a git
folder's `config` and `hooks`, `.hg/hgrc`, `.jj/repo/config.toml`), not its objects,
refs or index, which commands change as they use git in the sandbox. Changes are told by
each file's inode, size and modification time, not by its content.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

from .gitconfig import is_git_folder

__all__ = ["Fingerprint", "changed", "fingerprint"]

Fingerprint = dict[str, tuple[int, int, int]]
"""Each file looked at: its inode, size and modification time (ns)."""

READ_BY_REPOSITORY = {".hg": ("hgrc",), ".jj": (os.path.join("repo", "config.toml"),)}
"""What Mercurial and Jujutsu read from their repository folder and run."""

REWRITTEN_AS_THEY_RUN = {".idea": frozenset({"workspace.xml", "usage.statistics.xml"})}
"""Files of a settings folder its own program rewrites all day (a JetBrains IDE its window
layout and recent runs): named after every turn, they would teach the user to skip the
warning."""


def fingerprint(found: Iterable[str]) -> Fingerprint:
    """The files `found` stands for (repository folders, the files and folders their
    config has git run from the worktree, startup files), each with its identity now."""
    files: Fingerprint = {}
    for path in found:
        for file in _read_there(path):
            try:
                entry = os.lstat(file)
            except OSError:
                continue
            if not stat.S_ISDIR(entry.st_mode):
                files[file] = (entry.st_ino, entry.st_size, entry.st_mtime_ns)
    return files


def changed(before: Fingerprint, after: Fingerprint) -> list[str]:
    """The files added, removed or changed between the two."""
    return sorted(path for path in before.keys() | after.keys()
                  if before.get(path) != after.get(path))


def _read_there(path: str) -> list[str]:
    """The files of `path` that git (or Mercurial, Jujutsu) reads and runs: a repository
    folder's (a git folder's `config` and what its `hooks` hold; `READ_BY_REPOSITORY`), a
    folder's own entries (a hooks folder in the worktree), or the file itself."""
    name = os.path.basename(path)
    if name in READ_BY_REPOSITORY:
        return [os.path.join(path, read) for read in READ_BY_REPOSITORY[name]]
    if not os.path.isdir(path) or os.path.islink(path):
        return [path]
    if is_git_folder(path):
        return [os.path.join(path, "config"), *_entries(os.path.join(path, "hooks"))]
    rewritten = REWRITTEN_AS_THEY_RUN.get(name, frozenset())
    return [entry for entry in _entries(path) if os.path.basename(entry) not in rewritten]


def _entries(folder: str) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [entry.path for entry in entries]
    except OSError:
        return []
