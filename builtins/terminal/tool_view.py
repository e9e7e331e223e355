"""What a turn's tool calls did, for the terminal (`hookline run` and `hookline chat`): a
line per call and per result, and the change each file tool made as a unified diff.
Imported only once a turn calls a tool, and `difflib` and the local environment later
still, so a plain turn and `hookline --help` load none of it."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from ..privacy.redact import redact_credentials
from .tool_notes import call_line, is_terminal, result_lines, shortened, terminal_text

__all__ = [
    "FILE_TOOLS",
    "OUTPUT_LINES",
    "FileChanges",
    "ToolView",
    "colour_allowed",
    "render_diff",
    "wants_colour",
]

FILE_TOOLS = {"fs_write": "write", "fs.write": "write", "fs_edit": "edit", "fs.edit": "edit"}
"""The tools whose change is shown as a diff (model-facing names and the tools' own)."""

MAX_DIFF_LINES = 40
"""Lines of one diff shown; the rest is counted in a `... N more lines` line."""

OUTPUT_LINES = 8
"""Lines of a tool's output shown under its result line; the rest is counted."""

WIDE = 200
"""Characters of an output line shown when the output is not a terminal."""

MAX_SNAPSHOT_BYTES = 1024 * 1024
"""Largest file read to diff (1 MiB); a larger one is shown from the call's arguments."""

_MISSING = "\0missing"
"""A snapshot of a file that did not exist (no text file holds a NUL)."""

_COLOURS = {"+": "\x1b[32m", "-": "\x1b[31m", "@": "\x1b[36m", "h": "\x1b[1m"}


class ToolView:
    """The lines that show one turn's tool calls: `calls` when the model asks for them (a
    `[tool] name arguments` line each; the files they name are read first), `results`
    once they ran (a summary line each, then the next `output_lines` lines of what the
    call gave the model, every line when it is None, or the diff of each file tool's
    change, with `colour` removals red and additions green). `workspace` is where the file tools'
    paths are read from; output lines are cut to the width of `stream` (the terminal
    they are printed on; 200 characters when it is none)."""

    def __init__(self, workspace: str, *, output_lines: int | None = OUTPUT_LINES,
                 stream: Any = None) -> None:
        self.changes = FileChanges(workspace)
        self.output_lines = output_lines
        self.width = line_width(stream)

    async def calls(self, calls: list[dict[str, Any]]) -> list[str]:
        for call in calls:
            await self.changes.before(call)
        return [call_line(call) for call in calls]

    async def results(self, records: list[dict[str, Any]], colour: bool) -> list[str]:
        diffs = await self.changes.diffs(records)
        lines: list[str] = []
        for index, record in enumerate(records):
            lines += [redact_credentials(line) for line in result_lines([record])]
            if index in diffs:
                lines += render_diff(diffs[index], colour)
            elif record.get("outcome", "ran") == "ran" and not record.get("is_error"):
                lines += output_lines(str(record.get("output") or ""), self.output_lines,
                                      self.width)
        return lines


def output_lines(output: str, limit: int | None, width: int) -> list[str]:
    """What a call's output says below its result line (which shows the first line): the
    next `limit` lines (every line when it is None), indented, each cut to `width`
    characters, then `... N more lines`; credentials hidden and control characters
    escaped, as in error lines."""
    rest = output.strip().split("\n")[1:]
    shown = rest if limit is None else rest[:limit]
    lines = [shortened(redact_credentials("  " + line.expandtabs(4)), width) for line in shown]
    if len(rest) > len(shown):
        lines.append(f"  ... {len(rest) - len(shown)} more lines")
    return lines


def line_width(stream: Any) -> int:
    """The columns of the terminal `stream` is, else `WIDE`."""
    if not is_terminal(stream if stream is not None else sys.stdout):
        return WIDE
    try:
        return os.get_terminal_size((stream or sys.stdout).fileno()).columns or WIDE
    except (AttributeError, OSError, ValueError):
        return WIDE


class FileChanges:
    """The diffs of one model step's file tool calls. `before(call)` reads the file a
    call names when the call is announced (the agent runs no tool before the model's
    reply has been read to its end); `diffs(records)` reads it again once the calls ran.

    Files are read as the file tools read them (`LocalEnvironment`: inside the workspace,
    regular files with one link, the hookline home refused), at most 1 MiB. When a file
    cannot be read, or what is there now is not what the call wrote (the session's
    environment is not this machine's workspace), the diff is made from the call's
    arguments alone: the text `fs_edit` replaced, or everything `fs_write` wrote."""

    def __init__(self, workspace: str) -> None:
        self.workspace = workspace
        self._snapshots: dict[str, str | None] = {}
        self._environment: Any = None

    async def before(self, call: dict[str, Any]) -> None:
        if str(call.get("name")) not in FILE_TOOLS:
            return
        key = self._key(_arguments(call.get("arguments")).get("path"))
        if key is not None and key not in self._snapshots:
            self._snapshots[key] = await self._read(key)

    async def diffs(self, records: list[dict[str, Any]]) -> dict[int, list[str]]:
        """Diff lines to show after the record at each index: one diff per file that
        calls ran on, after the last of them; then the snapshots are dropped."""
        groups: dict[str, list[int]] = {}
        found: dict[int, list[str]] = {}
        for index, record in enumerate(records):
            if (str(record.get("name")) not in FILE_TOOLS or record.get("is_error")
                    or record.get("outcome", "ran") != "ran"):
                continue
            arguments = record.get("arguments")
            arguments = arguments if isinstance(arguments, dict) else {}
            key = self._key(arguments.get("path"))
            if key is None:
                found[index] = _from_arguments(record, arguments, None)
            else:
                groups.setdefault(key, []).append(index)
        for key, indexes in groups.items():
            shown = records[indexes[-1]]
            arguments = shown.get("arguments") or {}
            before = self._snapshots.get(key)
            after = await self._read(key)
            if _plausible([records[i] for i in indexes], before, after):
                assert before is not None and after is not None
                found[indexes[-1]] = _unified(str(arguments.get("path")), before, after)
            else:
                found[indexes[-1]] = [line for i in indexes for line in _from_arguments(
                    records[i], records[i].get("arguments") or {}, before)]
        self._snapshots.clear()
        return found

    def _key(self, path: Any) -> str | None:
        """The file's real path, or None when the file tools would refuse it."""
        if not isinstance(path, str) or not path:
            return None
        from hookline.kernel.errors import HooklineError

        from ..host import LocalEnvironment

        if self._environment is None:
            self._environment = LocalEnvironment(self.workspace)
        try:
            return str(self._environment.resolve_path(path))
        except HooklineError:
            return None

    async def _read(self, key: str) -> str | None:
        """The file's text, `_MISSING`, or None when it cannot be shown."""
        from hookline.kernel.errors import HooklineError

        try:
            data = await self._environment.read_bytes(key, max_bytes=MAX_SNAPSHOT_BYTES)
            return str(data.decode("utf-8"))
        except FileNotFoundError:
            return _MISSING
        except (HooklineError, OSError, UnicodeDecodeError):  # a FIFO, too large, binary, ...
            return None


def _plausible(records: list[dict[str, Any]], before: str | None, after: str | None) -> bool:
    """Whether the file read now is what the calls made of the file read before: the last
    write's content, or text holding the last edit's `new` and, when some call changed
    anything, different from before."""
    if before is None or after is None or after == _MISSING:
        return False
    last = records[-1]
    arguments = last.get("arguments") or {}
    if FILE_TOOLS[str(last.get("name"))] == "write":
        return after == arguments.get("content")
    new = str(arguments.get("new", ""))
    changed = any(FILE_TOOLS[str(r.get("name"))] == "write"
                  or (r.get("arguments") or {}).get("old") != (r.get("arguments") or {}).get("new")
                  for r in records)
    return before != _MISSING and (new in after) and (before != after or not changed)


def _unified(path: str, before: str, after: str, *, header: str = "") -> list[str]:
    import difflib

    source = "/dev/null" if before == _MISSING else path + header
    return list(difflib.unified_diff(_lines("" if before == _MISSING else before),
                                     _lines(after), source, path, lineterm=""))


def _from_arguments(record: dict[str, Any], arguments: dict[str, Any],
                    before: str | None) -> list[str]:
    """The diff a call's arguments tell: `fs_edit`'s old text against its new text (line
    numbers unknown), `fs_write`'s content all added."""
    path = str(arguments.get("path", "?"))
    if FILE_TOOLS[str(record.get("name"))] == "write":
        if before == _MISSING:
            return _unified(path, _MISSING, str(arguments.get("content", "")))
        return _unified(path, "", str(arguments.get("content", "")),
                        header=" (what was there before is not known)")
    lines = _unified(path, str(arguments.get("old", "")), str(arguments.get("new", "")))
    header = ("@@ the replaced text, at every place it occurs (replace_all: the places "
              "are not known) @@" if arguments.get("replace_all")
              else "@@ the replaced text (line numbers not known) @@")
    return [header if line.startswith("@@") else line for line in lines]


def _snapshot(workspace: str, path: str, environment: object) -> str | None:
    """The file as a file tool would read it now, through the session's `environment`
    where it is a local one (so with the tools' own limits): `_MISSING` when there is no
    file, None when it cannot be read. At most `MAX_SNAPSHOT_BYTES`."""
    from hookline.kernel.errors import HooklineError

    from ..host import LocalEnvironment, read_file

    try:
        if not isinstance(environment, LocalEnvironment):
            environment = LocalEnvironment(workspace)  # resolves its workspace, as the path
        data = read_file(environment.resolve_path(path), path, MAX_SNAPSHOT_BYTES,
                         root=environment.workspace)
        return data.decode("utf-8")
    except FileNotFoundError:
        return _MISSING
    except (HooklineError, OSError, UnicodeDecodeError):
        return None


def proposed_change(workspace: str, tool: str, arguments: dict[str, Any],
                    environment: object = None) -> tuple[list[str], str | None]:
    """The diff a file tool's call would make, before it runs (what an approval shows):
    the file read now (`_snapshot`), against the call's result; from the arguments alone
    when the file cannot be read. With it, for an edit that cannot apply to the file as it
    is (its `old` text not in it, or there several times without `replace_all`), why:
    approving it would change nothing. Blocking, small: at most `MAX_SNAPSHOT_BYTES` read."""
    name = tool.replace(".", "_")
    path = str(arguments.get("path", "?"))
    record = {"name": name}
    before = _snapshot(workspace, path, environment)
    if name == "fs_write":
        if before is None:
            return _from_arguments(record, arguments, before), None
        return _unified(path, before, str(arguments.get("content", ""))), None
    old, new = str(arguments.get("old", "")), str(arguments.get("new", ""))
    if before in (None, _MISSING) or not old:  # the tool says what is wrong
        return _from_arguments(record, arguments, before), None
    assert before is not None
    count = before.count(old)
    if count == 0:
        return _from_arguments(record, arguments, before), f"its 'old' text is not in {path!r}"
    if count > 1 and not arguments.get("replace_all"):
        return [], f"its 'old' text occurs {count} times in {path!r} (and replace_all is not set)"
    after = (before.replace(old, new) if arguments.get("replace_all")
             else before.replace(old, new, 1))
    return _unified(path, before, after), None


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def render_diff(lines: list[str], colour: bool, limit: int = MAX_DIFF_LINES) -> list[str]:
    """The diff for the terminal: at most `limit` lines then `... N more lines`, control
    characters escaped, and with `colour` removals red, additions green, hunks cyan."""
    shown = [terminal_text(line) for line in lines[:limit]]
    if colour:
        shown = [_coloured(line) for line in shown]
    if len(lines) > limit:
        shown.append(f"... {len(lines) - limit} more lines")
    return shown


def _coloured(line: str) -> str:
    key = "h" if line.startswith(("--- ", "+++ ")) else line[:1]
    return f"{_COLOURS[key]}{line}\x1b[0m" if key in _COLOURS else line


def wants_colour(stream: Any) -> bool:
    """Colour on a terminal only, and not with `NO_COLOR` or `TERM=dumb`."""
    return is_terminal(stream) and colour_allowed()


def colour_allowed() -> bool:
    """Whether the environment allows colour (no `NO_COLOR`, no `TERM=dumb`)."""
    return not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def _arguments(arguments: Any) -> dict[str, Any]:
    """A call's arguments as a dict ({} when they are not a JSON object)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            return {}
    return arguments if isinstance(arguments, dict) else {}
