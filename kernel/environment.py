"""Execution environments: where tools run processes and touch files.

An Environment may be the host, a container or a remote machine; code that only talks to
this interface works with all of them. Paths are strings in the environment's own
namespace, not host paths.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias

__all__ = ["ByteReader", "CodeFailed", "Environment", "Process", "StrPath"]

StrPath: TypeAlias = str | os.PathLike[str]

_READ_CHUNK = 65536

# Runs inside the environment: print the file as base64 so any byte survives the pipe,
# and report failures on stderr with a non-zero exit code.
_READ_BYTES_SCRIPT = """\
import base64, sys
try:
    with open(sys.argv[1], "rb") as handle:
        data = handle.read()
except OSError as exc:
    sys.stderr.write(f"{type(exc).__name__}: {exc}")
    sys.exit(1)
sys.stdout.write(base64.b64encode(data).decode("ascii"))
"""


class ByteReader(Protocol):
    """A process output stream (asyncio.StreamReader has this shape)."""

    async def read(self, n: int = -1) -> bytes:
        """Return up to `n` bytes (all when -1); `b""` at end of stream."""
        ...


class Process(Protocol):
    """A process started by `Environment.spawn`, with piped standard streams."""

    @property
    def stdout(self) -> ByteReader: ...

    @property
    def stderr(self) -> ByteReader: ...

    @property
    def returncode(self) -> int | None:
        """Exit status, None while running."""
        ...

    async def wait(self) -> int:
        """Wait for exit and return the exit status."""
        ...

    async def write_stdin(self, data: bytes) -> None: ...

    async def close_stdin(self) -> None: ...

    async def signal(self, kill: bool) -> None:
        """Stop (or kill) the process and its descendants; no error if already gone."""
        ...

    def is_running(self) -> bool:
        return self.returncode is None


class CodeFailed(Exception):
    """The model's code raised: the error is the code's fault, not the environment's."""

    def __init__(self, error: str, traceback: str = "") -> None:
        super().__init__(error, traceback)
        self.error = error
        self.traceback = traceback

    def __str__(self) -> str:
        return self.error


async def _read_all(reader: ByteReader) -> bytes:
    chunks: list[bytes] = []
    while chunk := await reader.read(_READ_CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


class Environment(ABC):
    """Processes, files and code execution for one session."""

    workspace: str | None = None
    """Default working directory; relative paths resolve against it."""
    python: str = "python3"
    """Python executable inside the environment."""

    def __init__(self, workspace: StrPath | None = None, *, python: str | None = None) -> None:
        if workspace is not None:
            self.workspace = os.fspath(workspace)
        if python is not None:
            self.python = python

    @abstractmethod
    async def spawn(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Process:
        """Start a process: a string runs through a shell, a sequence is an argv.

        `cwd` defaults to the workspace; `env` is added to the default environment;
        stdin, stdout and stderr are piped.
        """

    @abstractmethod
    async def read_text(self, path: StrPath) -> str:
        """Read a UTF-8 text file."""

    @abstractmethod
    async def write_text(self, path: StrPath, content: str) -> None:
        """Write a UTF-8 text file, creating missing parent directories."""

    @abstractmethod
    async def run_code(
        self,
        code: str,
        *,
        tools: Sequence[str],
        call_tool: Callable[[str, dict[str, Any]], Awaitable[Any]],
        write: Callable[[str], Any],
    ) -> None:
        """Run Python with top-level await.

        Each name in `tools` is exposed as an async function returning
        `await call_tool(name, kwargs)`; output goes to `write` as produced. Raise
        `CodeFailed` when the code raises; stop the code when cancelled.
        """

    async def read_bytes(self, path: StrPath) -> bytes:
        """Read a file's bytes by running the environment's Python.

        Works for any environment that can spawn processes; subclasses with direct file
        access should override it. Raises OSError when the file cannot be read.
        """
        target = os.fspath(path)
        process = await self.spawn([self.python, "-c", _READ_BYTES_SCRIPT, target])
        try:
            await process.close_stdin()
            # stdout first, then stderr: the script writes to only one of them, so
            # reading them one after the other cannot fill a pipe and deadlock.
            encoded = await _read_all(process.stdout)
            errors = await _read_all(process.stderr)
            returncode = await process.wait()
        except BaseException:
            if process.is_running():
                await process.signal(True)
            raise
        if returncode != 0:
            message = errors.decode("utf-8", "replace").strip() or f"exit status {returncode}"
            raise OSError(f"cannot read {target!r}: {message}")
        import base64
        import binascii

        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise OSError(f"cannot read {target!r}: unexpected output from {self.python}") from exc

    def resolve_path(self, path: StrPath) -> str:
        """Absolute paths stay as they are; relative ones are joined to the workspace."""
        text = os.fspath(path)
        if os.path.isabs(text):
            return text
        if self.workspace is None:
            raise ValueError(f"relative path {text!r} needs a workspace")
        return os.path.join(self.workspace, text)

    async def close(self) -> None:
        """Release resources; called when the `running()` scope exits."""
        return None
