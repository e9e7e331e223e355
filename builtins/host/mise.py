"""What mise has your shell load and run from the workspace when you enter a folder.

With `mise activate`, mise reads the config files of the folder you enter and of every
folder above it: their `[env]` (the dotenv files of `_.file`, the bash scripts
`_.source` runs) and their `[hooks]` (`enter`, `cd`, `leave`). It asks you to trust a
config file once, by its path, not its content, and never asks about what it loads. A
command in the sandbox could change any of those and have them run outside it, with
your rights. `loaded_by_mise` names them (the config file itself too), for the sandbox
to keep read-only like a repository's hooks. The folders `_.path` puts on your PATH are
not among them: they hold the project's own scripts, which commands are there to change.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
from typing import Any

from ..config import parse_toml
from .files import ReadBudget, file_start, is_inside

__all__ = ["config_root", "loaded_by_mise", "may_be_config"]

MAX_CONFIG_BYTES = 64 * 1024
"""Bytes of a mise config file read, at most."""

_CONFIG_ROOT = re.compile(r"\{\{\s*config_root\s*\}\}")
"""The template mise fills with the config's project folder."""

_CONFIG_NAME = re.compile(r"\.?mise(\.[\w-]+)*\.toml")
"""`mise.toml`, `.mise.toml`, `mise.local.toml`, one for an environment (`mise.dev.toml`)."""

CONFIG_FOLDERS = ((".config", "mise"), (".mise",), ("mise",))
"""Folders under a project that hold its `config.toml`, the longest first
(`.config/mise.toml` is named like one at the top)."""


def may_be_config(name: str) -> bool:
    """Whether a file of this name may be a mise config file: a cheap test that rules out
    nearly every name met in a search of the workspace."""
    return "mise" in name or name == "config.toml"


def config_root(path: str) -> str | None:
    """The project folder whose config the file `path` is, or None for another file."""
    folder, name = os.path.split(path)
    if not may_be_config(name):
        return None
    if _CONFIG_NAME.fullmatch(name):
        return os.path.dirname(folder) if os.path.basename(folder) == ".config" else folder
    if name != "config.toml":
        return None
    for parts in CONFIG_FOLDERS:
        above = folder
        for part in reversed(parts):
            above, last = os.path.split(above)
            if last != part:
                break
        else:
            return above
    return None


def loaded_by_mise(path: str, workspace: str, budget: ReadBudget | None = None
                   ) -> list[str]:
    """The files inside `workspace` that the mise config file `path` loads or runs, with
    the file itself: its `_.file` and `_.source` (`_matches`), and each hook's program
    where a path names it (a bare name is looked for on PATH). Read within `budget`."""
    root = config_root(path) or os.path.dirname(path)
    try:
        config = parse_toml(file_start(os.path.realpath(path), MAX_CONFIG_BYTES, budget))
    except ValueError:  # not TOML (or nested too deep): the file itself only
        config = {}
    directives = _table(_table(config.get("env")).get("_"))
    named = [*_paths(directives.get("file")), *_paths(directives.get("source")),
             *_paths(config.get("env_file")), *_paths(config.get("dotenv"))]  # older names
    found = [os.path.realpath(path)]
    for name in (_expanded(name, root) for name in named):
        found += [os.path.realpath(match) for match in _matches(name, root)] or [
            os.path.join(root, name)]
    found += [os.path.realpath(os.path.join(root, _expanded(program, root)))
              for program in _hook_programs(_table(config.get("hooks")))]
    return list(dict.fromkeys(file for file in found if is_inside(file, workspace)))


def _expanded(name: str, root: str) -> str:
    """`name` with `~` and the `{{config_root}}` of mise's templates put in."""
    return os.path.expanduser(_CONFIG_ROOT.sub(lambda _match: root, name))


def _matches(name: str, root: str) -> list[str]:
    """The files a `_.source` glob names from `root`, where its wildcards are in the file's
    name only (`./scripts/*.sh`): a command writes the config, and a wildcard in a
    folder's name (`/*/*/*/*`) would have hookline walk the machine; such a pattern is
    taken as a name."""
    if any(char in "*?[" for char in os.path.dirname(name)):
        return []
    return glob.glob(os.path.join(glob.escape(root), name))


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _paths(value: Any) -> list[str]:
    """The paths a directive names: a string, a list of them, or tables with a `path`."""
    values = value if isinstance(value, list) else [value]
    found = [item.get("path") if isinstance(item, dict) else item for item in values]
    return [item for item in found if isinstance(item, str) and item]


def _hook_programs(hooks: dict[str, Any]) -> list[str]:
    """The program of each hook command (a string, a list of them, or tables with a
    `script` or `run`) when a path names it."""
    commands: list[str] = []
    for value in hooks.values():
        for item in value if isinstance(value, list) else [value]:
            script = item.get("script", item.get("run")) if isinstance(item, dict) else item
            if isinstance(script, str):
                commands.append(script)
    programs = []
    for command in commands:
        try:
            words = shlex.split(command, comments=True)
        except ValueError:
            continue
        if words and "/" in words[0]:
            programs.append(os.path.expanduser(words[0]))
    return programs
