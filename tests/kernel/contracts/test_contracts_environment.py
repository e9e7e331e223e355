"""Environment defaults, with a tiny anyio-backed subclass so both backends run it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from hookline.kernel.environment import CodeFailed, Environment, Process


class AnyioReader:
    def __init__(self, stream: anyio.abc.ByteReceiveStream | None) -> None:
        self._stream = stream

    async def read(self, n: int = -1) -> bytes:
        if self._stream is None:
            return b""
        if n < 0:
            chunks = []
            while chunk := await self.read(65536):
                chunks.append(chunk)
            return b"".join(chunks)
        try:
            return await self._stream.receive(n)
        except anyio.EndOfStream:
            return b""


class AnyioProcess:
    def __init__(self, process: anyio.abc.Process) -> None:
        self._process = process
        self.stdout = AnyioReader(process.stdout)
        self.stderr = AnyioReader(process.stderr)

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def wait(self) -> int:
        return await self._process.wait()

    async def write_stdin(self, data: bytes) -> None:
        assert self._process.stdin is not None
        await self._process.stdin.send(data)

    async def close_stdin(self) -> None:
        if self._process.stdin is not None:
            await self._process.stdin.aclose()

    async def signal(self, kill: bool) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._process.kill() if kill else self._process.terminate()

    def is_running(self) -> bool:
        return self.returncode is None


class LocalEnvironment(Environment):
    """Implements only what read_bytes needs; the rest is plain file access."""

    def __init__(self, workspace: Path) -> None:
        super().__init__(workspace, python=sys.executable)
        self.spawned: list[anyio.abc.Process] = []

    async def spawn(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Process:
        process = await anyio.open_process(
            command,
            cwd=cwd or self.workspace,
            env={**os.environ, **(env or {})},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.spawned.append(process)
        return AnyioProcess(process)

    async def read_text(self, path: Any) -> str:
        return Path(self.resolve_path(path)).read_text(encoding="utf-8")

    async def write_text(self, path: Any, content: str) -> None:
        target = Path(self.resolve_path(path))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")

    async def run_code(
        self,
        code: str,
        *,
        tools: Sequence[str],
        call_tool: Callable[[str, dict[str, Any]], Awaitable[Any]],
        write: Callable[[str], Any],
    ) -> None:
        raise CodeFailed("NotImplementedError: not needed here")

    async def dispose(self) -> None:
        for process in self.spawned:
            await process.aclose()


@pytest.mark.anyio
async def test_read_bytes_default_round_trips_binary(tmp_path: Path) -> None:
    payload = bytes(range(256)) * 300  # larger than one pipe read, every byte value
    (tmp_path / "blob.bin").write_bytes(payload)
    environment = LocalEnvironment(tmp_path)
    try:
        assert await environment.read_bytes("blob.bin") == payload
        assert await environment.read_bytes(tmp_path / "blob.bin") == payload
        (tmp_path / "empty").write_bytes(b"")
        assert await environment.read_bytes("empty") == b""
    finally:
        await environment.dispose()


@pytest.mark.anyio
async def test_read_bytes_missing_file_raises_oserror(tmp_path: Path) -> None:
    environment = LocalEnvironment(tmp_path)
    try:
        with pytest.raises(OSError, match=r"missing\.txt"):
            await environment.read_bytes("missing.txt")
        with pytest.raises(OSError):
            await environment.read_bytes(tmp_path)  # a directory
    finally:
        await environment.dispose()


@pytest.mark.anyio
async def test_text_helpers_and_close(tmp_path: Path) -> None:
    environment = LocalEnvironment(tmp_path)
    await environment.write_text("a/b/c.txt", "héllo")
    assert await environment.read_text("a/b/c.txt") == "héllo"
    assert await environment.read_bytes("a/b/c.txt") == "héllo".encode()
    assert await environment.close() is None
    await environment.dispose()


def test_resolve_path(tmp_path: Path) -> None:
    environment = LocalEnvironment(tmp_path)
    absolute = str(tmp_path / "x")
    assert environment.resolve_path(absolute) == absolute
    assert environment.resolve_path("sub/file") == os.path.join(str(tmp_path), "sub/file")
    environment.workspace = None
    assert environment.resolve_path(absolute) == absolute
    with pytest.raises(ValueError, match="workspace"):
        environment.resolve_path("relative")


def test_defaults_and_abstractness(tmp_path: Path) -> None:
    assert Environment.python == "python3"
    assert Environment.workspace is None
    environment = LocalEnvironment(tmp_path)
    assert environment.workspace == str(tmp_path)
    assert environment.python == sys.executable
    with pytest.raises(TypeError):
        Environment()  # type: ignore[abstract]


def test_code_failed_carries_error_and_traceback() -> None:
    failure = CodeFailed("ZeroDivisionError: division by zero", "Traceback ...")
    assert str(failure) == "ZeroDivisionError: division by zero"
    assert failure.error == "ZeroDivisionError: division by zero"
    assert failure.traceback == "Traceback ..."
    assert CodeFailed("x").traceback == ""
