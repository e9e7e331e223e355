"""The builtin tools: shell commands (foreground and background) and file access.

Every tool takes the `ToolContext` and works in the turn's environment: the state's
`_runtime_environment` when present, else a `LocalEnvironment` rooted at the state's
`_runtime_workspace`. Arguments are checked against the tool's JSON schema before anything
runs; a bad argument is a `HooklineError(invalid_input)` naming the tool and the argument.
Results are plain strings meant for the model.

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
`MAX_EDIT_BYTES`; see `hookline.builtins.files`.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from hookline.kernel.environment import Environment
from hookline.kernel.streaming import ErrorKind, HooklineError
from hookline.kernel.tools import Tool, ToolContext

from .commands import CommandResult, run_command
from .environment import LocalEnvironment
from .files import FileTooLarge, LineSlice, read_line_slice
from .lifespan import BackgroundProcesses
from .limits import MAX_EDIT_BYTES

__all__ = ["MAX_OUTPUT", "MAX_READ_CHARS", "builtin_tools", "validate_arguments"]

MAX_OUTPUT = 64_000
"""Bytes kept from each of a foreground command's stdout and stderr."""

MAX_READ_CHARS = 100_000
"""Characters `fs.read` returns at most; longer reads are cut with a note. The local
environment stops reading there, so a read costs the same whatever the file's size."""


# -- argument validation ---------------------------------------------------------------


def validate_arguments(
    tool: str, schema: Mapping[str, Any], arguments: Any
) -> dict[str, Any]:
    """Check arguments against a JSON schema and fill in defaults.

    Supports the subset the builtin tools use: `type` (object, string, integer, boolean),
    `properties`, `required`, `additionalProperties: false`, `enum`, `minimum` and
    `default`. A null value for an optional argument counts as leaving it out (models
    often send nulls for arguments they do not use).
    """
    if not isinstance(arguments, Mapping):
        raise _invalid(tool, f"arguments must be a JSON object, got {_json_type(arguments)}")
    return _check_object(tool, schema, arguments, "")


def _check_object(
    tool: str, schema: Mapping[str, Any], value: Mapping[str, Any], prefix: str
) -> dict[str, Any]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    required: list[str] = list(schema.get("required", []))
    if schema.get("additionalProperties") is False:
        unknown = [key for key in value if key not in properties]
        if unknown:
            expected = ", ".join(f"{prefix}{key}" for key in properties) or "none"
            raise _invalid(
                tool,
                f"unknown argument {_names(unknown, prefix)} (expected: {expected})",
                argument=f"{prefix}{unknown[0]}",
            )
    result: dict[str, Any] = {}
    for key, item in value.items():
        if item is None and key not in required:
            continue
        subschema = properties.get(key)
        result[key] = item if subschema is None else _check_value(
            tool, subschema, item, f"{prefix}{key}"
        )
    missing = [key for key in required if key not in result]
    if missing:
        raise _invalid(
            tool,
            f"missing required argument {_names(missing, prefix)}",
            argument=f"{prefix}{missing[0]}",
        )
    for key, subschema in properties.items():
        if key not in result and "default" in subschema:
            result[key] = copy.deepcopy(subschema["default"])
    return result


def _check_value(tool: str, schema: Mapping[str, Any], value: Any, name: str) -> Any:
    kind = schema.get("type")
    if kind is not None:
        if kind not in _TYPE_CHECKS:
            raise ValueError(f"{tool}: schema type {kind!r} of {name!r} is not supported")
        if not _TYPE_CHECKS[kind](value):
            raise _invalid(
                tool,
                f"{name!r} must be {_ARTICLES[kind]} {kind}, got {_json_type(value)} "
                f"{_preview(value)}",
                argument=name,
            )
    if kind == "object":
        value = _check_object(tool, schema, value, f"{name}.")
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(json.dumps(choice) for choice in schema["enum"])
        raise _invalid(
            tool, f"{name!r} must be one of {choices}, got {_preview(value)}", argument=name
        )
    if "minimum" in schema and value < schema["minimum"]:
        raise _invalid(
            tool, f"{name!r} must be at least {schema['minimum']}, got {value}", argument=name
        )
    return value


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "object": lambda value: isinstance(value, Mapping),
    "string": lambda value: isinstance(value, str),
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "boolean": lambda value: isinstance(value, bool),
}

_ARTICLES = {"object": "an", "string": "a", "integer": "an", "boolean": "a"}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _preview(value: Any, limit: int = 40) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _names(keys: list[str], prefix: str) -> str:
    return ", ".join(repr(f"{prefix}{key}") for key in keys)


def _invalid(tool: str, message: str, *, argument: str | None = None) -> HooklineError:
    details = {"tool": tool} if argument is None else {"tool": tool, "argument": argument}
    return HooklineError(ErrorKind.invalid_input, f"{tool}: {message}", details)


# -- schemas ---------------------------------------------------------------------------


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


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
    environment = state.get("_runtime_environment")
    if environment is not None:
        if not isinstance(environment, Environment):
            raise HooklineError(
                ErrorKind.config,
                f"state _runtime_environment must be an Environment, got "
                f"{type(environment).__name__}",
            )
        return environment
    workspace = state.get("_runtime_workspace")
    if not workspace:
        raise HooklineError(
            ErrorKind.config,
            "no environment for this tool call: the turn state has neither "
            "_runtime_environment nor _runtime_workspace",
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


async def _write(environment: Environment, path: str, content: str) -> None:
    try:
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


# -- tools -----------------------------------------------------------------------------


def builtin_tools(processes: BackgroundProcesses | None = None) -> list[Tool]:
    """The builtin tools; background shells use `processes` (the lifespan's registry)."""

    def handler(
        name: str, schema: dict[str, Any], body: Callable[..., Awaitable[str]]
    ) -> Callable[..., Awaitable[str]]:
        async def run(*, context: ToolContext | None = None, **arguments: Any) -> str:
            checked = validate_arguments(name, schema, arguments)
            return await body(_environment(context, processes), **checked)

        run.__name__ = run.__qualname__ = name.replace(".", "_")
        return run

    async def shell(
        environment: Environment, command: str, timeout: int, background: bool
    ) -> str:
        if not command.strip():
            raise _invalid("shell", "'command' is empty", argument="command")
        if background:
            if not isinstance(environment, LocalEnvironment):
                raise HooklineError(
                    ErrorKind.config,
                    f"background shells run on the host and need the local environment; "
                    f"this session uses {type(environment).__name__}",
                )
            registry = _registry(environment, processes)
            process_id = await registry.start(command, cwd=environment.workspace)
            info = registry.get(process_id)
            return (
                f"started background process {process_id} (pid {info.pid}): {command}\n"
                f"Read its output with shell.output and stop it with shell.stop "
                f"(id {process_id!r}); it is stopped when the session scope ends."
            )
        result = await run_command(
            environment, command, timeout=timeout, max_output=MAX_OUTPUT
        )
        return format_command_result(result, timeout, MAX_OUTPUT)

    async def shell_output(environment: Environment, id: str) -> str:
        registry = _registry(environment, processes)
        info = registry.get(id)
        output = await registry.output(id)
        return f"{info.describe()}\n--- output ---\n{output or '(no output yet)'}"

    async def shell_stop(environment: Environment, id: str) -> str:
        registry = _registry(environment, processes)
        info = await registry.stop(id)
        return info.describe()

    async def fs_read(
        environment: Environment, path: str, offset: int | None = None,
        limit: int | None = None,
    ) -> str:
        piece = await _read_lines(environment, path, offset or 1, limit)
        if piece.empty:
            return f"[{path!r} is empty]"
        if not piece.text and piece.complete:
            raise _invalid(
                "fs.read",
                f"'offset' {offset} is past the end of {path!r}, which has {piece.lines} "
                f"line(s)",
                argument="offset",
            )
        notes = []
        if piece.truncated:
            notes.append(
                f"[truncated at {MAX_READ_CHARS} characters in line {piece.last}; read "
                f"{path!r} with offset and limit to see the rest]"
            )
        if piece.replaced:
            notes.append(
                f"[{piece.replaced} byte(s) that are not valid UTF-8 are shown as \ufffd]"
            )
        if offset is not None or limit is not None:
            count = piece.lines if piece.complete else f"at least {piece.lines}"
            notes.append(f"[lines {piece.first}-{piece.last} of {count} in {path!r}]")
        if not notes:
            return piece.text
        body = piece.text if piece.text.endswith("\n") else piece.text + "\n"
        return body + "\n".join(notes)

    async def fs_write(environment: Environment, path: str, content: str) -> str:
        await _write(environment, path, content)
        return f"wrote {len(content.encode('utf-8'))} bytes to {path!r}"

    async def fs_edit(
        environment: Environment, path: str, old: str, new: str, replace_all: bool
    ) -> str:
        if not old:
            raise _invalid("fs.edit", "'old' is empty: give the exact text to replace",
                           argument="old")
        try:
            text = await _read(environment, path, "edit", MAX_EDIT_BYTES)
        except FileTooLarge as exc:
            raise _invalid(
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
            raise _invalid(
                "fs.edit",
                f"'old' text not found in {path!r}{hint}; read the file and copy the text "
                f"exactly",
                argument="old",
            )
        if count > 1 and not replace_all:
            raise _invalid(
                "fs.edit",
                f"'old' text occurs {count} times in {path!r}; include more surrounding "
                f"text so it occurs exactly once, or set replace_all to replace all of them",
                argument="old",
            )
        updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        await _write(environment, path, updated)
        replaced = count if replace_all else 1
        plural = "occurrence" if replaced == 1 else "occurrences"
        return f"replaced {replaced} {plural} in {path!r}"

    specs: list[tuple[str, str, dict[str, Any], Callable[..., Awaitable[str]]]] = [
        (
            "shell",
            "Run a shell command in the workspace and return its exit code, stdout and "
            "stderr. The command is killed, with every process it started, after `timeout` "
            "seconds. With `background`, start it (a server, a watcher) and return an id at "
            "once; background processes are stopped when the session scope ends.",
            SHELL_SCHEMA,
            shell,
        ),
        (
            "shell.output",
            "Show the status and the latest output of a background shell process.",
            SHELL_OUTPUT_SCHEMA,
            shell_output,
        ),
        (
            "shell.stop",
            "Stop a background shell process and everything it started "
            "(SIGTERM, then SIGKILL after 3 seconds).",
            SHELL_STOP_SCHEMA,
            shell_stop,
        ),
        (
            "fs.read",
            "Read a UTF-8 text file in the workspace, optionally only `limit` lines "
            "starting at line `offset` (counting from 1). At most 100,000 characters are "
            "returned; bytes that are not UTF-8 are shown as U+FFFD.",
            FS_READ_SCHEMA,
            fs_read,
        ),
        (
            "fs.write",
            "Write a UTF-8 text file in the workspace, replacing it if it exists and "
            "creating missing parent directories.",
            FS_WRITE_SCHEMA,
            fs_write,
        ),
        (
            "fs.edit",
            "Replace the exact text `old` with `new` in a file. `old` must occur exactly "
            "once unless `replace_all` is set.",
            FS_EDIT_SCHEMA,
            fs_edit,
        ),
    ]
    return [
        Tool(
            name=name,
            handler=handler(name, schema, body),
            description=description,
            parameters=schema,
            context=True,
        )
        for name, description, schema, body in specs
    ]

