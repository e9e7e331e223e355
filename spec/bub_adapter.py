"""The adapter that runs the conformance suite against Bub 0.6.0a3, the reference.

It needs Python 3.12+ with ``bub[app]==0.6.0a3`` and ``pluggy==1.6.0`` installed (see
``run_on_bub.py``); it imports nothing from hookline (only the kernel-neutral helpers of
``hookline_adapter.py``, which import nothing either). Every action goes through Bub's own
public objects: a ``BubFramework`` (its pluggy ``PluginManager`` with ``BubHookSpecs``, its
``HookRuntime``, its ``PluginAgentHooks``), Bub's ``hookimpl`` marker and Bub's types.

Where Bub has no counterpart for what an action asks, the adapter raises
``NotApplicable`` (a ``BaseException``, so the runner does not take it for an error of the
kernel and it reaches the caller unchanged). ``NOT_APPLICABLE`` lists those actions and why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import tempfile
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import republic
from bub.channels.admission import TurnSnapshot
from bub.channels.base import Channel
from bub.core import events as bub_events
from bub.core.tape import LAST_ANCHOR, TapeContext
from bub.core.tools import Tool
from bub.environment import Environment
from bub.framework import BubFramework
from bub.hooks import hookimpl
from bub.model_selection import ModelOptions
from bub.prompt import to_content
from bub.streaming import AsyncStreamEvents, StreamEvent
from loguru import logger

from . import bub_values
from .hookline_adapter import (
    ContractKinds,
    _environment_class,
    _Sidecar,
    describe_value,
)

WORKSPACE = "/spec-workspace"
"""The workspace of every framework under test (it need not exist)."""

NOT_APPLICABLE: dict[str, str] = {
    "get_tools": (
        "Bub 0.6 has no provide_tools hook: tools come from a process-global registry "
        "snapshotted when the agent is built; an implementation named provide_tools is "
        "accepted as an unspecified hook and never called"
    ),
}
"""Framework actions Bub 0.6 has no counterpart for, with the reason."""


_PLUGGY_OPTIONS = frozenset({"tryfirst", "trylast", "specname", "wrapper", "hookwrapper",
                             "optionalhook"})
"""The options of pluggy's ``hookimpl`` marker."""


class NotApplicable(BaseException):
    """Bub lacks what the fixture asks for. A BaseException so the runner lets it through."""


def _forward_loguru_to_logging() -> None:
    """Bub logs through loguru; the runner reads the standard ``logging`` records.

    Each loguru record of Bub's own modules (``bub``, ``bub.*``) becomes a ``logging``
    record of the same level and message (its first line is what fixtures compare),
    instead of loguru's default stderr output, so fixtures can check what Bub itself
    logs. Records of other modules, a plugin's included, are not forwarded: under Bub they
    go to loguru's handlers only, never to ``logging``
    (``reference.difference.bub-loguru-to-logging``); here they are dropped, which keeps
    the run's output to the classification.
    """

    def sink(message: Any) -> None:
        record = message.record
        logging.getLogger(record["name"] or "bub").log(record["level"].no, record["message"])

    def bub_own(record: Any) -> bool:
        name = record["name"] or ""
        return name == "bub" or name.startswith("bub.")

    logger.remove()
    logger.add(sink, level="DEBUG", format="{message}", filter=bub_own)


_forward_loguru_to_logging()
_CONFIG_DIR = tempfile.TemporaryDirectory(prefix="spec-bub-config-")
"""Where each framework's config file lives (so Bub's home is never read); removed at exit."""


class BubAdapter:
    name = "bub"
    protocol = 1

    @staticmethod
    def supports(requirement: str) -> bool:
        """``group:bub``: Bub loads plugins from its own entry point group; ``bub``: Bub's
        own package is there (it is the reference); ``media``: republic, Bub's own
        dependency, makes the media objects."""
        return requirement in ("group:bub", "bub", "media")

    def mark(self, function: Callable[..., Any], options: dict[str, Any]) -> Callable[..., Any]:
        """pluggy's marker; an option only hookline has (`fail_closed`) is left out, so
        the reference does what it does without it."""
        known = {key: value for key, value in options.items() if key in _PLUGGY_OPTIONS}
        return hookimpl(**known)(function)

    def new_kernel(self) -> BubKernel:
        bub_values.forget_registered()  # the previous fixture's tools
        return BubKernel(self._framework())

    def new_framework(self) -> BubFrameworkUnderTest:
        bub_values.forget_registered()
        return BubFrameworkUnderTest(self._framework())

    @staticmethod
    def log(group: str, level: str, message: str) -> None:
        """A ``bub`` plugin logs through loguru."""
        if group != "bub":
            raise ValueError(f"Bub reads only the bub entry point group, not {group!r}")
        bub_values.log(level, message)

    @staticmethod
    def _framework() -> BubFramework:
        framework = BubFramework(config_file=Path(_CONFIG_DIR.name) / "config.yml")
        framework.workspace = Path(WORKSPACE)
        return framework

    # -- values --------------------------------------------------------------------------

    def make(self, tag: str, data: dict[str, Any]) -> Any:
        """Build a Bub value from a fixture tag; see spec/README.md for the tags."""
        value = data["value"]
        data.pop("group", None)  # Bub's own types are what this adapter makes anyway
        if tag in bub_values.TAGS:
            return bub_values.make(tag, data)
        if tag == "replace":
            return dataclasses.replace(value, **data["fields"])
        if tag == "tool":
            return Tool(name=value, handler=lambda: None, description=data.get("tag", ""))
        if tag == "sidecar":
            return _Sidecar(value, data.get("tag", ""))
        if tag == "turn":
            counts = {"running_count": 0, "pending_count": 0, "steering_count": 0, **value}
            # Bub's snapshot stores is_running; its channel manager derives it the same way.
            return TurnSnapshot(is_running=counts["running_count"] > 0, **counts)
        if tag == "tape_context":
            anchor = value.get("anchor", "$last_anchor")
            return TapeContext(anchor=LAST_ANCHOR if anchor == "$last_anchor" else anchor,
                               state=dict(value.get("state", {})))
        if tag == "environment":
            return _SpecEnvironment(value, data["on_close"])
        if tag == "stream":
            return _stream(value, data["on_close"], data.get("raises"))
        if tag == "llm_request":
            fields = dict(value)
            fields["tool_names"] = tuple(fields.get("tool_names", ()))
            return bub_events.LLMCallRequest(**fields)
        if tag == "llm_result":
            return bub_events.LLMCallResult(**value)
        if tag == "tool_call":
            return bub_events.ToolCall(**value)
        if tag == "tool_result":
            return bub_events.ToolCallResult(**value)
        if tag == "image":
            return republic.image(value)
        raise ValueError(f"the bub adapter cannot make ${tag}")

    def describe(self, value: Any) -> Any:
        """Plain data for Bub's values, in the shapes spec/README.md lists."""
        return describe_value(value, _BUB_KINDS)


_SpecEnvironment = _environment_class(Environment)
_BUB_KINDS = ContractKinds(
    named=(_Sidecar, Channel), tool=Tool, environment=Environment,
    is_media=lambda value: isinstance(value, republic.Image | republic.Audio | republic.Video),
    model_options=ModelOptions, tape_context=TapeContext, last_anchor=LAST_ANCHOR)


def _stream(events: list[dict[str, Any]], on_close: Callable[[], None],
            error: BaseException | None) -> AsyncStreamEvents:
    async def source() -> Any:
        for event in events:
            yield StreamEvent(event["kind"], dict(event.get("data", {})))
        if error is not None:
            raise error

    async def closed() -> None:
        on_close()

    return AsyncStreamEvents(source(), on_close=closed)


class _EmptyTape:
    """A tape with no entries and an empty state (what ``prepare_tools`` reads)."""

    def __init__(self) -> None:
        self.context = types.SimpleNamespace(state={})

    def query(self) -> Any:
        return _AnyQuery()

    async def search(self, query: Any) -> list[Any]:
        return []


class _AnyQuery:
    def kinds(self, *kinds: str) -> _AnyQuery:
        return self


def _bub_agent_class() -> type:
    """``bub.builtin.agent.BubAgent``, imported without registering the builtin's settings.

    Importing the builtin agent imports ``bub.builtin.settings``, which adds the builtin's
    config classes to Bub's process-wide ``configure.CONFIG_MAP``; ``collect_onboard_config``
    validates against every class there. The frameworks under test have no builtin plugin,
    so what the import added is taken out again.
    """
    from bub import configure

    before = {section: list(classes) for section, classes in configure.CONFIG_MAP.items()}
    from bub.builtin.agent import BubAgent

    configure.CONFIG_MAP.clear()
    configure.CONFIG_MAP.update(before)
    return BubAgent


class BubKernel:
    """A BubFramework's plugin manager and hook runtime, as the runner's KernelUnderTest."""

    def __init__(self, framework: BubFramework) -> None:
        self.framework = framework
        self.plugin_manager = framework.plugin_manager
        self.runtime = framework._hook_runtime  # Bub's dispatcher; the framework calls only it

    def register(self, plugin: object, name: str) -> None:
        self.plugin_manager.register(plugin, name=name)

    def register_from_group(self, plugin: object, name: str, group: str) -> None:
        """What ``BubFramework.load_hooks`` does with an entry point of the ``bub`` group:
        a callable is called with the framework, the result registered under the name."""
        if group != "bub":
            raise ValueError(f"Bub reads only the bub entry point group, not {group!r}")
        self.register(plugin(self.framework) if callable(plugin) else plugin, name)

    def unregister(self, name: str) -> None:
        self.plugin_manager.unregister(name=name)

    def plugin_names(self) -> list[str]:
        return [name for name, _ in self.plugin_manager.list_name_plugin()]

    def execution_order(self, hook: str) -> list[Callable[..., Any]]:
        return [impl.function for impl in self.runtime._iter_hookimpls(hook)]

    def stored_order(self, hook: str) -> list[Callable[..., Any]]:
        """pluggy's stored list, which ``bub hooks`` (HookRuntime.hook_report) shows."""
        caller = getattr(self.plugin_manager.hook, hook, None)
        return [impl.function for impl in caller.get_hookimpls()] if caller is not None else []

    def unknown_hooks(self) -> list[dict[str, Any]]:
        return []  # Bub records nothing about implementations of unknown hooks

    def dispatch(self, call: str, hook: str, kwargs: dict[str, Any]) -> Any:
        if call.startswith("notify_error"):
            # Bub's notify_error takes message as a required keyword; every call site
            # passes one, None when there is no envelope.
            return getattr(self.runtime, call)(**{"message": None, **kwargs})
        return getattr(self.runtime, call)(hook, **kwargs)


class BubFrameworkUnderTest(BubKernel):
    """A BubFramework as the runner's FrameworkUnderTest; each method is one Bub call."""

    def process_inbound(self, inbound: Any, stream_output: bool) -> Any:
        return self.framework.process_inbound(inbound, stream_output=stream_output)

    def running(self) -> Any:
        return self.framework.running()

    def get_tools(self) -> list[Any]:
        raise NotApplicable(NOT_APPLICABLE["get_tools"])

    async def offered_tools(self) -> list[str]:
        """What Bub's builtin agent offers the model at a turn's first step:
        ``BubAgent.prepare_tools`` on a stand-in agent whose tool table is what a new
        ``BubAgent`` takes (``bub.tools.REGISTRY``, by name, as ``Agent.__init__`` builds
        it) and a tape with an empty state and no entries (no code mode, no tool loaded
        through ``tool.describe`` yet). The method reads only the agent's tool table and
        the tape; a real BubAgent needs hooks the fixtures do not have."""
        from bub.core.tools import REGISTRY

        agent_class = _bub_agent_class()
        agent = agent_class.__new__(agent_class)
        agent.tools = {tool.name: tool for tool in REGISTRY.values()}
        offered = await agent_class.prepare_tools(agent, _EmptyTape(), None)
        return [tool.name for tool in offered]

    def get_channels(self, message_handler: Any) -> list[Any]:
        return list(self.framework.get_channels(message_handler).values())

    async def run_channels(self, selection: str | None, environ: dict[str, str]) -> list[str]:
        """What ``bub gateway`` runs: Bub's ``ChannelManager.listen_and_run`` (which enters
        ``running()`` itself), cancelled as soon as every channel it selects is started;
        returns their names in selection order. The selection is ``selection`` split at
        commas (``--enable-channel``) when it is not blank, else Bub's
        ``enabled_channels`` setting, read with ``environ`` set (``BUB_ENABLED_CHANNELS``)
        and the framework's empty config file loaded again (so no earlier setting is
        cached)."""
        import asyncio

        from bub import configure
        from bub.channels.manager import ChannelManager

        saved = {name: os.environ.get(name) for name in environ}
        os.environ.update(environ)
        try:
            configure.load(self.framework.config_file)
            explicit = selection is not None and selection.strip()
            manager = ChannelManager(self.framework,
                                     enabled_channels=selection.split(",") if explicit else None)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        selected = [channel.name for channel in manager.enabled_channels()]
        task = asyncio.ensure_future(manager.listen_and_run())
        # listen_and_run keeps the channels it started in _started_channels; once all are
        # there it waits for messages, and a cancellation there ends it normally.
        for _ in range(1000):
            started = manager._started_channels
            if task.done() or (started is not None and len(started) == len(selected)):
                break
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return selected

    def get_tape_sidecars(self) -> Any:
        return self.framework.get_tape_sidecars()

    def get_system_prompt(self, prompt: Any, state: dict[str, Any]) -> str:
        """Fixtures give the prompt in the legacy form the hooks receive (hookline's
        get_system_prompt takes that form; its agent converts first). Bub's takes user
        content and converts it itself, so the prompt goes through Bub's ``to_content``
        (which leaves content as it is)."""
        return self.framework.get_system_prompt(to_content(prompt), state)

    def build_tape_context(self) -> Any:
        return self.framework.build_tape_context()

    def collect_onboard_config(self, current_config: Any, plugin: str | None) -> dict:
        """Bub reads the current config from its loaded config file, so the adapter writes
        ``current_config`` to the framework's config file and loads it first."""
        import yaml
        from bub import configure

        config_file = self.framework.config_file
        config_file.write_text(yaml.safe_dump(current_config or {}), encoding="utf-8")
        try:
            configure.load(config_file)
        finally:
            config_file.unlink()
        return self.framework.collect_onboard_config(plugin_name=plugin)

    def get_model_options(self, session_id: str, workspace: Any) -> Any:
        return self.framework.get_model_options(session_id=session_id, workspace=workspace)

    def admit_message(self, session_id: str, message: Any, turn: Any) -> Any:
        return self.framework.admit_message(session_id=session_id, message=message, turn=turn)

    def get_environment(self, session_id: str) -> Any:
        return self.framework.get_environment(session_id)

    def get_tape_store(self) -> Any:
        return self.framework.get_tape_store()

    def get_steering_inbox(self) -> Any:
        return self.framework.get_steering_inbox()

    async def steer_message(self, message: Any, state: dict[str, Any], reason: str | None) -> Any:
        """Bub's steer_message takes the session id; its channel manager passes the id
        ``resolve_session`` gave the message, as this does."""
        session_id = await self.framework.resolve_session(message)
        return await self.framework.steer_message(message=message, session_id=session_id,
                                                  state=state, reason=reason)

    def continue_prompt(self, prompt: Any, tape: Any, state: Any) -> Any:
        return self.framework.continue_prompt(prompt=prompt, tape=tape, state=state)

    async def step_finished(self, prompt: Any, status: str, tape: Any, stream_state: Any,
                            step: int) -> Any:
        """Bub 0.6 has no adapter reacting to StepFinished: its agent loop
        (``Agent._run_steps``) calls ``BubAgent.continue_prompt(tape, prompt, state)`` for a
        step that continues, right before emitting StepFinished(status="continue"), and
        for no other status. That method only reads the agent's ``framework``, so it is
        called on a stand-in agent: a real BubAgent needs a build_tape_context hook the
        fixtures do not have. Its answer is user content (``[text]``); the text is returned.
        """
        if status != "continue":
            return None
        agent = types.SimpleNamespace(framework=self.framework)
        content = await _bub_agent_class().continue_prompt(agent, tape, prompt, stream_state)
        if content is None:
            return None
        (text,) = content
        return text

    async def before_llm_call(self, request: Any, state: dict[str, Any]) -> Any:
        request, decision = await self.framework.get_agent_hooks().before_llm_call(request, state)
        return request if decision is None else decision

    def after_llm_call(self, request: Any, result: Any, state: dict[str, Any]) -> Any:
        return self.framework.get_agent_hooks().after_llm_call(request, result, state)

    def before_tool_call(self, call: Any, state: dict[str, Any]) -> Any:
        return self.framework.get_agent_hooks().before_tool_call(call, state)

    def after_tool_call(self, call: Any, result: Any, state: dict[str, Any]) -> Any:
        return self.framework.get_agent_hooks().after_tool_call(call, result, state)
