"""Approval rules: `[[rules]]` tables saying `allow`, `ask` or `deny` for a tool call.

Rules come from two files, in this order: the user's config file and the workspace's
`.hookline/rules.toml` (which the sandbox keeps read-only to commands). Within a file the
first matching rule wins; across files the strictest of their first matches wins, so a
deny anywhere beats an allow anywhere. A workspace file arrives with a cloned repository,
so its `allow` rules count only once the user trusted its exact content
(`hookline rules trust`); its `ask` and `deny` rules always count.

A shell command line is judged command by command (`shellwords.split_commands`): it is
allowed only when the line is plain and every one of its commands is allowed; any command
denied (or asked about) makes the whole line so.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ..config.table import misplaced_settings
from .shellwords import split_commands

if TYPE_CHECKING:
    from ..config import Settings

__all__ = [
    "RULES_TABLE",
    "WORKSPACE_RULES",
    "Rule",
    "RuleError",
    "RuleSet",
    "Verdict",
    "check_config_rules",
    "load_rules",
    "trust_workspace_rules",
]

RuleAction: TypeAlias = Literal["allow", "ask", "deny"]
RULE_ACTIONS: tuple[RuleAction, ...] = ("allow", "ask", "deny")
"""In rising strictness: the strictest of several verdicts wins."""

RULES_TABLE = "rules"
"""The name of the array of tables, in the config file and the workspace file."""
WORKSPACE_RULES = os.path.join(".hookline", "rules.toml")
"""The workspace's rules file, relative to the workspace."""
TRUST_FILE = "trusted-rules.json"
"""In the hookline home: workspace rules files whose allow rules the user trusted."""
MAX_RULES_BYTES = 1 << 20

SHELL_TOOL = "shell"
FILE_TOOLS = frozenset({"fs_read", "fs_write", "fs_edit"})
_FIELDS = frozenset({"action", "tool", "command", "path", "reason"})


class RuleError(ValueError):
    """A rules table that cannot be used; the message names the file, the rule and the fix."""


def tool_key(name: str) -> str:
    """A tool's name as rules compare it: the model's spelling (`fs.write` is `fs_write`)."""
    return name.replace(".", "_")


@dataclass(frozen=True)
class Rule:
    """One `[[rules]]` table: `action` for calls of `tool` (a name or a `*` glob) whose
    shell command starts with `command`'s words, or whose path matches the `path` glob."""

    action: RuleAction
    tool: str
    source: str
    index: int
    command: tuple[str, ...] | None = None
    path: str | None = None
    reason: str = ""
    _tool_pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _path_pattern: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_tool_pattern", _glob(self.tool, separator=None))
        object.__setattr__(self, "_path_pattern",
                           None if self.path is None else _glob(self.path, separator="/"))

    @property
    def where(self) -> str:
        """`<file> rule <n>` (counting from 1), for every message that names the rule."""
        return f"{self.source} rule {self.index + 1}"

    def describe(self) -> str:
        what = f"tool = {self.tool!r}"
        if self.command is not None:
            what += f", command = {' '.join(self.command)!r}"
        if self.path is not None:
            what += f", path = {self.path!r}"
        return f"{self.action} ({what}; {self.where})"

    def matches_tool(self, tool: str) -> bool:
        return self._tool_pattern.fullmatch(tool) is not None

    def matches_words(self, words: Sequence[str]) -> bool:
        """A shell command: every word of the rule, in order, starts the command."""
        return self.command is None or tuple(words[:len(self.command)]) == self.command

    def matches_path(self, path: str | None) -> bool:
        if self._path_pattern is None:
            return True
        return path is not None and self._path_pattern.fullmatch(path) is not None


@dataclass(frozen=True)
class Verdict:
    """What the rules say of one call: an action and the rule that decided (None: no rule
    matched), with `detail` saying why in words a person reads."""

    action: RuleAction | None
    rule: Rule | None
    detail: str


@dataclass(frozen=True)
class RuleSet:
    """The rules of every file, in order, and those set aside (with why)."""

    files: tuple[tuple[Rule, ...], ...] = ()
    ignored: tuple[str, ...] = ()
    """Why some rules do not count (an untrusted workspace file's allow rules)."""

    def judge(self, tool: str, arguments: Mapping[str, Any], workspace: str) -> Verdict:
        """The verdict for one call of `tool` (model spelling) with these arguments."""
        tool = tool_key(tool)
        if tool == SHELL_TOOL:
            return self._judge_shell(str(arguments.get("command") or ""))
        paths: tuple[str | None, ...] = (None,)
        if tool in FILE_TOOLS and isinstance(arguments.get("path"), str):
            paths = workspace_paths(arguments["path"], workspace)
        found = [self._strictest(rule for rule in (self._first(rules, tool, (), path)
                                                   for rules in self.files) if rule)
                 for path in paths]
        rule = self._strictest(rule for rule in found if rule is not None)
        if rule is None or (rule.action == "allow" and None in found):
            # Allowed only when the path as given and the file it leads to both are: a
            # link under an allowed folder must not carry the rule to what it points at.
            return Verdict(None, None, "no rule matches" if len(paths) == 1 else
                           f"no rule matches both {paths[0]!r} and the file it leads to, "
                           f"{paths[1]!r}")
        return Verdict(rule.action, rule, f"matches {rule.describe()}")

    def _judge_shell(self, line: str) -> Verdict:
        parsed = split_commands(line)
        if not parsed.commands:
            rule = self._strictest(rule for rule in (self._first(rules, SHELL_TOOL, None, None)
                                                     for rules in self.files) if rule)
            return Verdict(None, None, "no command") if rule is None else Verdict(
                rule.action, rule, f"matches {rule.describe()}")
        decided: list[tuple[tuple[str, ...], Rule | None]] = []
        for words in parsed.commands:
            found = [self._first(rules, SHELL_TOOL, words, None) for rules in self.files]
            decided.append((words, self._strictest(rule for rule in found if rule)))
        for action in ("deny", "ask"):
            for words, rule in decided:
                if rule is not None and rule.action == action:
                    return Verdict(rule.action, rule,
                                   f"{' '.join(words)!r} matches {rule.describe()}")
        if not parsed.complete:
            return Verdict("ask", None, f"the line could not be read whole ({parsed.reason}), "
                                        f"so the rules cannot vouch for it")
        unmatched = [words for words, rule in decided if rule is None]
        if unmatched:
            return Verdict(None, None, f"no rule matches {' '.join(unmatched[0])!r}")
        rules = [rule for _words, rule in decided if rule is not None]
        if not parsed.plain and any(rule.command is not None for rule in rules):
            return Verdict(None, None, f"an allow rule matches only a plain command line, "
                                       f"and this one has {parsed.reason}")
        return Verdict("allow", rules[0], "every command is allowed: " + "; ".join(
            f"{' '.join(words)!r} by {rule.where}" for words, rule in decided if rule))

    @staticmethod
    def _first(rules: Iterable[Rule], tool: str, words: Sequence[str] | None,
               path: str | None) -> Rule | None:
        for rule in rules:
            if not rule.matches_tool(tool) or not rule.matches_path(path):
                continue
            if rule.command is not None and (words is None or not rule.matches_words(words)):
                continue
            return rule
        return None

    @staticmethod
    def _strictest(rules: Iterable[Rule]) -> Rule | None:
        best: Rule | None = None
        for rule in rules:
            if best is None or RULE_ACTIONS.index(rule.action) > RULE_ACTIONS.index(best.action):
                best = rule
        return best


def workspace_paths(path: str, workspace: str) -> tuple[str, ...]:
    """A file tool's path as rules see it: as given (`..` resolved) and, when a link leads
    elsewhere, the file the tool would reach (links resolved, as the tools do), each
    relative to the workspace with `/` separators; a path outside it stays absolute. `~`
    is a name like any other, as it is to the tools."""
    joined = os.path.join(workspace, path)
    given = os.path.normpath(joined)
    # Links first, then `..`, as the tools (and the kernel) read a path: `link/../x` is
    # next to where the link leads, not next to the link.
    reached = os.path.realpath(joined)
    return tuple(dict.fromkeys(_relative(full, workspace) for full in (given, reached)))


def _relative(full: str, workspace: str) -> str:
    for root in dict.fromkeys((os.path.normpath(workspace), os.path.realpath(workspace))):
        if full == root:
            return "."
        if full.startswith(root.rstrip(os.sep) + os.sep):
            return os.path.relpath(full, root).replace(os.sep, "/")
    return full


def _glob(pattern: str, separator: str | None) -> re.Pattern[str]:
    """`*` (within one path part when `separator` is given), `**` (across parts), `?`."""
    parts = re.split(r"(\*\*/?|\*|\?)", pattern)
    any_char = "." if separator is None else f"[^{re.escape(separator)}]"
    out = []
    for part in parts:
        if part in ("**", "**/"):
            out.append("(?:.*/)?" if part == "**/" else ".*")
        elif part == "*":
            out.append(f"{any_char}*")
        elif part == "?":
            out.append(any_char)
        else:
            out.append(re.escape(part))
    return re.compile("".join(out), re.DOTALL)


# -- reading -----------------------------------------------------------------------------


def parse_rules(tables: Any, source: str) -> tuple[Rule, ...]:
    """The `[[rules]]` tables of one file, checked; RuleError names the rule and the fix."""
    if tables is None:
        return ()
    if not isinstance(tables, list):
        raise RuleError(f"{source}: {RULES_TABLE} must be an array of tables ([[rules]]), "
                        f"got {type(tables).__name__}")
    return tuple(_parse_rule(table, source, index) for index, table in enumerate(tables))


def _parse_rule(table: Any, source: str, index: int) -> Rule:
    where = f"{source} rule {index + 1}"
    if not isinstance(table, dict):
        raise RuleError(f"{where}: each [[rules]] entry must be a table")
    unknown = sorted(set(table) - _FIELDS)
    if unknown:
        raise RuleError(f"{where}: unknown field(s) {', '.join(unknown)}; a rule has "
                        f"action, tool, command (shell), path (file tools) and reason"
                        f"{misplaced_settings(unknown)}")
    action = table.get("action")
    if action not in RULE_ACTIONS:
        raise RuleError(f"{where}: action must be one of {', '.join(RULE_ACTIONS)}, "
                        f"got {action!r}")
    tool = table.get("tool")
    if not isinstance(tool, str) or not tool.strip():
        raise RuleError(f"{where}: tool must name a tool (shell, fs_write, a server__tool of "
                        f"an MCP server) or a * pattern")
    tool = tool_key(tool.strip())
    reason = table.get("reason", "")
    if not isinstance(reason, str):
        raise RuleError(f"{where}: reason must be text")
    command = table.get("command")
    words: tuple[str, ...] | None = None
    if command is not None:
        if tool != SHELL_TOOL:
            raise RuleError(f"{where}: command applies to the shell tool only (tool = "
                            f"\"shell\"), not {tool!r}")
        parsed = split_commands(command) if isinstance(command, str) else None
        if parsed is None or not parsed.plain or len(parsed.commands) != 1:
            raise RuleError(f"{where}: command must be the start of one plain command, "
                            f"such as \"git status\" or \"pytest\", got {command!r}")
        words = parsed.commands[0]
    path = table.get("path")
    if path is not None:
        if not _may_have_path(tool):
            raise RuleError(f"{where}: path applies to the file tools only "
                            f"({', '.join(sorted(FILE_TOOLS))}), not {tool!r}")
        if not isinstance(path, str) or not path.strip():
            raise RuleError(f"{where}: path must be a glob such as \"docs/**\"")
        path = path.strip().removeprefix("./")
    return Rule(action, tool, source, index, words, path, reason)


def _may_have_path(tool: str) -> bool:
    pattern = _glob(tool, separator=None)
    return any(pattern.fullmatch(name) for name in FILE_TOOLS)


def read_rules_file(path: Path) -> Any:
    """The `rules` array of a TOML file (None when the file does not exist)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RuleError(f"cannot read the rules file {path}: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_RULES_BYTES:
            raise RuleError(f"the rules file {path} must be a regular TOML file of at most "
                            f"{MAX_RULES_BYTES} bytes")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            raw = handle.read(MAX_RULES_BYTES + 1)
    finally:
        os.close(fd)
    from ..config import parse_toml

    try:
        data = parse_toml(raw)
    except ValueError as exc:
        raise RuleError(f"the rules file {path} is not valid TOML: {exc}; fix it") from exc
    unknown = sorted(set(data) - {RULES_TABLE})
    if unknown:
        raise RuleError(f"the rules file {path} may hold only [[rules]] tables, not "
                        f"{', '.join(unknown)}")
    return data.get(RULES_TABLE)


def check_config_rules(settings: Settings) -> None:
    """The config file's `[[rules]]`, checked at start: a broken one would otherwise show
    only when a tool call needs the rules (and deny every call that writes or runs)."""
    from ..config.table import CONFIG_NAME, SettingsError

    try:
        parse_rules(settings.extra.get(RULES_TABLE), str(settings.home / CONFIG_NAME))
    except RuleError as exc:
        raise SettingsError(f"{exc}. Fix the rule, or remove it.", key=RULES_TABLE) from None


def load_rules(config_tables: Any, config_path: Path, workspace: str,
               home: Path) -> RuleSet:
    """The rules of the config file, then of the workspace file (its allow rules only
    when trusted)."""
    files = [parse_rules(config_tables, str(config_path))]
    ignored: list[str] = []
    workspace_file = Path(workspace) / WORKSPACE_RULES
    tables = read_rules_file(workspace_file)
    if tables is not None:
        rules = parse_rules(tables, str(workspace_file))
        if not _trusted(workspace, home):
            allows = [rule for rule in rules if rule.action == "allow"]
            if allows:
                ignored.append(
                    f"{len(allows)} allow rule(s) of {workspace_file} do not count: the file "
                    f"came with the workspace and you have not trusted its content; read it, "
                    f"then run `hookline rules trust` in the workspace")
            rules = tuple(rule for rule in rules if rule.action != "allow")
        files.append(rules)
    return RuleSet(tuple(files), tuple(ignored))


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _trust_table(home: Path) -> dict[str, str]:
    try:
        data = json.loads((home / TRUST_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _trusted(workspace: str, home: Path) -> bool:
    digest = _digest(Path(workspace) / WORKSPACE_RULES)
    return digest is not None and _trust_table(home).get(_trust_key(workspace)) == digest


def _trust_key(workspace: str) -> str:
    """Where a trust is recorded: the workspace's own rules file, links in the workspace
    not followed (a `.hookline` leading to another project's does not bring that project's
    trust along)."""
    return os.path.join(os.path.realpath(workspace), WORKSPACE_RULES)


def trust_workspace_rules(workspace: str, home: Path) -> Path:
    """Record the workspace rules file's current content as trusted; a later change of the
    file needs trusting again. Returns the file."""
    from ..privacy.files import secure_home, write_private_file

    path = Path(workspace) / WORKSPACE_RULES
    parse_rules(read_rules_file(path), str(path))  # a broken file is not trusted
    digest = _digest(path)
    if digest is None:
        raise RuleError(f"there is no rules file at {path}")
    secure_home(home)
    table = _trust_table(home)
    table[_trust_key(workspace)] = digest
    write_private_file(home / TRUST_FILE, json.dumps(table, indent=1, sort_keys=True))
    return path
