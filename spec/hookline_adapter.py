"""The adapter that runs the conformance suite against hookline's kernel.

It takes the kernel as a module so the same suite can run against a vendored copy of
``kernel/`` imported under another package name: every type it builds or recognises is
looked up in the submodules of that module, never imported from ``hookline``.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import importlib.util
import os
import sys
import tempfile
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .dispatch_adapter import DispatchKernel

WORKSPACE = "/spec-workspace"
"""The workspace of every framework under test (it need not exist)."""

_BUB_CONFIG_DIR: list[tempfile.TemporaryDirectory[str]] = []
"""Where the Bub layer's config file lives (so Bub's home is never read); made on first
use, removed at exit."""


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _forget_bub_tools() -> None:
    """The previous fixture's tools out of Bub's process-wide registry (``bub_values``
    is imported only by fixtures that made Bub values)."""
    values = sys.modules.get(f"{__package__}.bub_values")
    if values is not None:
        values.forget_registered()


class HooklineAdapter:
    name = "hookline"
    protocol = 1

    def __init__(self, kernel: types.ModuleType | str = "hookline.kernel") -> None:
        self.kernel = importlib.import_module(kernel) if isinstance(kernel, str) else kernel
        self._kinds: ContractKinds | None = None

    def _module(self, name: str) -> types.ModuleType:
        return importlib.import_module(f"{self.kernel.__name__}.{name}")

    def mark(self, function: Callable[..., Any], options: dict[str, Any]) -> Callable[..., Any]:
        return self.kernel.hookimpl(**options)(function)

    def supports(self, requirement: str) -> bool:
        """``media``: media objects can be made and converted, which takes republic, the
        kernel's one optional library (hookline depends on it; a vendored copy may run
        without it). ``group:bub``: plugins loaded as the ``bub`` entry point group loads
        them, through hookline's Bub compatibility layer (hookline's own kernel only: a
        vendored copy has no builtins beside it). ``bub``: Bub itself can be imported as
        well (Python 3.12), so the layer runs as it does in use: it prepares Bub,
        registers its own plugin and uses Bub's classes."""
        if requirement == "media":
            return _importable("republic")
        if self.kernel.__name__ != "hookline.kernel":
            return False
        if requirement == "group:bub":
            return _importable("hookline.builtins.bub")
        if requirement == "bub":
            return _importable("hookline.builtins.bub") and _importable("bub")
        return False

    def new_kernel(self) -> HooklineKernel:
        _forget_bub_tools()
        registry = self.kernel.Registry(self.kernel.HOOK_SPECS)
        return HooklineKernel(registry, self.kernel.HookRuntime(registry))

    def new_framework(self) -> HooklineFramework:
        _forget_bub_tools()
        framework = self._module("framework").Framework(workspace=WORKSPACE)
        return HooklineFramework(framework, self._module("events"))

    @staticmethod
    def log(group: str, level: str, message: str) -> None:
        """A plugin of the ``bub`` group logs as Bub plugins do, through loguru."""
        if group != "bub":
            raise ValueError(f"no entry point group {group!r} here")
        from . import bub_values

        bub_values.log(level, message)

    # -- values --------------------------------------------------------------------------

    def make(self, tag: str, data: dict[str, Any]) -> Any:
        """Build a contract value from a fixture tag; see spec/README.md for the tags.

        With ``group = "bub"`` (and for the tags only Bub has, ``registered_tool`` and
        ``attachment``) the value is Bub's own, as a Bub plugin or channel hands it over
        (``bub_values``, which imports Bub)."""
        value = data["value"]
        group = data.pop("group", None)
        if group not in (None, "bub"):
            raise ValueError(f"no entry point group {group!r} here")
        if group == "bub" or tag in ("registered_tool", "attachment"):
            from . import bub_values

            return bub_values.make(tag, data)
        if tag == "replace":
            return dataclasses.replace(value, **data["fields"])
        if tag == "tool":
            tools = self._module("tools")
            return tools.Tool(name=value, handler=lambda: None, description=data.get("tag", ""))
        if tag == "channel":
            channel_class = _channel_class(self._module("channels").Channel)
            return channel_class(value, data.get("tag", ""), data.get("on_start"))
        if tag == "sidecar":
            return _Sidecar(value, data.get("tag", ""))
        if tag == "admit":
            return self._module("channels").AdmitDecision(value, data.get("reason"))
        if tag == "turn":
            return self._module("channels").TurnSnapshot(**value)
        if tag == "model_options":
            models = self._module("models")
            return models.ModelOptions(
                models=[models.ModelChoice(model) for model in value.get("models", [])],
                current_model=value.get("current_model"),
            )
        if tag == "tape_context":
            tape = self._module("tape")
            anchor = value.get("anchor", "$last_anchor")
            return tape.TapeContext(
                anchor=tape.LAST_ANCHOR if anchor == "$last_anchor" else anchor,
                state=dict(value.get("state", {})),
            )
        if tag == "environment":
            environment_class = _environment_class(self._module("environment").Environment)
            return environment_class(value, data["on_close"])
        if tag == "stream":
            return self._stream(value, data["on_close"], data.get("raises"))
        interception = self._module("interception")
        if tag == "llm_request":
            fields = dict(value)
            fields["tool_names"] = tuple(fields.get("tool_names", ()))
            return interception.LLMCallRequest(**fields)
        if tag == "llm_result":
            return interception.LLMCallResult(**value)
        if tag == "llm_finish":
            return interception.LLMCallDecision.finish(value)
        if tag == "tool_call":
            return interception.ToolCall(**value)
        if tag == "tool_decision":
            options = {k: v for k, v in data.items() if k != "value"}
            return interception.ToolCallDecision(value, **options)
        if tag == "tool_result":
            return interception.ToolCallResult(**value)
        if tag == "image":
            import republic  # the media type of the contract (hookline's own dependency)

            return republic.image(value)
        raise ValueError(f"the hookline adapter cannot make ${tag}")

    def _stream(self, events: list[dict[str, Any]], on_close: Callable[[], None],
                error: BaseException | None) -> Any:
        streaming = self._module("streaming")

        async def source() -> Any:
            for event in events:
                yield streaming.StreamEvent(event["kind"], dict(event.get("data", {})))
            if error is not None:
                raise error

        async def closed() -> None:
            on_close()

        return streaming.AsyncStreamEvents(source(), on_close=closed)

    def describe(self, value: Any) -> Any:
        """Plain data for hookline's contract values; anything else is returned as is."""
        kinds = self._kinds
        if kinds is None:
            channels, tape = self._module("channels"), self._module("tape")
            kinds = self._kinds = ContractKinds(
                named=(_Sidecar, channels.Channel), tool=self._module("tools").Tool,
                environment=self._module("environment").Environment,
                is_media=self._module("prompt").is_media,
                model_options=self._module("models").ModelOptions,
                tape_context=tape.TapeContext, last_anchor=tape.LAST_ANCHOR)
        return describe_value(value, kinds)


@dataclasses.dataclass(frozen=True)
class ContractKinds:
    """The contract types of one kernel, which `describe_value` turns into plain data."""

    named: tuple[type, ...]
    """Channels and sidecars: described by their name (`name@tag`)."""
    tool: type
    environment: type
    is_media: Callable[[Any], bool]
    model_options: type
    tape_context: type
    last_anchor: Any


def describe_value(value: Any, kinds: ContractKinds) -> Any:
    """Plain data for a contract value, in the shapes spec/README.md lists ("Comparing
    values"), whichever kernel made it; anything else is returned as is."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, kinds.named):
        return _named(value.name, getattr(value, "spec_tag", ""))
    if isinstance(value, kinds.tool):
        return _named(value.name, value.description)
    if isinstance(value, kinds.environment):
        return {"$environment": getattr(value, "spec_label", "?")}
    if kinds.is_media(value):
        return {f"${value.kind}": value.data_url, "inline": value.data is not None}
    if isinstance(value, kinds.model_options):
        return {"models": [choice.id for choice in value.models],
                "current_model": value.current_model}
    if isinstance(value, kinds.tape_context):
        anchor = "$last_anchor" if value.anchor is kinds.last_anchor else value.anchor
        return {"anchor": anchor, "state": value.state}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # TurnResult, decisions, requests, results, snapshots, the framework error: their
        # compared fields (a ToolCall's context is not compared, so it is left out).
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)
                if f.compare}
    return value


def _named(name: str, tag: str) -> str:
    return f"{name}@{tag}" if tag else name


class _Sidecar:
    """A tape sidecar: the protocol asks only for a name."""

    def __init__(self, name: str, tag: str) -> None:
        self.name, self.spec_tag = name, tag


def _channel_class(base: type) -> type:
    class SpecChannel(base):  # type: ignore[misc, valid-type]
        def __init__(self, name: str, tag: str,
                     on_start: Callable[[Any], None] | None = None) -> None:
            self.name, self.spec_tag, self._on_start = name, tag, on_start

        async def start(self, stop_event: Any) -> None:
            if self._on_start is not None:
                self._on_start(stop_event)

        async def stop(self) -> None:
            return None

    return SpecChannel


def _environment_class(base: type) -> type:
    class SpecEnvironment(base):  # type: ignore[misc, valid-type]
        def __init__(self, label: str, on_close: Callable[[], None]) -> None:
            super().__init__()
            self.spec_label, self._on_close = label, on_close

        async def spawn(self, command: Any, *, cwd: Any = None, env: Any = None) -> Any:
            raise NotImplementedError

        async def read_text(self, path: Any) -> str:
            raise NotImplementedError

        async def write_text(self, path: Any, content: str) -> None:
            raise NotImplementedError

        async def run_code(self, code: str, *, tools: Any, call_tool: Any, write: Any) -> None:
            raise NotImplementedError

        async def close(self) -> None:
            self._on_close()

    return SpecEnvironment


class _EntryPoint:
    """An entry point of a plugin group, as the loader sees one: a name, a value and
    ``load()``, which gives the fixture's plugin."""

    def __init__(self, name: str, obj: object) -> None:
        self.name, self.value, self._obj = name, f"<fixture {name}>", obj

    def load(self) -> object:
        return self._obj


class HooklineKernel(DispatchKernel):
    """The kernel protocol over hookline's runtime, whose ``notify_error*`` are its own."""

    def dispatch(self, call: str, hook: str, kwargs: dict[str, Any]) -> Any:
        if call.startswith("notify_error"):
            return getattr(self.runtime, call)(**kwargs)
        return getattr(self.runtime, call)(hook, **kwargs)


class HooklineFramework(HooklineKernel):
    """A ``Framework`` as the runner's FrameworkUnderTest; also a kernel under test."""

    def __init__(self, framework: Any, events: types.ModuleType) -> None:
        super().__init__(framework.registry, framework.runtime)
        self.framework = framework
        self._events = events
        self._bus: Any = None

    def register_from_group(self, plugin: object, name: str, group: str) -> None:
        """Register ``plugin`` as the kernel's loader registers an entry point of ``group``
        (only ``bub``), through the Bub layer's steps: ``load`` (the import; the layer
        prepares Bub first, once), ``plugin`` (a callable is called with the framework
        facade, and the tools it registers in ``bub.tools.REGISTRY`` are attributed to
        it), the registration of the shim, then ``registered``; a failure tells the layer
        (``failed``: the plugin leaves no tools behind) and is raised. As the loader does,
        the layer's own plugin ``bub`` is registered before the first Bub plugin.

        Without Bub (hookline's own environment: Bub needs Python 3.12) the layer cannot
        prepare, so only the ``plugin`` step and the registration run: enough for the
        fixtures that need nothing of Bub (those that do ``require`` ``bub``)."""
        if group != "bub":
            raise ValueError(f"no entry point group {group!r} here")
        layer = self._bub_layer()
        with_bub = _importable("bub")
        try:
            obj = layer.load(_EntryPoint(name, plugin)) if with_bub else plugin
            shim = layer.plugin(name, obj, self.framework)
            self.registry.register(shim, name=name)
        except Exception:
            layer.failed(name)
            raise
        layer.registered(name, shim)

    def _bub_layer(self) -> Any:
        """The framework's Bub layer, made (with its own plugin, when Bub is there) on
        first use, with Bub's config file in a temporary folder."""
        layer = self.framework.extensions.get("bub")
        if layer is not None:
            return layer
        from hookline.builtins.bub.group import COMPAT_NAME, BubGroup
        from hookline.builtins.bub.plugin import BubCompatPlugin

        if not _BUB_CONFIG_DIR:
            _BUB_CONFIG_DIR.append(tempfile.TemporaryDirectory(prefix="spec-bub-config-"))
        layer = BubGroup(self.framework, config_file=Path(_BUB_CONFIG_DIR[0].name) / "config.yml")
        if _importable("bub"):
            loaded = layer.load(_EntryPoint(COMPAT_NAME, BubCompatPlugin))  # prepares Bub
            compat = layer.plugin(COMPAT_NAME, loaded, self.framework)
            self.registry.register(compat, name=COMPAT_NAME)
            layer.registered(COMPAT_NAME, compat)
        return layer

    def process_inbound(self, inbound: Any, stream_output: bool) -> Any:
        return self.framework.process_inbound(inbound, stream_output=stream_output)

    def running(self) -> Any:
        return self.framework.running()

    def get_tools(self) -> list[Any]:
        return self.framework.get_tools()

    async def offered_tools(self) -> list[str]:
        """The names the model is offered at a turn's first step: the builtin agent's own
        choice (``hookline.builtins.agent.loop.offered_tools``) of the collected tools, by their
        model names."""
        from hookline.builtins.agent.loop import offered_tools

        return [tool.model_name for tool in offered_tools(self.framework.get_tools())]

    def get_channels(self, message_handler: Any) -> list[Any]:
        channels = self.framework.get_channels(message_handler)
        assert all(name == channel.name for name, channel in channels.items())
        return list(channels.values())

    async def run_channels(self, selection: str | None, environ: dict[str, str]) -> list[str]:
        """Run the channels ``hookline gateway`` runs, inside ``running()``, and stop them
        as soon as they are started; returns their names in selection order. The selection
        is the gateway's own (``hookline.cli.gateway.channel_selection``) of ``selection``
        (its ``--channels``) and the settings, read here from ``environ`` alone
        (``HOOKLINE_CHANNELS``) and an empty config file, never the user's. The channel
        manager is the builtins' (``hookline.builtins.channels``)."""
        import anyio

        from hookline.builtins.channels import ChannelManager
        from hookline.builtins.config import settings_from_config
        from hookline.cli.gateway import channel_selection

        with tempfile.TemporaryDirectory(prefix="spec-hookline-home-") as home:
            settings = settings_from_config({}, environ, home)
        names = channel_selection(selection, settings)
        manager = ChannelManager(self.framework, enabled_channels=names)
        stop = anyio.Event()
        async with self.framework.running(), anyio.create_task_group() as task_group:
            await task_group.start(manager.run, stop)
            started = list(manager.active)
            stop.set()
        return started

    def get_tape_sidecars(self) -> list[Any]:
        return self.framework.get_tape_sidecars()

    def get_system_prompt(self, prompt: Any, state: dict[str, Any]) -> str:
        return self.framework.get_system_prompt(prompt, state)

    def build_tape_context(self) -> Any:
        return self.framework.build_tape_context()

    def collect_onboard_config(self, current_config: Any, plugin: str | None) -> dict:
        return self.framework.collect_onboard_config(current_config, plugin=plugin)

    def get_model_options(self, session_id: str, workspace: Any) -> Any:
        return self.framework.get_model_options(session_id, workspace=workspace)

    def admit_message(self, session_id: str, message: Any, turn: Any) -> Any:
        return self.framework.admit_message(session_id, message, turn)

    def get_environment(self, session_id: str) -> Any:
        return self.framework.get_environment(session_id)

    def get_tape_store(self) -> Any:
        return self.framework.get_tape_store()

    def get_steering_inbox(self) -> Any:
        return self.framework.get_steering_inbox()

    def steer_message(self, message: Any, state: dict[str, Any], reason: str | None) -> Any:
        return self.framework.steer_message(message, state, reason=reason)

    def continue_prompt(self, prompt: Any, tape: Any, state: Any) -> Any:
        return self.framework.continue_prompt(prompt, tape, state)

    async def step_finished(self, prompt: Any, status: str, tape: Any, stream_state: Any,
                            step: int) -> Any:
        """Announce a step on a bus the framework's AgentPlugins is attached to."""
        if self._bus is None:
            self._bus = self.framework.agent_plugins.attach()
        events = self._events
        await self._bus.emit(events.StepStarted(step=step, prompt=prompt, tape=tape))
        finished = await self._bus.emit(events.StepFinished(
            step=step, status=status, tape=tape, stream_state=stream_state))
        return finished.next_prompt

    async def before_llm_call(self, request: Any, state: dict[str, Any]) -> Any:
        request, decision = await self.framework.agent_hooks.before_llm_call(request, state)
        return request if decision is None else decision

    def after_llm_call(self, request: Any, result: Any, state: dict[str, Any]) -> Any:
        return self.framework.agent_hooks.after_llm_call(request, result, state)

    def before_tool_call(self, call: Any, state: dict[str, Any]) -> Any:
        return self.framework.agent_hooks.before_tool_call(call, state)

    def after_tool_call(self, call: Any, result: Any, state: dict[str, Any]) -> Any:
        return self.framework.agent_hooks.after_tool_call(call, result, state)
