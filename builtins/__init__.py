"""hookline.builtins: the default plugin and the real capabilities it provides."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Callable

    from .agent.loop import Agent
    from .config import Settings
    from .host.background import BackgroundProcesses
    from .mcp.manager import McpServers
    from .plugin import BuiltinPlugin


@runtime_checkable
class BuiltinServices(Protocol):
    """What the commands and the pytest plugin ask of the builtin plugin besides its
    hooks: they reach it through this, never through its class, so a plugin that takes
    its place under the name `builtin` can offer the same."""

    @property
    def processes(self) -> BackgroundProcesses: ...
    def get_settings(self) -> Settings: ...
    def get_agent(self) -> Agent: ...
    def context_window(self, model: str | None = None) -> int: ...
    def mcp_servers(self) -> McpServers | None: ...
    async def compact_session(self, session_id: str, instructions: str = "",
                              model: str | None = None,
                              starting: Callable[[], None] | None = None,
                              retrying: Callable[[dict[str, Any]], None] | None = None
                              ) -> dict[str, Any] | None: ...


def builtin_services(framework: Any) -> BuiltinServices | None:
    """The framework's builtin plugin (registered as `builtin`), or None when it is not
    loaded (HOOKLINE_DISABLE_PLUGINS, `builtin=False` in tests)."""
    from hookline.kernel.framework import BUILTIN_NAME

    plugin = framework.registry.get_plugin(BUILTIN_NAME)
    return plugin if isinstance(plugin, BuiltinServices) else None


def create_plugin(framework: Any) -> BuiltinPlugin:
    """The builtin plugin for ``framework``: what ``Framework.load_hooks()`` registers first
    (the kernel looks this factory up by name). The plugin module is imported here, on
    first use, so importing ``hookline.builtins`` stays light."""
    from .plugin import BuiltinPlugin

    return BuiltinPlugin(framework)


def plugin_groups(framework: Any) -> list[Any]:
    """Entry point groups to read besides ``hookline`` (the kernel asks for them by name).

    The ``bub`` group, through the Bub compatibility layer, when the ``bub`` distribution
    is installed and ``HOOKLINE_BUB_PLUGINS`` does not turn it off. Nothing is imported
    otherwise, so a framework without Bub pays only for one ``find_spec``.
    """
    from .bub import plugin_groups as bub_groups

    return bub_groups(framework)
