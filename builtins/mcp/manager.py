"""The MCP servers of one builtin plugin: their connections for the `running()` scope, the
tools they offer, and their state for `hookline mcp list`.

Nothing starts when the scope opens: before each run the agent calls `prepare()`, which
starts the servers not started yet (or due for a restart) and lists their tools; the
synchronous `provide_tools` then offers what was listed. Servers are shared by every
session of the scope and ended with it, before the background processes' lifespan ends
whatever is left of their process groups.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from hookline.kernel.streaming import HooklineError
from hookline.kernel.tools import Tool

from .config import NAME_SEPARATOR, ServerConfig
from .connection import Connection, no_process
from .tools import make_tools

if TYPE_CHECKING:
    from ..host.background import BackgroundProcesses
    from ..host.sandbox import Confinement, SandboxPolicy

__all__ = ["McpServers", "ServerState", "require_sdk"]

logger = logging.getLogger(__name__)


def require_sdk() -> None:
    """ImportError with the fix when the optional MCP SDK is not installed."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "MCP servers are configured ([mcp_servers] in config.toml), but the MCP SDK is "
            "not installed: pip install 'hookline[mcp]' (or remove the servers)") from exc


@dataclasses.dataclass(frozen=True)
class ServerState:
    """What `hookline mcp list --check` shows of one configured server."""

    config: ServerConfig
    state: str
    """`idle` (not started), `ready`, `failed`, or `disabled` (`enabled = false`)."""
    tools: int | None
    """The tools offered (after the tools lists and the schema check); None: never listed."""
    error: str | None


class McpServers:
    """Connections to the configured servers, alive only inside `lifespan()`."""

    def __init__(self, configs: list[ServerConfig], workspace: Callable[[], str],
                 processes: BackgroundProcesses, policy: Callable[[], SandboxPolicy],
                 steer: Callable[[dict[str, Any], dict[str, Any]], Any]) -> None:
        self.configs = configs
        self._workspace = workspace
        self._processes = processes
        self._policy = policy
        self._steer = steer
        self._confinements: dict[str, Confinement] = {}
        self._warned: set[str] = set()
        self.connections = {config.name: Connection(config, self._opener)
                            for config in configs if config.enabled}

    # -- the scope ---------------------------------------------------------------------

    async def lifespan(self) -> AsyncIterator[None]:
        """Own the servers' tasks while the scope is open; end every server on exit."""
        require_sdk()
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
        for connection in self.connections.values():
            connection.bind(None)
            await connection.close()
        confinements, self._confinements = self._confinements, {}
        for confinement in confinements.values():
            await anyio.to_thread.run_sync(confinement.close)

    async def prepare(self) -> None:
        """Start the servers that are not running and may be (a failure is logged, once,
        by the connection); their tools are then what `tools()` offers."""
        async def start(connection: Connection) -> None:
            with contextlib.suppress(HooklineError):
                await connection.ensure()

        pending = [c for c in self.connections.values() if c.state != "ready"]
        if not pending:
            return
        async with anyio.create_task_group() as group:
            for connection in pending:
                group.start_soon(start, connection)

    def tools(self) -> list[Tool]:
        """The tools of every server listed so far (a failed server keeps its last list:
        a call starts it again)."""
        offered: list[Tool] = []
        for connection in self.connections.values():
            if connection.tools is not None:
                offered += make_tools(connection.config, connection.tools, connection.call,
                                      self._steer, self._warned)
        return offered

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
                found.append(ServerState(config, "disabled", None, None))
                continue
            count = None if connection.tools is None else offered.get(config.name, 0)
            found.append(ServerState(config, connection.state, count, connection.error))
        return found

    # -- opening a server's streams ----------------------------------------------------

    def _opener(self, config: ServerConfig) -> Any:
        if config.command is not None:
            from .stdio import open_stdio_server

            workspace = self._workspace()
            return open_stdio_server(config, workspace, self._confinement(config, workspace),
                                     self._processes)
        from .http import open_http_server

        return no_process(open_http_server(config))

    def _confinement(self, config: ServerConfig, workspace: str) -> Confinement:
        """The sandbox of a stdio server: the shell's, with TCP only when its table says
        `network = true`."""
        confinement = self._confinements.get(config.name)
        if confinement is None:
            from ..host.sandbox import Confinement

            policy = dataclasses.replace(self._policy(), network=config.network)
            confinement = self._confinements[config.name] = Confinement(policy, workspace)
        return confinement
