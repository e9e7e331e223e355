"""Confining the processes tools start: a Landlock sandbox and a filtered environment.

The default (`sandbox = "workspace-write"`) lets a command read the file system, write only
the workspace, its own temporary folder (its `TMPDIR`) and `/dev/null`-like devices, open no
TCP connection and bind no port, signal no process outside its own sandbox, and neither
read nor write the hookline home (tapes, token, config). `read-only` also refuses the
workspace; `sandbox_network = true` allows TCP; `off` gives commands the user's full rights.
Where Landlock cannot be applied, commands are refused with the reason: nothing runs
unconfined by accident. See docs/security.md, "The sandboxed shell".
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hookline.kernel.streaming import ErrorKind, HooklineError

from .files import is_inside
from .toolenv import EnvironmentPolicy

if TYPE_CHECKING:
    from ..config import Settings
    from .confined import Spawner
    from .landlock import Ruleset

__all__ = ["Confinement", "SandboxPolicy", "check_exposure"]

logger = logging.getLogger(__name__)  # every command shows its warnings (cli ALWAYS_WARN)

WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
"""Devices a sandboxed command may write: discarding output must keep working."""

_STORE_SUFFIXES = ("", "-wal", "-shm", "-journal")


@dataclass(frozen=True)
class SandboxPolicy:
    """How the processes of tools are confined (settings `sandbox`, `sandbox_network`,
    `tool_env*`); `hidden` are paths no command may read or write."""

    mode: str = "workspace-write"
    network: bool = False
    hidden: tuple[str, ...] = ()
    environment: EnvironmentPolicy = field(default_factory=EnvironmentPolicy)

    @classmethod
    def from_settings(cls, settings: Settings) -> SandboxPolicy:
        hidden = [str(settings.home)]
        store = settings.tape_store
        if store is not None and not isinstance(store, str):  # a file, not a URL
            hidden += [f"{store}{suffix}" for suffix in _STORE_SUFFIXES]
        if settings.http_keyfile is not None:
            hidden.append(str(settings.http_keyfile))
        environment = EnvironmentPolicy(inherit=settings.tool_env == "inherit",
                                        keep=settings.tool_env_keep,
                                        drop=settings.tool_env_drop)
        return cls(settings.sandbox, settings.sandbox_network, tuple(hidden), environment)

    @property
    def confined(self) -> bool:
        return self.mode != "off"

    def warn(self) -> None:
        """Say, at a start, each way this policy is weaker than the default."""
        for line in self.warnings():
            logger.warning("%s", line)

    def warnings(self) -> list[str]:
        """What to say at every start about a weakened setting (empty by default)."""
        lines = []
        if not self.confined:
            lines.append("the shell sandbox is OFF (sandbox = off): commands the model asks "
                         "for run with your full rights; remove sandbox = off to confine them")
        elif self.network:
            lines.append("sandboxed commands may open network connections "
                         "(sandbox_network = true)")
        if self.environment.inherit:
            lines.append("tool processes inherit hookline's whole environment, secrets "
                         "included (tool_env = inherit); remove it to filter them out")
        return lines


def check_exposure(settings: Settings, address: str, loopback: bool) -> None:
    """Refuse to serve other machines with an unconfined shell, unless told twice."""
    if loopback or settings.sandbox != "off" or settings.http_allow_unsandboxed:
        return
    raise RuntimeError(
        f"refusing to listen on {address} with sandbox = off: whoever holds the token could "
        f"run commands with your full rights from another machine; remove sandbox = off, "
        f"or also set http_allow_unsandboxed = true if that is what you want")


class Confinement:
    """One workspace's confinement: its private temporary folder and its Landlock ruleset.

    The ruleset is built on first use and again when a folder it enumerated changes (a new
    entry beside the hookline home needs its own rule); `close()` removes the folder.
    """

    def __init__(self, policy: SandboxPolicy, workspace: str) -> None:
        self.policy = policy
        self.workspace = os.path.realpath(workspace)
        self.hidden = tuple(os.path.realpath(path) for path in policy.hidden)
        self._lock = threading.Lock()
        self._temporary: str | None = None
        self._spawner: Spawner | None = None
        self._watched: tuple[tuple[str, int], ...] = ()

    def prepare(self, extra: Mapping[str, str] | None = None
                ) -> tuple[dict[str, str], Spawner | None]:
        """The complete environment for a new process (hookline's, filtered, plus `extra`)
        and the confined thread that must start it (None when the sandbox is off).
        Blocking (it may list folders): call it from a worker thread."""
        environ = self.policy.environment.apply(os.environ)
        if not self.policy.confined:
            return {**environ, **(extra or {})}, None
        self._check_layout()
        with self._lock:
            temporary = self._temporary_folder()
            spawner = self._current_spawner(temporary)
        for name in ("TMPDIR", "TMP", "TEMP"):
            environ[name] = temporary
        return {**environ, **(extra or {})}, spawner

    def close(self) -> None:
        with self._lock:
            folder, self._temporary = self._temporary, None
            spawner, self._spawner = self._spawner, None
        if spawner is not None:
            spawner.close()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def _check_layout(self) -> None:
        """Landlock grants whole hierarchies: a workspace that holds the hookline home
        cannot be writable without the home being changeable too, so refuse it."""
        writable = self.policy.mode == "workspace-write"
        for path in self.hidden:
            home_inside = writable and is_inside(path, self.workspace)
            if is_inside(self.workspace, path) or home_inside:
                # Reads are granted file by file: read-only can hide a home in the workspace.
                other = ', or set sandbox = "read-only"' if home_inside else ""
                raise HooklineError(
                    ErrorKind.config,
                    f"the sandbox cannot confine commands here: the workspace and {path} "
                    f"(the hookline home or its tape store, which commands must not read or "
                    f"change) are one inside the other. Keep HOOKLINE_HOME outside the "
                    f"workspace (the default is ~/.hookline){other}")

    # -- the temporary folder and the ruleset -------------------------------------------

    def _temporary_folder(self) -> str:
        if self._temporary is None or not os.path.isdir(self._temporary):
            self._temporary = tempfile.mkdtemp(prefix="hookline-tool-")  # mode 0700
            self._spawner = None  # its ruleset names the old folder
        return self._temporary

    def _current_spawner(self, temporary: str) -> Spawner:
        if self._spawner is not None and all(_mtime(path) == seen
                                             for path, seen in self._watched):
            return self._spawner
        from .confined import Spawner

        try:
            ruleset = self._build(temporary)
            try:
                spawner = Spawner(ruleset.confine)
            finally:
                ruleset.close()  # the thread holds the policy now, not the descriptor
        except OSError as exc:
            raise HooklineError(
                ErrorKind.config,
                f"the shell is sandboxed (sandbox = {self.policy.mode}), but the sandbox "
                f"cannot be applied here: {exc}. Nothing was run. To run commands with "
                f"your full rights instead, set sandbox = \"off\" (HOOKLINE_SANDBOX=off); "
                f"hookline then warns at every start") from None
        # The old spawner is dropped, not closed: a command being started through it (a
        # concurrent prepare) still gets its process; its thread ends once it is collected.
        self._spawner = spawner
        return spawner

    def _build(self, temporary: str) -> Ruleset:
        from .landlock import (
            FS_READ,
            FS_WRITE,
            MINIMUM_ABI,
            NET_BIND_TCP,
            NET_CONNECT_TCP,
            READ_DIR,
            SCOPE_ABSTRACT_UNIX_SOCKET,
            SCOPE_SIGNAL,
            TRUNCATE,
            WRITE_FILE,
            LandlockUnavailable,
            Ruleset,
            abi_version,
        )

        abi = abi_version()
        if not self.policy.network and abi < MINIMUM_ABI:
            raise LandlockUnavailable(
                f"this kernel's Landlock (ABI {abi}) cannot refuse network connections "
                f"(ABI {MINIMUM_ABI} can); set sandbox_network = true to confine files only")
        network = 0 if self.policy.network else NET_BIND_TCP | NET_CONNECT_TCP
        ruleset = Ruleset(abi, fs=FS_READ | FS_WRITE, net=network,
                          scoped=SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET)
        watched: list[tuple[str, int]] = []
        # Listing folders stays possible everywhere (names, as `stat` shows them anyway);
        # reading, running and writing files only where granted below.
        ruleset.allow("/", READ_DIR)
        self._grant(ruleset, "/", FS_READ, watched)
        if self.policy.mode == "workspace-write":
            self._grant(ruleset, self.workspace, FS_READ | FS_WRITE, watched)
        ruleset.allow(temporary, FS_READ | FS_WRITE)
        for device in WRITABLE_DEVICES:
            ruleset.allow(device, FS_READ | WRITE_FILE | TRUNCATE)
        self._watched = tuple(watched)
        return ruleset

    def _grant(self, ruleset: Ruleset, root: str, access: int,
               watched: list[tuple[str, int]]) -> None:
        """Grant `access` beneath `root` except beneath the hidden paths: a folder that
        holds one is not granted itself; each of its other entries is, recursively."""
        inner = [path for path in self.hidden if is_inside(path, root)]
        if not inner:
            ruleset.allow(root, access)
            return
        if root in inner:
            return
        watched.append((root, _mtime(root)))
        with contextlib.suppress(FileNotFoundError, NotADirectoryError), os.scandir(root) as it:
            for entry in it:
                if not entry.is_symlink():  # a link's target is granted through its own path
                    self._grant(ruleset, entry.path, access, watched)


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1
