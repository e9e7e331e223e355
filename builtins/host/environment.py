"""The builtin execution environment: processes and files on the host, inside a workspace.

`LocalEnvironment` implements `hookline.kernel.environment.Environment` for the machine the
framework runs on:

- every path (absolute or relative, after resolving symlinks and `..`) must stay inside the
  workspace; anything else is refused with `HooklineError(invalid_input)`;
- file I/O runs in worker threads, never on the event loop thread; what is opened and how
  (regular files only, no hard-linked file read, slices in bounded memory, atomic writes)
  is `files`;
- each spawned process leads its own process group (POSIX), so stopping it also stops
  everything it started (unless a descendant deliberately left the group with `setsid`);
  see `processes`;
- `run()` runs a command to completion with a timeout and output limits (`commands`);
- every process it starts is confined by its `SandboxPolicy` (`sandbox`): a filtered
  environment, and by default a Landlock sandbox that lets it write only the workspace.

Code mode (`run_code`) is not supported by this environment.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from hookline.kernel.environment import Environment, StrPath
from hookline.kernel.errors import ErrorKind, HooklineError

from .commands import run_command
from .files import LineSlice, is_inside, read_file, read_file_lines, write_file
from .processes import LocalProcess, open_local_process, stop_processes
from .protection import in_repository
from .sandbox import Confinement, SandboxPolicy

if TYPE_CHECKING:
    from .background import BackgroundProcesses

__all__ = ["LocalEnvironment"]


class LocalEnvironment(Environment):
    """Processes and files on the host, confined to a workspace directory.

    `processes`, when given, is the lifespan's `BackgroundProcesses` registry used by
    `start_background`, so background shells live exactly as long as the `running()`
    scope. Processes started with `spawn()` belong to this environment: `close()` stops
    the ones still running; with `processes`, the scope also ends their descendants that
    left the process group (see `lifespan`).

    `sandbox` confines every process started here, background shells included; the
    default is `SandboxPolicy()` (workspace-write, no network, filtered environment) with
    the default hookline home hidden. The builtin plugin passes the configured policy.
    """

    workspace: str

    def __init__(
        self,
        workspace: StrPath,
        *,
        processes: BackgroundProcesses | None = None,
        python: str | None = None,
        sandbox: SandboxPolicy | None = None,
    ) -> None:
        root = os.path.realpath(os.fspath(workspace))
        super().__init__(root, python=python)
        self.processes = processes
        self._owned: set[LocalProcess] = set()
        if sandbox is None:
            from ..config import default_home

            sandbox = SandboxPolicy(hidden=(str(default_home()),))
        self.sandbox = sandbox
        self._confinement = Confinement(sandbox, root)
        self._escalated: set[LocalEnvironment] = set()

    # -- paths -------------------------------------------------------------------------

    def resolve_path(self, path: StrPath) -> str:
        """The real absolute path of `path`; refused when it leaves the workspace or lies
        in what commands may not read (the hookline home, `sandbox_deny_read`, `/proc`,
        the sessions' temporary folders, and with the network closed `/run` and the
        container engines' folders).

        Relative paths are joined to the workspace; symlinks and `..` are resolved before
        the check, so a link pointing outside is refused too. The file need not exist.
        """
        try:
            text = os.fspath(path)
        except TypeError:
            raise HooklineError(
                ErrorKind.invalid_input,
                f"path must be a string, got {type(path).__name__}",
            ) from None
        if not isinstance(text, str):
            raise HooklineError(ErrorKind.invalid_input, f"path must be text, got {text!r}")
        if not text:
            raise HooklineError(ErrorKind.invalid_input, "path is empty")
        if "\0" in text:
            raise HooklineError(ErrorKind.invalid_input, f"path {text!r} contains a NUL byte")
        joined = text if os.path.isabs(text) else os.path.join(self.workspace, text)
        resolved = os.path.realpath(joined)
        if not is_inside(resolved, self.workspace):
            raise HooklineError(
                ErrorKind.invalid_input,
                # Relative names only: the message reaches the model and HTTP clients, which
                # need not learn where the workspace is on this machine.
                f"path {text!r} resolves to {os.path.relpath(resolved, self.workspace)!r}, "
                f"outside the workspace; only paths inside the workspace are allowed",
                {"path": text, "resolved": os.path.relpath(resolved, self.workspace)},
            )
        kept = self._confinement.kept_from_tools(resolved)
        if kept is not None:
            within, why = kept
            raise HooklineError(
                ErrorKind.invalid_input,
                f"path {text!r} is in {os.path.relpath(within, self.workspace)!r}, which "
                f"{why}: tools may neither read nor write it",
                {"path": text},
            )
        return resolved

    # -- files -------------------------------------------------------------------------

    async def read_bytes(self, path: StrPath, *, max_bytes: int | None = None) -> bytes:
        """The whole file; with `max_bytes`, a larger file is refused with `FileTooLarge`."""
        return await anyio.to_thread.run_sync(self._read_bytes, path, max_bytes)

    async def read_text(self, path: StrPath, *, max_bytes: int | None = None) -> str:
        """Read UTF-8 text exactly as stored (line endings are not translated)."""
        data = await self.read_bytes(path, max_bytes=max_bytes)
        return data.decode("utf-8")

    async def read_lines(
        self, path: StrPath, offset: int = 1, limit: int | None = None,
        max_chars: int = 100_000,
    ) -> LineSlice:
        """`limit` lines from line `offset`, at most `max_chars` characters, in bounded
        memory and time; see `read_line_slice`."""
        return await anyio.to_thread.run_sync(self._read_lines, path, offset, limit, max_chars)

    async def write_text(self, path: StrPath, content: str, *,
                         expected: str | None = None) -> None:
        """Write UTF-8 text exactly as given, creating missing parent directories; with
        `expected` (what an edit read), only while the file still holds it."""
        await anyio.to_thread.run_sync(
            self._write_bytes, path, content.encode("utf-8"),
            None if expected is None else expected.encode("utf-8"))

    def _locate(self, path: StrPath) -> tuple[str, str]:
        """The resolved path, and how errors name it: relative to the workspace."""
        target = self.resolve_path(path)
        return target, os.path.relpath(target, self.workspace)

    def _read_bytes(self, path: StrPath, max_bytes: int | None = None) -> bytes:
        return read_file(*self._locate(path), max_bytes, root=self.workspace)

    def _read_lines(
        self, path: StrPath, offset: int, limit: int | None, max_chars: int
    ) -> LineSlice:
        return read_file_lines(*self._locate(path), offset, limit, max_chars,
                               root=self.workspace)

    def _write_bytes(self, path: StrPath, data: bytes, expected: bytes | None = None) -> None:
        target, shown = self._locate(path)
        self._check_writable(target, shown)
        # What the write makes is looked for at the end of the turn, as a command's is (a
        # hooks folder a repository's config names that was missing, lefthook-local.yml).
        self._confinement.watch.started()
        write_file(self.workspace, target, shown, data, expected)

    def _check_writable(self, target: str, shown: str) -> None:
        """The file tools keep the sandbox's write rules: nothing in `read-only`, nothing
        under a protected path (`protected_paths`, and what the session's searches found,
        `MadeWatch.known`) or any `.git` below."""
        if self.sandbox.mode == "read-only":
            raise HooklineError(
                ErrorKind.invalid_input,
                f"cannot write {shown!r}: the sandbox is read-only (sandbox = \"read-only\"), "
                f"for the file tools as for commands; the user can change that setting",
                {"path": shown, "rule": "sandbox.read_only"})
        if not self.sandbox.confined:
            return
        confinement = self._confinement
        rule = next((os.path.relpath(protected, self.workspace)
                     for protected in (*confinement.protected, *confinement.watch.known())
                     if is_inside(target, protected)), None)
        rule = rule or in_repository(target, self.workspace)
        if rule is not None:
            raise HooklineError(
                ErrorKind.invalid_input,
                f"cannot write {shown!r}: {rule!r} is protected (what runs later outside "
                f"the sandbox reads it: git a repository's hooks, an editor or agent its "
                f"settings, a shell its startup files and what direnv or mise load); only "
                f"the user changes it. "
                f"The list is every .git, .hg, .jj and bare repository, what a "
                f"repository's config or hooks have git run from the workspace (a "
                f"core.hooksPath folder, lefthook.yml), mise's config files, what they "
                f"and a direnv .envrc load (a .env, a flake.nix), *.code-workspace files, "
                f".hookline, hookline's own Python environment, the hidden entries of your "
                f"home folder when the workspace holds it (.bashrc, .gitconfig), and the "
                f"setting sandbox_protect (by "
                f"default the settings editors and other agents run programs from: "
                f".vscode, .idea, .mcp.json and more)",
                {"path": shown, "rule": f"sandbox.protected:{rule}"})

    # -- processes ---------------------------------------------------------------------

    async def spawn(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> LocalProcess:
        """Start a process in the workspace (or `cwd`, which must be inside it)."""
        directory = self.resolve_path(cwd) if cwd is not None else self.workspace
        owner = self.processes.owner_env() if self.processes is not None else {}
        environ, spawner = await anyio.to_thread.run_sync(self._confinement.prepare)
        try:
            process = await open_local_process(command, cwd=directory,
                                               env={**(env or {}), **owner}, environ=environ,
                                               spawner=spawner)
        finally:
            if spawner is not None:
                spawner.release()
        self._owned = {p for p in self._owned if not p.closed}
        self._owned.add(process)
        if self.processes is not None:  # the scope then ends what escapes from it too
            await self.processes.track(process)
        return process

    # Run a command to completion: `run_command` itself, so the two cannot drift apart.
    run = run_command

    async def start_background(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        registry: BackgroundProcesses | None = None,
        owner: str = "",
    ) -> str:
        """Start a background shell, confined like every process of this environment, owned
        by `registry` (default: this environment's, the lifespan's) for the session `owner`;
        returns its id."""
        registry = registry if registry is not None else self.processes
        if registry is None:
            raise HooklineError(
                ErrorKind.config,
                "background processes need a BackgroundProcesses registry: create the "
                "LocalEnvironment with processes=... (the builtin lifespan's registry)",
            )
        directory = self.resolve_path(cwd) if cwd is not None else self.workspace
        environ, spawner = await anyio.to_thread.run_sync(self._confinement.prepare)
        try:
            return await registry.start(command, cwd=directory, env=env, environ=environ,
                                        spawner=spawner, owner=owner)
        finally:
            if spawner is not None:
                spawner.release()

    async def run_code(
        self,
        code: str,
        *,
        tools: Sequence[str],
        call_tool: Callable[[str, dict[str, Any]], Awaitable[Any]],
        write: Callable[[str], Any],
    ) -> None:
        """Not supported: the local environment does not run model-written code.

        Running untrusted code in the framework's own interpreter would give it the whole
        process; code mode needs an environment that provides isolation.
        """
        raise HooklineError(
            ErrorKind.config,
            "code mode is not supported by the local environment: it does not run "
            "model-written Python in the host process. Turn code mode off, or provide an "
            "environment that implements run_code (a higher-priority provide_environment).",
        )

    def escalated(self, escalate: str) -> LocalEnvironment:
        """This workspace for one approved command: with the network open (`network`) or
        without the sandbox (`unsandboxed`; the environment still filtered). A new one for
        each command, for `end_escalated` to end with everything the command left running
        (a daemon that kept the network would relay for the sandboxed commands after it);
        one left open (a background command's) is closed with this environment."""
        changed = ({"network": True} if escalate == "network" else {"mode": "off"})
        sibling = LocalEnvironment(self.workspace, processes=self.processes,
                                   sandbox=dataclasses.replace(self.sandbox, **changed))
        self._escalated.add(sibling)
        return sibling

    async def end_escalated(self, sibling: LocalEnvironment) -> None:
        """Close an environment `escalated` made, once its command is done: what that
        command left running is stopped, its sandbox with it."""
        self._escalated.discard(sibling)
        await sibling.close()

    async def end_finished_escalations(self) -> None:
        """Close the sandbox of each approved background command that ended (stopped, or
        exited), with what it left running: the network it was approved for ends with
        it, not with the session."""
        for sibling in [sibling for sibling in self._escalated
                        if not sibling._confinement.busy()]:
            await self.end_escalated(sibling)

    async def say_what_commands_made(self) -> None:
        """Warn about the repositories and protected paths commands made since the last
        look, here or in another sandbox of the workspace (an escalation's, another
        session's, an MCP server's), and protect them in each (`MadeWatch.say_what_made`);
        nothing, and no worker thread, if none started and none of this environment's is
        still running: the builtin plugin asks after every run."""
        watch = self._confinement.watch
        if any(environment._confinement.busy()
               for environment in (self, *self._escalated)):
            watch.started()
        if watch.started_since_said:
            await anyio.to_thread.run_sync(watch.say_what_made)

    async def close(self) -> None:
        """Stop every process started through `spawn` that is still running."""
        escalated, self._escalated = list(self._escalated), set()
        for sibling in escalated:
            await sibling.close()
        owned, self._owned = list(self._owned), set()
        running = [process for process in owned if await process.alive()]
        await stop_processes(running)
        for process in owned:
            await process.aclose()
        await anyio.to_thread.run_sync(self._confinement.close)

