"""The builtin tools: shell commands (foreground and background) and file access.

Every tool takes the `ToolContext` and works in the turn's environment: the state's
`_runtime_environment` when present, else a `LocalEnvironment` rooted at the state's
`_runtime_workspace`. Arguments are checked against the tool's JSON schema
(`hookline.kernel.tools.validate_arguments`) before anything runs; a bad argument is a
`HooklineError(invalid_input)` naming the tool and the argument. Results are plain
strings meant for the model.

| Tool | Arguments |
|---|---|
| `shell` | `command`, `timeout` (seconds, default 60), `background` (default false) |
| `shell.output` | `id` of a background process |
| `shell.stop` | `id` of a background process |
| `fs.read` | `path`, `offset` (first line, from 1), `limit` (number of lines) |
| `fs.write` | `path`, `content` |
| `fs.edit` | `path`, `old`, `new`, `replace_all` (default false) |

The file tools open regular files only (no FIFO, socket or device can block them), do not
read hard-linked files, read slices in bounded memory and edit files of up to
`MAX_EDIT_BYTES`, into files of up to that size; see `hookline.builtins.host.files`.
"""

from __future__ import annotations

import io
import re
import shlex
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio

from hookline.kernel.environment import Environment
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tools import Tool, ToolContext, argument_error, validate_arguments
from hookline.kernel.turn import RUNTIME_ENVIRONMENT, RUNTIME_PREFIX, RUNTIME_WORKSPACE

from ..config.limits import MAX_EDIT_BYTES
from .background import BackgroundProcesses
from .commands import CommandResult, run_command
from .environment import LocalEnvironment
from .files import FileTooLarge, LineSlice, read_line_slice

__all__ = ["MAX_OUTPUT", "MAX_READ_CHARS", "builtin_tools"]

MAX_OUTPUT = 64_000
"""Bytes kept from each of a foreground command's stdout and stderr."""

MAX_READ_CHARS = 100_000
"""Characters `fs.read` returns at most; longer reads are cut with a note. The local
environment stops reading there, so a read costs the same whatever the file's size."""


# -- schemas ---------------------------------------------------------------------------


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


UNSANDBOXED = "unsandboxed"
"""The escalation that runs a command outside the sandbox, with the user's rights."""
ESCALATIONS = ("network", UNSANDBOXED)
"""What a shell call may ask to leave behind for one command (`escalate`)."""
ESCALATION_GRANT = RUNTIME_PREFIX + "escalation_grant"
"""State key of the one escalation a person approved: `(command, escalate)`, taken by the
shell tool for the one call it was approved for."""

_ID = {"type": "string", "description": "The id `shell` returned, such as bg1."}
_PATH = {"type": "string", "description": "File path, relative to the workspace."}

SHELL_SCHEMA = _object(
    {
        "command": {"type": "string", "description": "Shell command line (run by /bin/sh)."},
        "timeout": {
            "type": "integer",
            "minimum": 1,
            "default": 60,
            "description": "Seconds before the command and its children are killed.",
        },
        "background": {
            "type": "boolean",
            "default": False,
            "description": "Start the command in the background and return its id at once.",
        },
        "escalate": {
            "type": "string",
            "enum": list(ESCALATIONS),
            "description": "Only after the sandbox blocked this command: ask the user to run "
                           "it once with the network open, or outside the sandbox.",
        },
        "justification": {
            "type": "string",
            "description": "With escalate: why the command needs it, for the user to read.",
        },
    },
    ["command"],
)
SHELL_OUTPUT_SCHEMA = _object({"id": _ID}, ["id"])
SHELL_STOP_SCHEMA = _object({"id": _ID}, ["id"])
FS_READ_SCHEMA = _object(
    {
        "path": _PATH,
        "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1)."},
        "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to read."},
    },
    ["path"],
)
FS_WRITE_SCHEMA = _object(
    {"path": _PATH, "content": {"type": "string", "description": "The whole new content."}},
    ["path", "content"],
)
FS_EDIT_SCHEMA = _object(
    {
        "path": _PATH,
        "old": {"type": "string", "description": "Exact text to replace."},
        "new": {"type": "string", "description": "Replacement text."},
        "replace_all": {
            "type": "boolean",
            "default": False,
            "description": "Replace every occurrence instead of exactly one.",
        },
    },
    ["path", "old", "new"],
)


# -- helpers ---------------------------------------------------------------------------


def _environment(
    context: ToolContext | None, processes: BackgroundProcesses | None
) -> Environment:
    state = context.state if context is not None else {}
    environment = state.get(RUNTIME_ENVIRONMENT)
    if environment is not None:
        if not isinstance(environment, Environment):
            raise HooklineError(
                ErrorKind.config,
                f"state {RUNTIME_ENVIRONMENT} must be an Environment, got "
                f"{type(environment).__name__}",
            )
        return environment
    workspace = state.get(RUNTIME_WORKSPACE)
    if not workspace:
        raise HooklineError(
            ErrorKind.config,
            f"no environment for this tool call: the turn state has neither "
            f"{RUNTIME_ENVIRONMENT} nor {RUNTIME_WORKSPACE}",
        )
    return LocalEnvironment(workspace, processes=processes)


def _registry(
    environment: Environment, processes: BackgroundProcesses | None
) -> BackgroundProcesses:
    registry = processes if processes is not None else getattr(environment, "processes", None)
    if not isinstance(registry, BackgroundProcesses):
        raise HooklineError(
            ErrorKind.config,
            "background shells are not available: no BackgroundProcesses registry was "
            "given to builtin_tools() (the builtin lifespan provides one)",
        )
    return registry


def _file_error(action: str, path: str, exc: Exception) -> HooklineError:
    if isinstance(exc, HooklineError):
        return exc
    if isinstance(exc, FileNotFoundError):
        return HooklineError(ErrorKind.not_found, f"cannot {action} {path!r}: no such file")
    if isinstance(exc, IsADirectoryError):
        return HooklineError(
            ErrorKind.invalid_input, f"cannot {action} {path!r}: it is a directory"
        )
    if isinstance(exc, NotADirectoryError):
        return HooklineError(
            ErrorKind.invalid_input,
            f"cannot {action} {path!r}: a parent of it is a file, not a directory",
        )
    if isinstance(exc, UnicodeDecodeError):
        return HooklineError(
            ErrorKind.invalid_input,
            f"cannot {action} {path!r}: it is not UTF-8 text (byte {exc.start})",
        )
    reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
    return HooklineError(ErrorKind.tool, f"cannot {action} {path!r}: {reason}")


async def _read(
    environment: Environment, path: str, action: str, max_bytes: int | None = None
) -> str:
    try:
        if isinstance(environment, LocalEnvironment):
            return await environment.read_text(path, max_bytes=max_bytes)
        return await environment.read_text(path)
    except (OSError, UnicodeDecodeError, HooklineError) as exc:
        raise _file_error(action, path, exc) from exc


async def _read_lines(
    environment: Environment, path: str, offset: int, limit: int | None
) -> LineSlice:
    """A slice of lines: streamed by the local environment, sliced in memory otherwise."""
    try:
        if isinstance(environment, LocalEnvironment):
            return await environment.read_lines(path, offset, limit, MAX_READ_CHARS)
        text = await environment.read_text(path)
    except (OSError, UnicodeDecodeError, HooklineError) as exc:
        raise _file_error("read", path, exc) from exc
    return read_line_slice(io.BytesIO(text.encode("utf-8")), offset, limit, MAX_READ_CHARS)


async def _write(environment: Environment, path: str, content: str,
                 expected: str | None = None) -> None:
    """Write `content`; with `expected`, what an edit read, only while the file still holds
    it (the local environment checks; another one writes as it does)."""
    try:
        if expected is not None and isinstance(environment, LocalEnvironment):
            await environment.write_text(path, content, expected=expected)
        else:
            await environment.write_text(path, content)
    except (OSError, HooklineError) as exc:
        raise _file_error("write", path, exc) from exc


def format_command_result(result: CommandResult, timeout: float, max_output: int) -> str:
    """Model text for a command: notes, exit code, then non-empty stdout and stderr."""
    lines = []
    if result.timed_out:
        lines.append(
            f"[timed out after {timeout:g} s: the command and the processes it started "
            f"were killed]"
        )
    lines.append(f"exit code: {result.returncode}")
    if result.stdout:
        lines.append(f"--- stdout ---\n{result.stdout.rstrip(chr(10))}")
    if result.stderr:
        lines.append(f"--- stderr ---\n{result.stderr.rstrip(chr(10))}")
    if not result.stdout and not result.stderr:
        lines.append("(no output)")
    if result.truncated:
        lines.append(
            f"[output truncated: only the first {max_output} bytes of each stream are kept]"
        )
    return "\n".join(lines)


_COMMAND_RESULT = re.compile(r"(?P<timed_out>\[timed out [^\n]*\n)?exit code: (?P<code>-?\d+)\n")
"""The start of `format_command_result`'s text."""


def failed_command(text: object) -> bool:
    """Whether a shell call's result (`format_command_result`) says its command ran and
    failed: a non-zero exit code, or killed at its timeout. Not a call that never ran."""
    ran = _COMMAND_RESULT.match(text) if isinstance(text, str) else None
    return ran is not None and (ran["code"] != "0" or ran["timed_out"] is not None)


# -- the tools -------------------------------------------------------------------------
# Each body gets the turn's environment and the checked arguments (defaults filled in).


async def _shell(
    environment: Environment, *, command: str, timeout: int, background: bool,
    processes: BackgroundProcesses | None, session: str,
) -> str:
    """Run a command to completion, or start it in the background."""
    if not command.strip():
        raise argument_error("shell", "'command' is empty", argument="command")
    if not background:
        result = await run_command(environment, command, timeout=timeout, max_output=MAX_OUTPUT)
        return format_command_result(result, timeout, MAX_OUTPUT)
    if not isinstance(environment, LocalEnvironment):
        raise HooklineError(
            ErrorKind.config,
            f"background shells run on the host and need the local environment; "
            f"this session uses {type(environment).__name__}",
        )
    registry = _registry(environment, processes)
    # Through the environment: a background shell is confined as a foreground one is.
    process_id = await environment.start_background(command, registry=registry, owner=session)
    info = registry.get(process_id, session)
    return (
        f"started background process {process_id} (pid {info.pid}): {command}\n"
        f"Read its output with shell.output and stop it with shell.stop "
        f"(id {process_id!r}); it is stopped when the session scope ends."
    )


async def _shell_output(
    environment: Environment, *, id: str, processes: BackgroundProcesses | None, session: str
) -> str:
    """The status and the latest output of a background process of this session."""
    registry = _registry(environment, processes)
    info = registry.get(id, session)
    output = await registry.output(id, owner=session)
    return f"{info.describe()}\n--- output ---\n{output or '(no output yet)'}"


async def _shell_stop(
    environment: Environment, *, id: str, processes: BackgroundProcesses | None, session: str
) -> str:
    """Stop a background process of this session and what it started (an approved one's
    sandbox too, with what it left)."""
    info = await _registry(environment, processes).stop(id, session)
    if isinstance(environment, LocalEnvironment):
        await environment.end_finished_escalations()
    return info.describe()


async def _fs_read(
    environment: Environment, *, path: str, offset: int | None = None, limit: int | None = None
) -> str:
    """Lines of a file, with notes for what was cut, replaced or left out."""
    piece = await _read_lines(environment, path, offset or 1, limit)
    if piece.empty:
        return f"[{path!r} is empty]"
    if not piece.text and piece.complete:
        raise argument_error(
            "fs.read",
            f"'offset' {offset} is past the end of {path!r}, which has {piece.lines} line(s)",
            argument="offset",
        )
    notes = []
    if piece.truncated and piece.first == piece.last:  # one line longer than a read
        notes.append(
            f"[truncated at {MAX_READ_CHARS} characters in line {piece.last}, which is longer "
            f"than that: fs.read shows no more of it; read the rest with the shell tool "
            f"(sed -n {piece.last}p {shlex.quote(path)} | cut -c {MAX_READ_CHARS + 1}-)]")
    elif piece.truncated:
        notes.append(
            f"[truncated at {MAX_READ_CHARS} characters in line {piece.last}; read "
            f"{path!r} with offset {piece.last} to see the rest]")
    if piece.replaced:
        notes.append(f"[{piece.replaced} byte(s) that are not valid UTF-8 are shown as \ufffd]")
    if offset is not None or limit is not None:
        count = piece.lines if piece.complete else f"at least {piece.lines}"
        notes.append(f"[lines {piece.first}-{piece.last} of {count} in {path!r}]")
    if not notes:
        return piece.text
    body = piece.text if piece.text.endswith("\n") else piece.text + "\n"
    return body + "\n".join(notes)


async def _fs_write(environment: Environment, *, path: str, content: str) -> str:
    """Replace a file's whole content."""
    await _write(environment, path, content)
    return f"wrote {len(content.encode('utf-8'))} bytes to {path!r}"


async def _fs_edit(
    environment: Environment, *, path: str, old: str, new: str, replace_all: bool
) -> str:
    """Replace exact text that occurs once (or every occurrence, with `replace_all`)."""
    if not old:
        raise argument_error(
            "fs.edit", "'old' is empty: give the exact text to replace", argument="old"
        )
    try:
        text = await _read(environment, path, "edit", MAX_EDIT_BYTES)
    except FileTooLarge as exc:
        raise argument_error(
            "fs.edit",
            f"{path!r} is {exc.size:,} bytes, more than the {MAX_EDIT_BYTES:,} bytes "
            f"fs.edit works on; change a file this large with the shell tool (sed -i, "
            f"a script), which does not load it whole",
            argument="path",
        ) from exc
    count = text.count(old)
    if count == 0:
        hint = ""
        if old.strip() and old.strip() in text:
            hint = " (it occurs with different leading or trailing whitespace)"
        raise argument_error(
            "fs.edit",
            f"'old' text not found in {path!r}{hint}; read the file and copy the text exactly",
            argument="old",
        )
    if count > 1 and not replace_all:
        raise argument_error(
            "fs.edit",
            f"'old' text occurs {count} times in {path!r}; include more surrounding "
            f"text so it occurs exactly once, or set replace_all to replace all of them",
            argument="old",
        )
    replaced = count if replace_all else 1
    # The result is held to the input's cap too, measured before it is built: a short
    # `new` replacing every one of many occurrences could otherwise make a huge file.
    def encoded(part: str) -> int:
        return len(part.encode("utf-8", "surrogatepass"))

    size = encoded(text) + replaced * (encoded(new) - encoded(old))
    if size > MAX_EDIT_BYTES:
        raise argument_error(
            "fs.edit",
            f"the edit would make {path!r} {size:,} bytes, more than the {MAX_EDIT_BYTES:,} "
            f"bytes fs.edit writes; make the change with the shell tool (sed, a script), "
            f"or write a smaller file with fs.write",
            argument="new",
        )
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    await _write(environment, path, updated, expected=text)
    plural = "occurrence" if replaced == 1 else "occurrences"
    return f"replaced {replaced} {plural} in {path!r}"


# -- the tool list ---------------------------------------------------------------------


_SESSION_TOOLS = frozenset({"shell", "shell.output", "shell.stop"})
"""The tools whose body takes the calling `session` (the owner of background processes)."""


@dataclass(frozen=True)
class _Handler:
    """A builtin tool's handler: checks the arguments against the tool's schema, finds the
    turn's environment, then runs the body."""

    name: str
    schema: Mapping[str, Any]
    body: Callable[..., Awaitable[str]]
    processes: BackgroundProcesses | None

    async def __call__(self, *, context: ToolContext | None = None, **arguments: Any) -> str:
        checked = validate_arguments(self.name, self.schema, arguments)
        environment = _environment(context, self.processes)
        escalated = _escalated(environment, checked, context) if self.name == "shell" else None
        if self.name in _SESSION_TOOLS:  # background processes are the session's own
            checked["session"] = str((context.state if context else {}).get("session_id") or "")
        if escalated is None:
            return await self.body(environment, **checked)
        assert isinstance(environment, LocalEnvironment)  # `_escalated` made it from one
        try:
            return await self.body(escalated, **checked)
        finally:
            # The approval covered this command: what it leaves running ends with it; a
            # background one (approved as such) runs on, closed with the session's.
            if not checked.get("background"):
                with anyio.CancelScope(shield=True):
                    await environment.end_escalated(escalated)


def _escalated(environment: Environment, arguments: dict[str, Any],
               context: ToolContext | None) -> LocalEnvironment | None:
    """The environment an escalated shell call runs in, once a person approved it (the
    grant the approval gate left in the state, for exactly this command), or None where
    the call runs in the session's own; the arguments lose `escalate` and
    `justification`, which the body does not take."""
    escalate = arguments.pop("escalate", None)
    arguments.pop("justification", None)
    if escalate is None or not isinstance(environment, LocalEnvironment):
        return None
    policy = environment.sandbox
    if not policy.confined or (escalate == "network" and policy.network):
        return None  # nothing to leave behind
    state = context.state if context is not None else {}
    grant = state.pop(ESCALATION_GRANT, None)
    if grant != (arguments["command"], escalate):
        raise HooklineError(
            ErrorKind.tool,
            f"escalate = {escalate!r} needs the user's approval, and this call has none (the "
            f"approval policy does not ask, or nobody approved this command): it was not run; "
            f"run it in the sandbox, or tell the user what you need")
    return environment.escalated(escalate)


_DESCRIPTIONS = {
    "shell": (
        "Run a shell command in the workspace and return its exit code, stdout and "
        "stderr. The command is killed, with every process it started, after `timeout` "
        "seconds. With `background`, start it (a server, a watcher) and return an id at "
        "once; background processes are stopped when the session scope ends."
    ),
    "shell.output": "Show the status and the latest output of a background shell process.",
    "shell.stop": (
        "Stop a background shell process and everything it started "
        "(SIGTERM, then SIGKILL after 3 seconds)."
    ),
    "fs.read": (
        "Read a UTF-8 text file in the workspace, optionally only `limit` lines "
        "starting at line `offset` (counting from 1). At most 100,000 characters are "
        "returned; bytes that are not UTF-8 are shown as U+FFFD."
    ),
    "fs.write": (
        "Write a UTF-8 text file in the workspace, replacing it if it exists and "
        "creating missing parent directories."
    ),
    "fs.edit": (
        "Replace the exact text `old` with `new` in a file. `old` must occur exactly "
        "once unless `replace_all` is set."
    ),
}


def builtin_tools(processes: BackgroundProcesses | None = None) -> list[Tool]:
    """The builtin tools; background shells use `processes` (the lifespan's registry)."""
    bodies: list[tuple[str, dict[str, Any], Callable[..., Awaitable[str]]]] = [
        ("shell", SHELL_SCHEMA, partial(_shell, processes=processes)),
        ("shell.output", SHELL_OUTPUT_SCHEMA, partial(_shell_output, processes=processes)),
        ("shell.stop", SHELL_STOP_SCHEMA, partial(_shell_stop, processes=processes)),
        ("fs.read", FS_READ_SCHEMA, _fs_read),
        ("fs.write", FS_WRITE_SCHEMA, _fs_write),
        ("fs.edit", FS_EDIT_SCHEMA, _fs_edit),
    ]
    return [
        Tool(
            name=name,
            handler=_Handler(name, schema, body, processes),
            description=_DESCRIPTIONS[name],
            parameters=schema,
            context=True,
        )
        for name, schema, body in bodies
    ]
