"""What a Bub plugin gets as ``framework``: hookline's Framework seen through Bub's API.

Bub calls a callable entry point with its ``BubFramework``; here each Bub plugin gets a
``BubFramework``-shaped facade of hookline's ``Framework`` (one per plugin, so errors can
name it). The facade offers the attributes and methods the real plugins use: the turn
(``process_inbound``, ``resolve_session``, ...), the ``running()`` resources, the channel
router methods (``bind_channel_router``, ``dispatch_via_channel_router``,
``quit_via_channel_router``), ``get_agent_hooks``, ``workspace``, ``home``,
``config_file`` and a ``plugin_manager`` whose ``get_plugin("builtin")._get_agent().tools``
is the builtin agent's tool table (what bub-mcp binds its server tools into).

Anything else raises ``UnsupportedBubFeature``, an ``AttributeError`` naming the plugin and
the attribute. Raised while a plugin loads, it fails that plugin's load; raised from one
of its hooks, the plugin is taken out once (its status says why) and the turn goes on,
so one plugin reaching for what hookline lacks never breaks every turn.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .channels import unwrap_channel
from .convert import bub_admit_decision, bub_model_options

if TYPE_CHECKING:
    from hookline.kernel.tools import Tool

BubGroup = Any
"""The group (``group.BubGroup``), named loosely: the group imports this module."""

__all__ = [
    "AgentFacade",
    "AgentToolTable",
    "BubFrameworkFacade",
    "BuiltinFacade",
    "HookRuntimeFacade",
    "PluginManagerFacade",
    "RouterAdapter",
    "UnsupportedBubFeature",
]


class UnsupportedBubFeature(AttributeError):
    """A Bub plugin used an attribute the compatibility layer does not provide."""

    def __init__(self, plugin: str, owner: str, attribute: str) -> None:
        super().__init__(
            f"Bub plugin {plugin!r} uses {owner}.{attribute}, which hookline's Bub "
            f"compatibility layer does not provide",
            name=attribute, obj=owner)
        self.plugin = plugin
        self.owner = owner
        self.attribute = attribute


class _Strict:
    """Unknown attributes raise ``UnsupportedBubFeature`` naming plugin and attribute."""

    _owner = "object"
    _plugin = "?"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise UnsupportedBubFeature(self._plugin, self._owner, name)


class RouterAdapter:
    """A Bub ``ChannelRouter`` (``dispatch_output``, ``wrap_stream``, ``quit``,
    ``admit_channel_message``) as the router hookline's framework uses."""

    def __init__(self, router: Any) -> None:
        self.bub = router

    def wrap_stream(self, message: Any, stream: Any) -> Any:
        return self.bub.wrap_stream(message, stream)

    async def dispatch(self, message: Any) -> bool:
        return bool(await self.bub.dispatch_output(message))

    async def quit_session(self, session_id: str) -> int:
        await self.bub.quit(session_id)
        return 0

    async def admit_message(self, session_id: str, message: Any, turn: Any) -> Any:
        from .convert import admit_decision, bub_snapshot

        admit = getattr(self.bub, "admit_channel_message", None)
        if admit is None:
            return None
        return admit_decision(await admit(session_id, message, bub_snapshot(turn)))


class AgentToolTable(MutableMapping[str, Any]):
    """The builtin agent's tool table as Bub's ``Agent.tools``: Bub ``Tool`` objects by
    name. It reads through to every tool the model would get; what a plugin writes here
    (bub-mcp's server tools) is given to the model first, and deleting a written tool
    restores whatever it covered."""

    def __init__(self, group: BubGroup) -> None:
        self._group = group
        self.written: dict[str, Any] = {}
        """Tools plugins put into the table, by name (Bub ``Tool`` objects)."""

    def _base(self) -> dict[str, Any]:
        return {tool.name: tool for tool in self._group.base_tools()}

    def __getitem__(self, name: str) -> Any:
        if name in self.written:
            return self.written[name]
        return self._base()[name]

    def __setitem__(self, name: str, tool: Any) -> None:
        self.written[name] = tool

    def __delitem__(self, name: str) -> None:
        if name not in self.written:
            raise KeyError(name)  # tools of other plugins are theirs to remove
        del self.written[name]

    def __iter__(self) -> Iterator[str]:
        return iter({**self._base(), **self.written})

    def __len__(self) -> int:
        return len({**self._base(), **self.written})

    def model_tools(self) -> list[Tool]:
        """The written tools as hookline tools (converted once per tool object)."""
        return [self._group.converted(tool) for tool in self.written.values()]


class AgentFacade(_Strict):
    """What ``BuiltinImpl._get_agent()`` returns under hookline: the tool table."""

    _owner = "Agent"

    def __init__(self, group: BubGroup, plugin: str) -> None:
        self._plugin = plugin
        self.tools = group.agent_tools
        self.framework = group.facade(plugin)


class BuiltinFacade(_Strict):
    """``plugin_manager.get_plugin("builtin")``: hookline's builtin seen as Bub's
    ``BuiltinImpl`` (``framework`` and ``_get_agent()``)."""

    _owner = "BuiltinImpl"

    def __init__(self, group: BubGroup, plugin: str) -> None:
        self._group = group
        self._plugin = plugin
        self.framework = group.facade(plugin)

    def _get_agent(self) -> AgentFacade:
        return self._group.agent


class PluginManagerFacade(_Strict):
    """Bub's pluggy ``PluginManager`` as far as plugins use it: plugins by name."""

    _owner = "PluginManager"

    def __init__(self, group: BubGroup, plugin: str) -> None:
        self._group = group
        self._plugin = plugin

    def get_plugin(self, name: str) -> Any:
        """The Bub plugin object itself, the builtin as Bub's ``BuiltinImpl``, or any
        other registered plugin; None for an unknown name."""
        registry = self._group.framework.registry
        if name == "builtin" and registry.has_plugin("builtin"):
            return BuiltinFacade(self._group, self._plugin)
        if name in self._group.originals:
            return self._group.originals[name]
        return registry.get_plugin(name)

    def has_plugin(self, name: str) -> bool:
        return bool(self._group.framework.registry.has_plugin(name))

    def list_name_plugin(self) -> list[tuple[str, Any]]:
        return [(name, self.get_plugin(name))
                for name, _ in self._group.framework.registry.list_name_plugin()]

    def get_plugins(self) -> set[Any]:
        return {plugin for _, plugin in self.list_name_plugin()}

    def is_registered(self, plugin: Any) -> bool:
        return any(other is plugin for _, other in self.list_name_plugin())

    def get_name(self, plugin: Any) -> str | None:
        return next((name for name, other in self.list_name_plugin() if other is plugin), None)


class HookRuntimeFacade(_Strict):
    """``framework._hook_runtime`` (Bub's own channel manager reaches for it)."""

    _owner = "HookRuntime"

    def __init__(self, framework: Any, plugin: str) -> None:
        self._framework = framework
        self._plugin = plugin

    async def notify_error(self, stage: str, error: BaseException, message: Any = None) -> None:
        await self._framework.notify_error(stage, error, message)

    async def call_first(self, hook_name: str, **kwargs: Any) -> Any:
        return await self._framework.runtime.call_first(hook_name, **kwargs)

    async def call_many(self, hook_name: str, **kwargs: Any) -> list[Any]:
        result: list[Any] = await self._framework.runtime.call_many(hook_name, **kwargs)
        return result

    def call_first_sync(self, hook_name: str, **kwargs: Any) -> Any:
        return self._framework.runtime.call_first_sync(hook_name, **kwargs)

    def call_many_sync(self, hook_name: str, **kwargs: Any) -> list[Any]:
        result: list[Any] = self._framework.runtime.call_many_sync(hook_name, **kwargs)
        return result


class BubFrameworkFacade(_Strict):
    """hookline's ``Framework`` with ``BubFramework``'s attributes, for one Bub plugin."""

    _owner = "BubFramework"

    def __init__(self, group: BubGroup, plugin: str) -> None:
        self._group = group
        self._plugin = plugin
        self._framework = group.framework

    def __repr__(self) -> str:
        return f"<hookline BubFramework facade for plugin {self._plugin!r}>"

    # -- attributes ----------------------------------------------------------------------

    @property
    def workspace(self) -> Path:
        return Path(self._framework.workspace)

    @workspace.setter
    def workspace(self, value: str | Path) -> None:
        self._framework.workspace = Path(value).resolve()

    @property
    def home(self) -> Path:
        """Bub's home (``bub.home``: ``BUB_HOME``, default ``~/.bub``)."""
        import bub

        return Path(bub.home)

    @property
    def config_file(self) -> Path:
        return self._group.config_file

    @property
    def plugin_manager(self) -> PluginManagerFacade:
        return PluginManagerFacade(self._group, self._plugin)

    @property
    def _hook_runtime(self) -> HookRuntimeFacade:
        return HookRuntimeFacade(self._framework, self._plugin)

    @property
    def hookline(self) -> Any:
        """hookline's own Framework behind this facade."""
        return self._framework

    # -- the turn ------------------------------------------------------------------------

    async def process_inbound(self, inbound: Any, stream_output: bool = False) -> Any:
        return await self._framework.process_inbound(inbound, stream_output)

    async def resolve_session(self, message: Any) -> str:
        session: str = await self._framework.resolve_session(message)
        return session

    async def build_state(self, message: Any, session_id: str) -> dict[str, Any]:
        state: dict[str, Any] = await self._framework.build_state(message, session_id)
        return state

    async def build_prompt(self, message: Any, session_id: str, state: dict[str, Any]) -> Any:
        return await self._framework.build_prompt(message, session_id, state)

    async def continue_prompt(self, prompt: Any, tape: Any, state: Any) -> str | None:
        answer: str | None = await self._framework.continue_prompt(prompt, tape, state)
        return answer

    def get_system_prompt(self, prompt: Any, state: dict[str, Any]) -> str:
        from hookline.kernel.prompt import to_legacy_prompt

        text: str = self._framework.get_system_prompt(to_legacy_prompt(prompt), state)
        return text

    def hook_report(self) -> Any:
        return self._framework.hook_report()

    # -- resources -----------------------------------------------------------------------

    def running(self) -> Any:
        return self._framework.running()

    def get_tape_store(self) -> Any:
        return self._framework.get_tape_store()

    def get_steering_inbox(self) -> Any:
        return self._framework.get_steering_inbox()

    def get_tape_sidecars(self) -> tuple[Any, ...]:
        return tuple(self._framework.get_tape_sidecars())

    def build_tape_context(self) -> Any:
        return self._framework.build_tape_context()

    async def get_environment(self, session_id: str) -> Any:
        return await self._framework.get_environment(session_id)

    def get_channels(self, message_handler: Any) -> dict[str, Any]:
        channels = self._framework.get_channels(message_handler)
        return {name: unwrap_channel(channel) for name, channel in channels.items()}

    async def get_model_options(self, *, session_id: str,
                                workspace: str | Path | None = None) -> Any:
        options = await self._framework.get_model_options(session_id, workspace)
        return bub_model_options(options)

    async def admit_message(self, *, session_id: str, message: Any, turn: Any) -> Any:
        from hookline.kernel.channels import TurnSnapshot

        snapshot = TurnSnapshot(turn.session_id, turn.running_count, turn.pending_count,
                                getattr(turn, "steering_count", 0))
        decision = await self._framework.admit_message(session_id, message, snapshot)
        return bub_admit_decision(decision)

    async def steer_message(self, *, message: Any, session_id: str, state: dict[str, Any],
                            reason: str | None = None) -> bool:
        state.setdefault("session_id", session_id)
        steered: bool = await self._framework.steer_message(message, state, reason)
        return steered

    def collect_onboard_config(self, plugin_name: str | None = None) -> dict[str, Any]:
        return self._group.collect_onboard_config(plugin_name)

    def get_agent_hooks(self) -> Any:
        """The interception adapter: hookline's ``PluginAgentHooks`` (the same four
        methods, each returning what Bub's returns)."""
        return self._framework.agent_hooks

    # -- the channel router --------------------------------------------------------------

    def bind_channel_router(self, router: Any) -> None:
        """Attach a Bub ``ChannelRouter`` as the framework's router, or detach with None."""
        self._framework.router = None if router is None else RouterAdapter(router)

    async def dispatch_via_channel_router(self, message: Any) -> bool:
        router = self._framework.router
        if router is None:
            return False
        return bool(await router.dispatch(message))

    async def quit_via_channel_router(self, session_id: str) -> None:
        """Ask the bound router to quit a session (hookline's channel manager cancels the
        session's other running turns and forgets its pending messages)."""
        router = self._framework.router
        quit_session = getattr(router, "quit_session", None)
        if quit_session is not None:
            await quit_session(session_id)
