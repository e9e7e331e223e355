"""What a git repository's config has git run, or read as config, from its worktree.

A repository's config is protected (it lives in `.git`), but it may name files in the
worktree that git then runs with the user's rights: the hooks folder `core.hooksPath`
names (husky sets `.husky/_`), a `core.fsmonitor` program, the program another key names
by a path (a filter, a diff driver, an editor, a credential helper, a `!` alias), and
files `include.path` or `includeIf.<condition>.path` add to the config (which may name
anything in turn); and hook managers' hooks run or read more of it (husky's `.husky/_`
runs `.husky/<hook>`, lefthook's read `lefthook.yml`, pre-commit's
`.pre-commit-config.yaml`). A command that could write those
would have its code run by the user's next `git commit` or `git status`, as `.git/hooks`
would: `run_by_git` finds them so that they are protected too. A repository a command
made was not protected while it was made, so anything in it may run: `what_git_runs`
lists what does, for the user to see.

hookline reads these files outside the sandbox, where commands may have made them: each is
opened without blocking, regular files only, and read up to `MAX_CONFIG_BYTES`, within
what a `ReadBudget` leaves of a look at the workspace. The user's own config files, which
commands cannot write and every repository reads, are parsed again only once changed.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import stat
from collections.abc import Iterator
from typing import NamedTuple

from .files import ReadBudget, file_start, is_inside

__all__ = ["Entry", "common_dir", "config_entries", "is_git_folder", "run_by_git",
           "user_configs", "what_git_runs"]

MAX_CONFIG_BYTES = 64 * 1024
"""Bytes of one config file read, at most (git's are a few hundred)."""

MAX_CONFIG_FILES = 16
"""Config files read for one repository, at most (its includes are files a command may
have made, as many as it likes)."""

MAX_INCLUDE_DEPTH = 10
"""Includes followed within includes, as deep as git itself follows them."""

PROGRAM_KEYS = frozenset({
    ("core", "fsmonitor"), ("core", "editor"), ("core", "pager"), ("core", "sshcommand"),
    ("core", "askpass"), ("core", "gitproxy"), ("core", "alternaterefscommand"),
    ("sequence", "editor"), ("diff", "external"), ("diff", "textconv"), ("diff", "command"),
    ("filter", "clean"), ("filter", "smudge"), ("filter", "process"), ("merge", "driver"),
    ("gpg", "program"), ("gpg", "defaultkeycommand"), ("credential", "helper"),
    ("interactive", "difffilter"), ("remote", "uploadpack"), ("remote", "receivepack"),
    ("uploadpack", "packobjectshook"), ("hook", "command"), ("browser", "cmd"),
    ("browser", "path"), ("man", "cmd"), ("difftool", "cmd"), ("difftool", "path"),
    ("mergetool", "cmd"), ("mergetool", "path"), ("guitool", "cmd"),
    ("sendemail", "smtpserver"), ("sendemail", "tocmd"), ("sendemail", "cccmd"),
    ("sendemail", "sendmailcmd")})
"""Keys whose value is a command git (or a command of git's) runs, the subsection left
out (`filter.<driver>.clean` is `("filter", "clean")`); `pager.<command>` and `!` aliases
are commands too."""

BOOLEANS = frozenset({"", "true", "false", "yes", "no", "on", "off", "1", "0"})
"""Values that switch a key on or off rather than name a command (`core.fsmonitor = true`
is git's own daemon, `pager.log = false` no pager)."""

GIT_HOOKS = (
    "applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
    "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout",
    "post-merge", "pre-push", "pre-receive", "update", "proc-receive", "post-receive",
    "post-update", "reference-transaction", "push-to-checkout", "pre-auto-gc",
    "post-rewrite", "sendemail-validate", "fsmonitor-watchman", "p4-changelist",
    "p4-prepare-changelist", "p4-post-changelist", "p4-pre-submit", "post-index-change")
"""The hooks git runs, by name (githooks(5)); no other file of a hooks folder runs."""

MAX_HOOK_BYTES = 4096
"""Bytes of a hook read to see which hook manager installed it."""

LEFTHOOK_FILES = (*(f"{folder}{name}.{extension}" for folder in ("", ".", ".config/")
                    for name in ("lefthook", "lefthook-local")
                    for extension in ("yml", "yaml", "json", "jsonc", "toml")),
                  ".lefthook", ".lefthook-local")
"""What lefthook's hooks read from the worktree at each run: its config files, any of
which may name a command, and the folders of its scripts."""

PRE_COMMIT_CONFIG = ".pre-commit-config.yaml"
"""What pre-commit's (and prek's) hooks read from the worktree at each run unless the hook
names another (`hook-impl --config=...`): its `repo: local` hooks run any command."""

_PRE_COMMIT_NAMED = re.compile(rb"--config=([^\s)\"']+)")

MAX_LINKS = 40
"""Links followed to resolve one path, at most (the kernel's own bound)."""
MAX_WALK_STEPS = 4096
"""Parts of a path, with what its links add, looked at to resolve it, at most."""
MAX_HOOK_FOLDERS = 8
"""Hooks folders whose hooks are looked at as links, at most (git uses one: the last set),
besides the repository's own."""

MAX_SHOWN = 80
"""Characters of a config value a warning quotes, at most."""


class Entry(NamedTuple):
    """One entry of a git config file: `section` and `key` lowercased, `subsection` as
    written (git compares it case-sensitively), the value unquoted and unescaped."""

    section: str
    subsection: str
    key: str
    value: str

    @property
    def name(self) -> str:
        """The entry's name as `git config` spells it: `filter.lfs.clean`."""
        return ".".join(part for part in (self.section, self.subsection, self.key) if part)


_ESCAPES = {"n": "\n", "t": "\t", "b": "\b"}


def run_by_git(top: str, gitdir: str, workspace: str,
               budget: ReadBudget | None = None) -> list[str]:
    """The paths inside `workspace` that the config of the repository `gitdir`, whose
    worktree is `top`, has git run or read: the `core.hooksPath` folder and each program
    a key names by a path (`PROGRAM_KEYS`, `!` aliases; relative to `top`), included
    config files (relative to the file that includes them), followed through their own
    includes, and what hook managers' hooks run from the worktree (`_read_by_hooks`).
    The user's and the system's config, a linked worktree's repository's (`commondir`)
    and `config.worktree` count too. The repository's files are read within `budget`."""
    users = [os.path.realpath(config) for config in user_configs()]
    configs = [*users, os.path.join(gitdir, "config"), os.path.join(gitdir, "config.worktree")]
    common = common_dir(gitdir)
    found: list[str] = []
    if common is not None:  # a linked worktree's repository: its config and hooks count
        configs.append(os.path.join(common, "config"))
        found.append(common)
    hooks = [os.path.join(common or gitdir, "hooks")]
    read: set[str] = set()
    pending = [(os.path.realpath(config), 0) for config in configs]
    while pending:
        config, depth = pending.pop()
        if config in read or depth > MAX_INCLUDE_DEPTH or len(read) >= MAX_CONFIG_FILES:
            continue
        read.add(config)
        entries = _user_entries(config) if config in users else config_entries(config, budget)
        for entry in entries:
            if _names_hooks(entry):
                hooks.append(os.path.join(top, os.path.expanduser(entry.value)))
            elif programs := _programs(_command(entry)):
                found.extend(_resolved(program, top, top) for program in programs)
            elif _includes(entry):
                included = _resolved(entry.value, os.path.dirname(config), top)
                found.append(included)
                pending.append((included, depth + 1))
    hooks = list(dict.fromkeys(hooks))
    folders = list(dict.fromkeys(_resolved(folder, top, top) for folder in hooks))
    for folder in folders[1:]:  # the work itself as hooks folder: its hooks, not it
        found += ([os.path.join(folder, hook) for hook in GIT_HOOKS]
                  if is_inside(top, folder) else [folder])
    found += _read_by_hooks(folders, top, budget)
    # The hooks that are links, in the repository's own folder and the last hooks folders
    # set (git takes the last; a config naming thousands must not cost minutes).
    linked = [hooks[0], *hooks[1:][-MAX_HOOK_FOLDERS:]]
    for path in [*configs[len(users):], *hooks,
                 *(os.path.join(folder, hook) for folder in linked for hook in GIT_HOOKS)]:
        found += _followed(path, top, os.path.realpath(gitdir))
    return list(dict.fromkeys(path for path in found if is_inside(path, workspace)))


def _followed(path: str, top: str, gitdir: str) -> list[str]:
    """What git follows to reach `path` when links lead there (`.git/hooks` to a tracked
    `githooks`, a hook to `scripts/pre-commit`, and links to links): where they end, and
    each folder holding one of them, since a command that replaced the link there would
    have git run something else and a mount cannot hold a link itself; a link in the
    worktree's top folder or above it (whose folder cannot be kept read-only) is given
    as the link, for the watch to name when it changes, and so are a hooks folder's hooks
    where it ends there. Nothing when no link leads there, or they lead round in a loop
    (git cannot follow them either)."""
    walked = _walk(path, top)
    if walked is None or not walked[0]:
        return []
    links, end = walked
    found = [link if is_inside(top, folder) else folder for link, folder in links
             if not is_inside(folder, gitdir)]
    if is_inside(top, end):  # the work itself: only the hooks git would run from it
        return [*found, *(os.path.join(end, hook) for hook in GIT_HOOKS)]
    return [*found, end]


def _walk(path: str, top: str) -> tuple[list[tuple[str, str]], str] | None:
    """Resolve `path` as the kernel does for git running in `top` (`/proc/self/cwd` is
    `top`, not hookline's own folder): each link met on the way with the folder holding
    it, and where it ends; None for a loop or a path too long to resolve."""
    pending = [part for part in path.split("/") if part not in ("", ".")]
    at, steps = "/", 0
    links: list[tuple[str, str]] = []
    while pending:
        steps += 1
        if steps > MAX_WALK_STEPS:
            return None
        part = pending.pop(0)
        if part == "..":
            at = os.path.dirname(at)
            continue
        here = os.path.join(at, part)
        if here in ("/proc/self", "/proc/thread-self") and pending[:1] == ["cwd"]:
            pending.pop(0)
            at = top
            continue
        try:
            target = os.readlink(here)
        except FileNotFoundError:  # nothing beyond a missing folder is a link
            return links, os.path.normpath(os.path.join(here, *pending))
        except OSError:  # not a link
            at = here
            continue
        links.append((here, at))
        if len(links) > MAX_LINKS:
            return None
        at = "/" if target.startswith("/") else at
        pending = [part for part in target.split("/") if part not in ("", ".")] + pending
    return links, at


def _read_by_hooks(folders: list[str], top: str, budget: ReadBudget | None) -> list[str]:
    """What the hooks of `folders` run from the worktree, where a hook manager put them
    there: husky's hooks folder (`core.hooksPath = .husky/_`) runs the hook of the same
    name in its parent (`.husky/pre-commit`), lefthook's hooks read its config
    (`LEFTHOOK_FILES`), pre-commit's theirs (`PRE_COMMIT_CONFIG`, or the one the hook
    names). The first bytes of a hook git would run say whose it is: one that names
    lefthook, or that runs `hook-impl` (pre-commit's and prek's)."""
    found = [os.path.dirname(folder) for folder in folders if os.path.basename(folder) == "_"]
    heads = [file_start(os.path.join(folder, hook), MAX_HOOK_BYTES, budget)
             for folder in folders for hook in GIT_HOOKS]
    if any(b"lefthook" in head for head in heads):
        found += [os.path.join(top, name) for name in LEFTHOOK_FILES]
    for head in heads:
        if b"hook-impl" in head:
            named = _PRE_COMMIT_NAMED.findall(head) or [PRE_COMMIT_CONFIG.encode()]
            found += [os.path.join(top, os.fsdecode(name)) for name in named]
    return found


def user_configs() -> list[str]:
    """The config files git reads for every repository (a relative `core.hooksPath` in
    them names a folder of each repository's worktree)."""
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return ["/etc/gitconfig", os.path.join(xdg, "git", "config"),
            os.path.expanduser("~/.gitconfig")]


def is_git_folder(path: str) -> bool:
    """Whether `path` holds a repository's own files (a `.git` folder, a bare repository):
    git takes a folder with a `HEAD` for one."""
    return os.path.lexists(os.path.join(path, "HEAD"))


def what_git_runs(gitdir: str) -> list[str]:
    """What git would run with the user's rights in the repository `gitdir`, as its own
    files set it up: each hook (an executable file of its `hooks` folder with a name of
    `GIT_HOOKS`), and each entry of its config that names a command, a hooks folder, a file
    to include or an `ext::` transport (which runs a command); for a linked worktree's,
    those of the repository its `commondir` names too. A fresh `git init` or `git clone`
    has none of them; a repository a command made may have any."""
    common = common_dir(gitdir)
    found = [f"hook {name}" for name in _hooks(os.path.join(common or gitdir, "hooks"))]
    configs = [os.path.join(gitdir, "config"), os.path.join(gitdir, "config.worktree")]
    for config in [*configs, *([os.path.join(common, "config")] if common else [])]:
        found.extend(f"{entry.name} = {_shown(entry.value)}"
                     for entry in config_entries(config)
                     if _names_hooks(entry) or _command(entry) or _includes(entry)
                     or (entry.key in ("url", "pushurl") and entry.value.startswith("ext::")))
    return found


def _names_hooks(entry: Entry) -> bool:
    return (entry.section, entry.key) == ("core", "hookspath") and bool(entry.value)


def _includes(entry: Entry) -> bool:
    return entry.section in ("include", "includeif") and entry.key == "path" and bool(
        entry.value)


def _command(entry: Entry) -> str:
    """The command `entry` has git run: a `PROGRAM_KEYS` entry, a `pager.<command>` or a
    `!` alias that names one; empty for any other entry or a boolean."""
    if entry.section == "alias":
        # An alias without `!` is one of git's own commands.
        return entry.value[1:] if entry.value.startswith("!") else ""
    if (entry.section, entry.key) in PROGRAM_KEYS or entry.section == "pager":
        command = entry.value.removeprefix("!")  # a credential helper may be a shell command
        return "" if command.strip().lower() in BOOLEANS else command
    return ""


SCRIPT_SUFFIXES = (".sh", ".bash", ".zsh", ".py", ".pl", ".rb", ".js", ".mjs", ".ts", ".php",
                   ".lua", ".tcl", ".ps1")
"""How the scripts an interpreter runs end, where a command names them bare (`sh x.sh`)."""


def _programs(command: str) -> list[str]:
    """What a command git runs through the shell may run from the worktree: its first word
    when a path (a bare name is looked for on PATH), and each later word that is a path or
    a script (`sh tools/fsmon.sh`, `python3 lint.py`: the interpreter runs the file)."""
    try:
        words = shlex.split(command)
    except ValueError:  # an unclosed quote: the shell would refuse it too
        words = command.split()
    first = words[:1] if words and "/" in words[0] else []
    later = [word for word in words[1:] if not word.startswith("-") and (
        "/" in word or word.lower().endswith(SCRIPT_SUFFIXES))]
    return [*first, *later]


def _hooks(folder: str) -> list[str]:
    """The hooks of `folder` git would run: executable files (or links) of `GIT_HOOKS`."""
    return [name for name in GIT_HOOKS if _executable(os.path.join(folder, name))]


def _executable(path: str) -> bool:
    try:
        info = os.stat(path)  # a link is followed, as git follows it
    except OSError:
        return os.path.islink(path)  # dangling now, it may point somewhere later
    return stat.S_ISREG(info.st_mode) and bool(info.st_mode & 0o111)


def _shown(value: str) -> str:
    """A value as a warning quotes it: in quotes, cut to `MAX_SHOWN` characters."""
    return repr(value if len(value) <= MAX_SHOWN else value[:MAX_SHOWN] + "...")


def _resolved(value: str, base: str, top: str) -> str:
    """`value` (relative to `base`) where git, running in `top`, reaches it (`_walk`)."""
    path = os.path.join(base, os.path.expanduser(value))
    walked = _walk(path, top)
    return walked[1] if walked is not None else os.path.normpath(path)


def common_dir(gitdir: str) -> str | None:
    """The repository folder the `commondir` file of `gitdir` names (resolved), where a
    linked worktree's git reads config, hooks, objects and refs; None without one. Read as
    git reads it: through a link, the whole file but its trailing line ends; and whatever
    a search's budget says: a command must not hide a repository's hooks by spending it."""
    path = os.path.realpath(os.path.join(gitdir, "commondir"))
    named = file_start(path, 4096).rstrip(b"\r\n")
    if not named:
        return None
    return os.path.realpath(os.path.join(gitdir, named.decode("utf-8", "surrogateescape")))


def _text(path: str, budget: ReadBudget | None = None) -> str:
    """The file's first `MAX_CONFIG_BYTES`, or nothing for a missing or irregular one."""
    return file_start(path, MAX_CONFIG_BYTES, budget).decode("utf-8", "replace")


def _user_entries(path: str) -> tuple[Entry, ...]:
    """The entries of one of the user's own config files, parsed again only once it
    changed: every repository of the workspace reads them."""
    try:
        info = os.stat(path)
    except OSError:
        return ()
    return _parsed(path, info.st_ino, info.st_size, info.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _parsed(path: str, *identity: int) -> tuple[Entry, ...]:
    return tuple(config_entries(path))


def config_entries(path: str, budget: ReadBudget | None = None) -> list[Entry]:
    """Each entry of the git config file at `path` (`Entry`); a key without `=` has an
    empty value."""
    entries: list[Entry] = []
    section = subsection = ""
    lines = iter(_text(path, budget).splitlines())
    for raw in lines:
        line = raw.strip()
        if line.startswith("["):  # a key may follow the header on its line
            section, subsection, line = _header(line[1:])
        if not line or line[0] in "#;":
            continue
        key, _, rest = line.partition("=")
        entries.append(Entry(section, subsection, key.strip().lower(), _value(rest, lines)))
    return entries


def _header(text: str) -> tuple[str, str, str]:
    """Section, subsection and what follows the header, of a header line after its `[`:
    `[filter "a \\"b\\""]`, or the older `[filter.lfs]` (its subsection lowercased)."""
    name_end = next((index for index, char in enumerate(text) if char in ' \t"]'), len(text))
    name, rest = text[:name_end], text[name_end:].lstrip()
    section, dot, dotted = name.partition(".")
    if dot:
        return section.lower(), dotted.lower(), rest.removeprefix("]").strip()
    subsection: list[str] = []
    if rest.startswith('"'):
        index = 1
        while index < len(rest) and rest[index] != '"':
            escaped = rest[index] == "\\" and index + 1 < len(rest)
            subsection.append(rest[index + 1] if escaped else rest[index])
            index += 2 if escaped else 1
        rest = rest[index + 1:].lstrip()
    return section.lower(), "".join(subsection), rest.removeprefix("]").strip()


def _value(text: str, lines: Iterator[str]) -> str:
    """A value as git reads it: quotes taken out, escapes resolved, a `#` or `;` outside
    quotes ending it, a backslash at the end of a line joining the next one."""
    parts: list[str] = []
    quoted = False
    while True:
        index = 0
        while index < len(text):
            char = text[index]
            if char == "\\" and index + 1 < len(text):
                parts.append(_ESCAPES.get(text[index + 1], text[index + 1]))
                index += 2
                continue
            if char == "\\":  # the line goes on in the next one
                break
            if char == '"':
                quoted = not quoted
            elif char in "#;" and not quoted:
                return "".join(parts).strip()
            else:
                parts.append(char)
            index += 1
        else:
            return "".join(parts).strip()
        text = next(lines, "")
