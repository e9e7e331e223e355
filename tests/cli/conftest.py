"""Fixtures shared by the command-line tests."""

from __future__ import annotations

import ctypes
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_support import TEST_TOKEN, Gateway, gateway_env, start_gateway_process
from nobody_support import nobody_python_command
from terminal_support import Terminal, clean_env


@pytest.fixture(scope="module")
def nobody_python() -> Iterator[list[str]]:
    """The command that runs hookline as `nobody` (`nobody_support`)."""
    with nobody_python_command() as command:
        yield command


@pytest.fixture
def listener() -> Iterator[int]:
    """A real TCP server on 127.0.0.1: its port (what a sandboxed command must not reach)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.listen(8)
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    """A private tmux server whose panes run in `<tmp>/workspace` on `<tmp>/home`."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    # The offline model chosen on purpose: its notice would be one more line on screen.
    term = Terminal(workspace, {**clean_env(tmp_path / "home"), "HOOKLINE_MODEL": "offline"})
    try:
        yield term
    finally:
        term.close()


# -- the gateway security tests (test_gateway_security.py, test_gateway_malformed.py) ----


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def start(home: Path, workspace: Path) -> Iterator[Any]:
    """Start a gateway: `start(*args, token=..., wait=..., **env)`; the test token unless
    `token=None` (the gateway then makes its own token file)."""
    started: list[Gateway] = []

    def run(*args: str, token: str | None = TEST_TOKEN, wait: bool = True,
            **extra: str) -> Gateway:
        env = gateway_env(home, **extra)
        if token is None:
            del env["HOOKLINE_HTTP_TOKEN"]
        gateway = start_gateway_process(["--port", "0", *args], env, workspace, wait=wait)
        started.append(gateway)
        return gateway

    yield run
    for gateway in started:
        gateway.end()


@pytest.fixture
def segment() -> Iterator[int]:
    """A System V shared memory segment of the host's holding a secret, open to every
    user (so only the sandbox keeps a command from it, root or nobody): its id."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    made = libc.shmget(0, 4096, 0o1666)  # IPC_PRIVATE, IPC_CREAT | 0666
    assert made >= 0, os.strerror(ctypes.get_errno())
    address = libc.shmat(made, None, 0)
    ctypes.memmove(address, b"host segment secret", 18)
    libc.shmdt(ctypes.c_void_p(address))
    try:
        yield made
    finally:
        libc.shmctl(made, 0, None)  # IPC_RMID



@pytest.fixture
def user_key() -> Iterator[str]:
    """A key in the user's keyring, whose name /proc/keys would list: its name, or "" where
    keyrings are refused (a container's seccomp profile)."""
    libc = ctypes.CDLL(None, use_errno=True)
    name = f"hookline-test-{os.getpid()}"
    number = {"x86_64": 248, "aarch64": 217}[os.uname().machine]
    made = libc.syscall(number, b"user", name.encode(), b"secret", 6, -4)  # the user keyring
    if made < 0:
        yield ""
        return
    try:
        yield name
    finally:
        libc.syscall({"x86_64": 250, "aarch64": 219}[os.uname().machine], 21, made)  # invalidate

