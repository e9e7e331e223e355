"""The MCP servers of one builtin plugin: their connections for the `running()` scope, the
tools they offer, and their state for `hookline mcp list`.

Nothing starts when the scope opens: before each run the agent calls `prepare()`, which
launches the servers not started yet (or due for a restart), all at once. A server whose
tools are known (listed in this process, or kept in the hookline home by an earlier one:
`cache.py`) starts in the background and the run goes on; the first call of one of its
tools waits for it. The run waits only for servers never listed, as they are the ones
whose tools it cannot offer otherwise. The synchronous `provide_tools` then offers what
is known. Servers are shared by every session of the scope and ended with it, before the
background processes' lifespan ends whatever is left of their process groups.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from hookline.kernel.errors import HooklineError
from hookline.kernel.tools import Tool

from .cache import CACHE_FOLDER, ListedTool, ToolCache
from .config import NAME_SEPARATOR, ServerConfig, server_configs
from .connection import Connection
from .tools import Caller, make_tools

if TYPE_CHECKING:
    from mcp_types import CallToolResult

    from ..config import Settings
    from ..host.background import BackgroundProcesses
    from ..host.sandbox import Confinement, SandboxPolicy

__all__ = ["McpServers", "ServerState", "sdk_installed"]

logger = logging.getLogger(__name__)


NO_SDK = ("MCP servers are configured ([mcp_servers] in config.toml), but the MCP SDK is "
          "not installed: pip install 'hookline[mcp]' (or remove the servers, or disable "
          "them with enabled = false)")
"""Why no configured server runs: what to install, or what to change in the config."""


def sdk_installed() -> bool:
    """Whether the optional MCP SDK is installed (found, not imported: importing it takes
    about a second, paid only when a session opens)."""
    return importlib.util.find_spec("mcp") is not None


@dataclasses.dataclass(frozen=True)
class ServerState:
    """What `hookline mcp list --check` shows of one configured server."""

    config: ServerConfig
    state: str
    """`idle` (not started), `starting`, `ready`, `failed`, or `disabled` (`enabled =
    false`)."""
    tools: int | None
    """The tools offered (after the tools lists and the schema check); None: never listed."""
    error: str | None


class McpServers:
    """Connections to the configured servers, alive only inside `lifespan()`."""

    def __init__(self, configs: list[ServerConfig], workspace: Callable[[], str],
                 processes: BackgroundProcesses, policy: Callable[[], SandboxPolicy],
                 steer: Callable[[dict[str, Any], dict[str, Any]], Any], home: Path) -> None:
        self.configs = configs
        self._workspace = workspace
        self._processes = processes
        self._policy = policy
        self._steer = steer
        self.cache = ToolCache(home / CACHE_FOLDER)
        self._cache_read = False
        self._failed_lately: set[str] = set()
        """Servers that could not start lately, without a list kept: not waited for."""
        self._confinements: dict[str, Confinement] = {}
        self._warned: set[str] = set()
        enabled = [config for config in configs if config.enabled]
        self.missing_sdk = bool(enabled) and not sdk_installed()
        """Enabled servers, and no SDK to run them: one warning, and no server at all."""
        self.connections = {} if self.missing_sdk else {
            config.name: Connection(config, self._launch, self._keep) for config in enabled}

    @classmethod
    def configured(cls, settings: Settings, workspace: Callable[[], str],
                   processes: BackgroundProcesses, policy: Callable[[], SandboxPolicy],
                   steer: Callable[[dict[str, Any], dict[str, Any]], Any]) -> McpServers:
        """The servers of the settings' `[mcp_servers]`, their lists kept in its home."""
        configs = server_configs(settings.extra, str(settings.home / "config.toml"))
        return cls(configs, workspace, processes, policy, steer, settings.home)

    # -- the scope ---------------------------------------------------------------------

    async def lifespan(self) -> AsyncIterator[None]:
        """Own the servers' tasks while the scope is open; end every server on exit. Without
        the SDK, one warning: the turn goes on without the servers' tools, as with a server
        that failed."""
        if self.missing_sdk:
            logger.warning("%s; this command goes on without their tools", NO_SDK)
        failure: BaseException | None = None
        async with anyio.create_task_group() as group:
            for connection in self.connections.values():
                connection.bind(group)
            try:
                yield
            except BaseException as exc:  # re-raised as is, not in an exception group
                failure = exc
            finally:
                with anyio.CancelScope(shield=True):
                    await self.close()
                group.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def close(self) -> None:
        """End every server, all at once: a run's exit waits for the slowest alone."""
        async with anyio.create_task_group() as group:
            for connection in self.connections.values():
                connection.bind(None)
                group.start_soon(connection.close)
        confinements, self._confinements = self._confinements, {}
        for confinement in confinements.values():
            await anyio.to_thread.run_sync(confinement.close)

    async def prepare(self, wait: bool = False) -> None:
        """Start the servers that are not running and may be (a failure is logged, once,
        by the connection); wait for those whose tools are not known yet, or for all
        (`wait`: `hookline mcp list --check`). `tools()` then offers what is known."""
        async def start(connection: Connection) -> None:
            try:
                await connection.ensure()
            except HooklineError:
                if connection.tools is None:  # no list kept: not waited for next time
                    await anyio.to_thread.run_sync(self.cache.mark_failed, connection.config)

        if not self._cache_read:
            await anyio.to_thread.run_sync(self._read_cache, not wait)
        waited = [c for c in self.connections.values()
                  if wait or (c.tools is None and c.config.name not in self._failed_lately)]
        for connection in self.connections.values():
            if connection not in waited:
                connection.start_soon()
        if not waited:
            return
        async with anyio.create_task_group() as group:
            for connection in waited:
                group.start_soon(start, connection)

    def tools(self) -> list[Tool]:
        """The tools of every server as last listed, by this process or an earlier one (a
        failed server keeps its last list: a call starts it again)."""
        offered: list[Tool] = []
        for connection in self.connections.values():
            if connection.tools is not None:
                offered += make_tools(connection.config, connection.tools,
                                      self._caller(connection), self._steer, self._warned)
        return offered

    def _caller(self, connection: Connection) -> Caller:
        """`connection.call`, after which the workspace's watch looks again at the end of
        the run: a stdio server's call is a command of its sandbox, which may have made a
        repository (`MadeWatch`)."""
        async def call(tool: str, arguments: dict[str, Any]) -> CallToolResult:
            try:
                return await connection.call(tool, arguments)
            finally:
                confinement = self._confinements.get(connection.config.name)
                if confinement is not None:
                    confinement.watch.started()
        return call

    def states(self) -> list[ServerState]:
        """Each configured server's state and offered tool count, in the file's order."""
        offered: dict[str, int] = {}
        for tool in self.tools():
            server = tool.name.split(NAME_SEPARATOR, 1)[0]
            offered[server] = offered.get(server, 0) + 1
        found = []
        for config in self.configs:
            connection = self.connections.get(config.name)
            if connection is None:
                found.append(ServerState(config, "disabled", None, None) if not (
                    config.enabled and self.missing_sdk) else ServerState(
                    config, "failed", None, NO_SDK))
                continue
            count = None if connection.tools is None else offered.get(config.name, 0)
            found.append(ServerState(config, connection.state, count, connection.error))
        return found

    # -- the tool lists kept between processes -----------------------------------------

    def _read_cache(self, say: bool = True) -> None:
        """The lists kept, and the servers that failed lately (said when `say`: not when
        `mcp list --check` waits for every server anyway)."""
        self._cache_read = True
        for connection in self.connections.values():
            if connection.tools is None:
                connection.tools = self.cache.load(connection.config)
            if connection.tools is None and self.cache.failed_lately(connection.config):
                self._failed_lately.add(connection.config.name)
                if say:
                    logger.warning("MCP server %r could not start lately and has listed no "
                                   "tools: it is started without being waited for, and its tools "
                                   "are offered once it has listed them (hookline mcp list "
                                   "--check waits for it)", connection.config.name)

    async def _keep(self, config: ServerConfig, tools: list[ListedTool]) -> None:
        await anyio.to_thread.run_sync(self.cache.store, config, tools)

    # -- launching a server ------------------------------------------------------------

    def _launch(self, config: ServerConfig) -> Any:
        if config.command is not None:
            from .stdio import launch_stdio_server

            workspace = self._workspace()
            return launch_stdio_server(config, workspace, self._confinement(config, workspace),
                                       self._processes)
        from .http import launch_http_server

        return launch_http_server(config)

    def _confinement(self, config: ServerConfig, workspace: str) -> Confinement:
        """The sandbox of a stdio server: the shell's, with TCP only when its table says
        `network = true`."""
        confinement = self._confinements.get(config.name)
        if confinement is None:
            from ..host.sandbox import Confinement

            policy = dataclasses.replace(self._policy(), network=config.network)
            confinement = self._confinements[config.name] = Confinement(
                policy, workspace, owner=f"the MCP server {config.name!r}")
        return confinement
