"""Protected files that have other names.

A protected path is kept read-only by a mount on it. A hard link to the same file, made
before the path was protected (by a command, in a repository or a `.hookline` it made), is
another name outside that mount: writing it would change what git, a shell or hookline
runs later outside the sandbox. A command cannot make such a link once the path is
protected (a link never crosses a mount), so each file found with other names when
protection starts is made a file of its own: a copy takes its place, and the other names
keep the old file, which nothing reads any more.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat

from .gitconfig import GIT_HOOKS, is_git_folder

__all__ = ["separate_hard_links"]

logger = logging.getLogger(__name__)  # every command shows its warnings (cli ALWAYS_WARN)

GIT_READ = ("config", "config.worktree", "commondir")
"""A repository folder's files that git reads for what to run, besides its hooks."""

MAX_FILES_IN_FOLDER = 10_000
"""Files of a protected folder (not a repository) looked at, at every depth, at most:
settings folders such as `.hookline`, `.vscode` or `.jj` hold a few."""

STORES = frozenset({"objects", "store"})
"""Folders of repositories' contents (git's, Mercurial's and Jujutsu's), whose files a
local clone shares by hard links on purpose, and which nothing runs."""

MAX_COPIED = 1024 * 1024
"""Bytes of a file copied to separate it, at most: what git and shells read is small."""
MAX_SEPARATED = 64
"""Files separated in one pass, at most: a command that hard-linked thousands of files in
a protected folder must not have hookline fill the disk with copies (the rest are named)."""


def separate_hard_links(paths: list[str]) -> list[str]:
    """Make each protected file among `paths` a file of its own where it has other names:
    a regular file itself, a repository folder's config and hooks, another folder's files
    (at every depth, but for its `STORES`). Returns the files separated; a file that
    cannot be is logged."""
    separated: list[str] = []
    left: list[str] = []
    for file in (file for path in paths for file in _files_of(path)):
        if len(separated) < MAX_SEPARATED:
            if _separated(file):
                separated.append(file)
        elif _has_other_names(file):
            left.append(file)
    if left:
        logger.warning("%s have other names (hard links) through which commands may change "
                       "them, past the %d files separated at once: look at them before you "
                       "run git or a shell there", ", ".join(left[:20]) + (
                           f" and {len(left) - 20:,} more" if len(left) > 20 else ""),
                       MAX_SEPARATED)
    if separated:
        logger.warning("%s had other names (hard links) through which commands could change "
                       "what runs later outside the sandbox: each is now a file of its own, "
                       "and those names keep the old one, which nothing reads",
                       ", ".join(separated))
    return separated


def _files_of(path: str) -> list[str]:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return []
    if stat.S_ISREG(mode):
        return [path]
    if not stat.S_ISDIR(mode):
        return []
    if is_git_folder(path):
        hooks = os.path.join(path, "hooks")
        return [*(os.path.join(path, name) for name in GIT_READ),
                *(os.path.join(hooks, name) for name in GIT_HOOKS)]
    files: list[str] = []
    folders = [path]
    while folders and len(files) < MAX_FILES_IN_FOLDER:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    if entry.is_file(follow_symlinks=False):
                        files.append(entry.path)
                    elif entry.is_dir(follow_symlinks=False) and entry.name not in STORES:
                        folders.append(entry.path)
        except OSError:
            continue
    return files[:MAX_FILES_IN_FOLDER]


def _has_other_names(path: str) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_nlink > 1


def _separated(path: str) -> bool:
    """Put a copy of the file at `path` in its place, when the file has other names; never
    follows a link. True when it did."""
    folder_path, name = os.path.split(path)
    try:
        folder = os.open(folder_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        source = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=folder)
    except OSError:
        os.close(folder)
        return False
    copy = f".{name}.hookline-{secrets.token_hex(4)}"
    try:
        info = os.fstat(source)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink < 2:
            return False
        if info.st_size > MAX_COPIED:
            raise OSError(f"larger than {MAX_COPIED // 2**20} MiB")
        target = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600, dir_fd=folder)
        try:
            while chunk := os.read(source, 1 << 20):
                while chunk:
                    chunk = chunk[os.write(target, chunk):]
            if os.geteuid() == 0:
                os.fchown(target, info.st_uid, info.st_gid)
            os.fchmod(target, stat.S_IMODE(info.st_mode))
        finally:
            os.close(target)
        os.replace(copy, name, src_dir_fd=folder, dst_dir_fd=folder)
        return True
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(copy, dir_fd=folder)
        logger.warning("%s has other names (hard links) through which commands may change "
                       "it, and it could not be made a file of its own (%s): look at it "
                       "before you run git or a shell there", path, exc)
        return False
    finally:
        os.close(source)
        os.close(folder)
