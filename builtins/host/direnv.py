"""What a direnv `.envrc` has your shell load from the workspace when you enter a folder.

direnv runs an `.envrc` only once you allowed it, and asks again when it changes, but not
when what it loads does: the `.env` of its `dotenv` (variables such as `PATH` or
`GIT_CONFIG_*` run programs at your next command), the files it sources, and what the
`use flake` and `use nix` of nix-direnv evaluate (a `shellHook` runs in your shell). A
command in the sandbox could change those and have them run outside it, with your
rights. `loaded_by_envrc` names them, for the sandbox to keep read-only like a
repository's hooks. The folders `PATH_add` puts first on your PATH are not among them:
they hold the project's own scripts, which commands are there to change.

An `.envrc` is bash: each simple command of each line is looked at, whatever block it is
in, and a line that does not split (an open quote) is passed over.
"""

from __future__ import annotations

import os
import shlex

from .files import ReadBudget, file_start, is_inside

__all__ = ["ENVRC", "loaded_by_envrc"]

ENVRC = ".envrc"

MAX_ENVRC_BYTES = 64 * 1024
"""Bytes of an `.envrc` read, at most (they are a few lines)."""

DOTENV = frozenset({"dotenv", "dotenv_if_exists"})
"""Directives that load a file of variables, `.env` when they name none."""

SOURCING = frozenset({"source", ".", "source_env", "source_env_if_exists"})
"""Directives that run a file as part of the `.envrc` (`source_env` a folder's `.envrc`)."""

FLAKE_FILES = ("flake.nix", "flake.lock")
"""What `use flake` evaluates of a local flake (the lock names the flakes it pulls in)."""

NIX_FILES = ("shell.nix", "default.nix")
"""What `use nix` evaluates when it names no file and no packages."""

KEYWORDS = frozenset({"if", "then", "elif", "else", "fi", "while", "until", "do", "done",
                      "!", "{", "}"})
"""Words of bash that come before a command without being one."""


def loaded_by_envrc(envrc: str, workspace: str, budget: ReadBudget | None = None
                    ) -> list[str]:
    """The files inside `workspace` that the `.envrc` at `envrc` loads, resolved from its
    folder; those missing too (one made later is said then). Read within `budget`."""
    folder = os.path.dirname(envrc)
    text = file_start(os.path.realpath(envrc), MAX_ENVRC_BYTES, budget).decode("utf-8",
                                                                                "replace")
    found = [_resolved(name, folder) for line in text.splitlines()
             for words in _commands(line) for name in _loaded(words)]
    return list(dict.fromkeys(path for path in found if is_inside(path, workspace)))


def _commands(line: str) -> list[list[str]]:
    """The simple commands of a line, each as its words without the keywords before it
    (`if has nix; then use flake; fi` is `has nix` and `use flake`); none for a line
    that does not split (an open quote)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""  # bash starts a comment at a word's start only (`.#dev` is none)
    commands: list[list[str]] = [[]]
    try:
        for word in lexer:  # one at a time: a quote in a comment is never read
            if word.startswith("#"):
                break
            if word and all(char in lexer.punctuation_chars for char in word):
                commands.append([])
            elif commands[-1] or word not in KEYWORDS:
                commands[-1].append(word)
    except ValueError:
        return []
    return [command for command in commands if command]


def _loaded(words: list[str]) -> list[str]:
    """The names the directive `words` loads."""
    if len(words) > 1 and words[0] == "use":
        return _used(words[1], words[2:])
    if words and words[0] in SOURCING:
        return words[1:2]
    if words and words[0] in DOTENV:
        return words[1:2] or [".env"]
    return []


def _used(kind: str, arguments: list[str]) -> list[str]:
    """What `use flake` (a local flake's files, not a remote one's) or `use nix` (the
    `.nix` files named, else its defaults unless it names packages) evaluates."""
    if kind == "flake":
        named = arguments[0].split("#")[0] if arguments else "."
        local = named.startswith((".", "/", "~"))
        return [os.path.join(named, name) for name in FLAKE_FILES] if local else []
    if kind == "nix":
        files = [argument for argument in arguments if argument.endswith(".nix")]
        packages = any(argument in ("-p", "--packages") for argument in arguments)
        return files or ([] if packages else list(NIX_FILES))
    return []


def _resolved(name: str, folder: str) -> str:
    """`name` from `folder` (where direnv runs the `.envrc`: its `$PWD`); a folder stands
    for its `.envrc` (as `source_env` reads it)."""
    name = name.replace("${PWD}", folder).replace("$PWD", folder)
    path = os.path.realpath(os.path.join(folder, os.path.expanduser(name)))
    return os.path.join(path, ENVRC) if os.path.isdir(path) else path
