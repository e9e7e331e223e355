"""What a git repository's config has git run, or read as config, from its worktree.

A repository's config is protected (it lives in `.git`), but it may name files in the
worktree that git then runs with the user's rights: the hooks folder `core.hooksPath`
names (husky sets `.husky/_`), a `core.fsmonitor` program, the program another key names
by a path (a filter, a diff driver, an editor, a credential helper, a `!` alias), and
files `include.path` or `includeIf.<condition>.path` add to the config (which may name
anything in turn). A
command that could write those would have its code run by the user's next `git commit` or
`git status`, as `.git/hooks` would: `run_by_git` finds them so that they are protected too.

hookline reads these files outside the sandbox, where commands may have made them: each is
opened without blocking, regular files only, and read up to `MAX_CONFIG_BYTES`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator

from hookline.kernel.errors import HooklineError

from .files import is_inside, open_regular_file

__all__ = ["config_entries", "run_by_git", "user_configs"]

MAX_CONFIG_BYTES = 64 * 1024
"""Bytes of one config file read, at most (git's are a few hundred)."""

MAX_CONFIG_FILES = 16
"""Config files read for one repository, at most (its includes are files a command may
have made, as many as it likes)."""

MAX_INCLUDE_DEPTH = 10
"""Includes followed within includes, as deep as git itself follows them."""

PROGRAM_KEYS = frozenset({
    ("core", "fsmonitor"), ("core", "editor"), ("core", "pager"), ("core", "sshcommand"),
    ("core", "askpass"),
    ("sequence", "editor"), ("diff", "external"), ("diff", "textconv"), ("diff", "command"),
    ("filter", "clean"), ("filter", "smudge"), ("filter", "process"), ("merge", "driver"),
    ("gpg", "program"), ("credential", "helper")})
"""Keys whose value is a command git runs (a subsection, as `filter.<driver>.clean`, left
out); `!` aliases are commands too."""

_ESCAPES = {"n": "\n", "t": "\t", "b": "\b"}


def run_by_git(top: str, gitdir: str, workspace: str) -> list[str]:
    """The paths inside `workspace` that the config of the repository `gitdir`, whose
    worktree is `top`, has git run or read: the `core.hooksPath` folder and each program
    a key names by a path (`PROGRAM_KEYS`, `!` aliases; relative to `top`), and included
    config files (relative to the file that includes them), followed through their own
    includes. The user's and the system's config, a linked worktree's repository's
    (`commondir`) and `config.worktree` count too."""
    configs = [*user_configs(), os.path.join(gitdir, "config"),
               os.path.join(gitdir, "config.worktree")]
    common = _first_line(os.path.join(gitdir, "commondir"))
    if common:
        configs.append(os.path.join(gitdir, common, "config"))
    found: list[str] = []
    read: set[str] = set()
    pending = [(os.path.realpath(config), 0) for config in configs]
    while pending:
        config, depth = pending.pop()
        if config in read or depth > MAX_INCLUDE_DEPTH or len(read) >= MAX_CONFIG_FILES:
            continue
        read.add(config)
        for section, key, value in config_entries(config):
            if section == "core" and key == "hookspath" and value:
                found.append(_resolved(value, top))
            elif program := _named_program(section, key, value):
                found.append(_resolved(program, top))
            elif section in ("include", "includeif") and key == "path" and value:
                included = _resolved(value, os.path.dirname(config))
                found.append(included)
                pending.append((included, depth + 1))
    return list(dict.fromkeys(path for path in found if is_inside(path, workspace)))


def user_configs() -> list[str]:
    """The config files git reads for every repository (a relative `core.hooksPath` in
    them names a folder of each repository's worktree)."""
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return ["/etc/gitconfig", os.path.join(xdg, "git", "config"),
            os.path.expanduser("~/.gitconfig")]


def _named_program(section: str, key: str, value: str) -> str | None:
    """The program a `PROGRAM_KEYS` entry or a `!` alias names by a path; None for any
    other entry, and for a bare name (which git looks for on PATH, or a boolean such as
    `core.fsmonitor = true`)."""
    if section == "alias":
        if not value.startswith("!"):  # an alias of git's own commands
            return None
        command = value[1:]
    elif (section, key) in PROGRAM_KEYS:
        command = value.removeprefix("!")  # a credential helper may be a shell command
    else:
        return None
    program = _program(command)
    return program if "/" in program else None


def _program(command: str) -> str:
    """The program of a command git runs through the shell: its first word."""
    try:
        words = shlex.split(command)
    except ValueError:  # an unclosed quote: the shell would refuse it too
        words = command.split()
    return words[0] if words else command


def _resolved(value: str, base: str) -> str:
    return os.path.realpath(os.path.join(base, os.path.expanduser(value)))


def _first_line(path: str) -> str:
    lines = _text(path).splitlines()
    return lines[0].strip() if lines else ""


def _text(path: str) -> str:
    """The file's first `MAX_CONFIG_BYTES`, or nothing for a missing or irregular one."""
    try:
        handle, _info = open_regular_file(path)
    except (OSError, HooklineError):
        return ""
    with handle:
        return handle.read(MAX_CONFIG_BYTES).decode("utf-8", "replace")


def config_entries(path: str) -> list[tuple[str, str, str]]:
    """(section, key, value) of each entry of the git config file at `path`: section and
    key lowercased (a subsection left out), the value unquoted and unescaped, a key
    without `=` an empty value."""
    entries: list[tuple[str, str, str]] = []
    section = ""
    lines = iter(_text(path).splitlines())
    for raw in lines:
        line = raw.strip()
        if line.startswith("["):  # a key may follow the header on its line
            header, _, line = line[1:].partition("]")
            words = header.split(maxsplit=1)
            section = words[0].split(".", 1)[0].lower() if words else ""
            line = line.strip()
        if not line or line[0] in "#;":
            continue
        key, _, rest = line.partition("=")
        entries.append((section, key.strip().lower(), _value(rest, lines)))
    return entries


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
