"""``Framework``: the registry, the runtime and the stage modules, composed.

It owns the application-level resources of the contract: the ``running()`` scope
(lifespans, tape store, steering inbox), the per-session environment cache (bounded, see
``envcache``), and the
collectors for tools, channels, sidecars, system prompt, tape context, onboarding,
model options and admission.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, cast

from .._dispatch import HookImpl, HookReport, Registry
from .._dispatch.plan import usable_sync
from .._util import dedupe_by_name, get_logger
from ..channels import AdmitDecision, Channel, ChannelRouter, TurnSnapshot
from ..envelope import get_field
from ..environment import Environment
from ..errors import bad_return
from ..hooks import HOOK_SPECS, IMPL_PROJECTS
from ..models import ModelOptions, merge_model_options
from ..tape import TapeContext
from ..tools import Tool
from ..turn import TurnResult
from .agent_hooks import AgentPlugins, PluginAgentHooks
from .envcache import EnvironmentCache, Evicted
from .loading import PluginLoader, PluginStatus
from .model_stage import HookRuntime
from .pipeline import TurnPipeline

__all__ = ["Framework"]


class Framework:
    """Everything a host needs to run turns through plugins.

    ``Framework()`` registers nothing; ``load_hooks()`` registers the builtin plugin and
    the installed entry points. Use turns inside ``async with framework.running():``.
    """

    def __init__(self, workspace: str | os.PathLike[str] | None = None) -> None:
        self.workspace = Path(workspace if workspace is not None else os.getcwd()).resolve()
        self.registry = Registry(HOOK_SPECS, projects=IMPL_PROJECTS)
        self.runtime = HookRuntime(self.registry)
        self.agent_hooks = PluginAgentHooks(self.registry)
        self.agent_plugins = AgentPlugins(self.agent_hooks, self.continue_prompt)
        self.router: ChannelRouter | None = None
        """Bound channel router (``wrap_stream``, ``dispatch``): the channel manager while it
        runs, or the command line's printer; None when nothing is bound."""
        self._pipeline = TurnPipeline(self.runtime, self.registry, self)
        self._loader = PluginLoader(self)
        self._tape_store: Any = None
        self._steering_inbox: Any = None
        self._providers: dict[str, HookImpl | None] = {}
        """The implementations that gave the scope its tape store and steering inbox."""
        self.environments = EnvironmentCache()
        """Per-session environments; set ``max_size`` / ``idle_seconds`` to change bounds."""
        self.extensions: dict[str, Any] = {}
        """State a plugin group keeps per framework, under the group's name (the Bub layer
        keeps its group here), so that nothing sets undeclared attributes."""
        self._in_scope = False

    # -- plugins -----------------------------------------------------------------------

    def load_hooks(self) -> None:
        """Register the builtin plugin (if the builtins package offers one), then every
        entry point of the ``hookline`` group, recording each plugin's status."""
        self._loader.load()

    def plugin_status(self) -> dict[str, PluginStatus]:
        return dict(self._loader.status)

    def retire_plugin(self, name: str, error: BaseException) -> None:
        """Unregister a plugin that failed at run time and record why in its status."""
        self._loader.retire(name, error)

    def hook_report(self) -> HookReport:
        return self.runtime.hook_report()

    # -- turn --------------------------------------------------------------------------

    async def process_inbound(self, inbound: Any, stream_output: bool = False) -> TurnResult:
        """Run one turn for an inbound envelope (a mapping or any object)."""
        return await self._pipeline.process_inbound(inbound, stream_output)

    async def resolve_session(self, message: Any) -> str:
        return await self._pipeline.resolve_session(message)

    async def build_state(self, message: Any, session_id: str) -> dict[str, Any]:
        return await self._pipeline.build_state(message, session_id)

    async def build_prompt(self, message: Any, session_id: str, state: dict[str, Any]) -> list[Any]:
        return await self._pipeline.build_prompt(message, session_id, state)

    async def continue_prompt(self, prompt: Any, tape: Any, state: Any) -> str | None:
        """The next user message after a ``continue`` step, or None."""
        impl, value = await self.runtime.call_first_each(
            "continue_prompt", prompt=prompt, tape=tape, state=state
        )
        if impl is not None and not isinstance(value, str):
            raise bad_return(impl, "str or None", value)
        return cast("str | None", value)

    async def notify_error(self, stage: str, error: BaseException, message: Any = None) -> None:
        await self.runtime.notify_error(stage, error, message)

    # -- the running() scope -----------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[AsyncExitStack]:
        """Enter lifespans, then the tape store, then the steering inbox; on exit (also on
        error) clear them, close cached environments, and exit what was entered in
        reverse order. Yields an exit stack for the host's own resources."""
        if self._in_scope:
            raise RuntimeError(
                "running() is already active on this framework; scopes must not overlap"
            )
        self._in_scope = True
        # Environments cached outside a scope belong to the host; this scope starts afresh
        # and closes only what it cached.
        self.environments.drain()
        try:
            async with AsyncExitStack() as stack:
                try:
                    for lifespan, value in self.runtime.call_each_sync("provide_lifespan"):
                        await _enter_blamed(stack, lifespan, value)
                    provider, store = self.runtime.call_first_each_sync("provide_tape_store")
                    self._providers["provide_tape_store"] = provider
                    self._tape_store = await _enter_blamed(stack, provider, store)
                    provider, inbox = self.runtime.call_first_each_sync("provide_steering_inbox")
                    self._providers["provide_steering_inbox"] = provider
                    self._steering_inbox = await _enter_blamed(stack, provider, inbox)
                except BaseException:
                    self._tape_store = self._steering_inbox = None
                    self._providers.clear()
                    raise
                stack.push_async_callback(self._leave_scope)
                yield stack
        finally:
            self._in_scope = False

    async def _leave_scope(self) -> None:
        self._tape_store = self._steering_inbox = None
        self._providers.clear()
        for session_id, environment in self.environments.drain():
            if environment is not None:
                await _close_quietly(environment, session_id)

    @property
    def in_scope(self) -> bool:
        """Whether ``running()`` is active, so a helper knows whether to open a scope."""
        return self._in_scope

    def get_tape_store(self) -> Any:
        """The scope's tape store, or None outside ``running()``."""
        return self._tape_store

    def get_steering_inbox(self) -> Any:
        """The scope's steering inbox, or None outside ``running()``."""
        return self._steering_inbox

    def resource_error(self, hook_name: str, expected: str, hint: str = "") -> TypeError:
        """The TypeError for the scope's ``provide_tape_store`` or ``provide_steering_inbox``
        value when a host finds it is not ``expected``, naming the plugin and function that
        gave it (the kernel hands these values on unchecked, as the reference does)."""
        value = (self._tape_store if hook_name == "provide_tape_store"
                 else self._steering_inbox)
        impl = self._providers.get(hook_name)
        if impl is None:
            return TypeError(f"hook.{hook_name} must return {expected}; got "
                             f"{type(value).__name__}{hint}")
        return bad_return(impl, expected, value, hint)

    def cached_environment(self, session_id: str, default: Any = None) -> Any:
        """The environment already cached for a session, without asking providers."""
        return self.environments.get(session_id, default)

    async def get_environment(self, session_id: str) -> Environment | None:
        """The session's environment, created by provide_environment once per scope and
        kept while it is used (see ``EnvironmentCache`` for the bounds)."""
        if session_id in self.environments:
            return cast("Environment | None", self.environments.get(session_id))
        impl, value = await self.runtime.call_first_each(
            "provide_environment", session_id=session_id, workspace=self.workspace
        )
        if impl is not None and not isinstance(value, Environment):
            raise bad_return(impl, "Environment or None", value)
        if session_id in self.environments:  # a concurrent first request won the race
            winner: Environment | None = self.environments.get(session_id)
            if value is not None and value is not winner:
                await _close_quietly(value, session_id)
            return winner
        await self._close_evicted(self.environments.put(session_id, value))
        return cast("Environment | None", value)

    async def close_idle_environments(self) -> int:
        """Close the environments idle for longer than ``environments.idle_seconds`` (and
        any over the bound), except those held by running turns; returns how many went."""
        evicted = self.environments.evict()
        await self._close_evicted(evicted)
        return len(evicted)

    async def _close_evicted(self, evicted: Evicted) -> None:
        # Outside a scope the environments belong to the host: forgotten, never closed.
        if not self._in_scope:
            return
        for session_id, environment in evicted:
            if environment is not None:
                await _close_quietly(environment, session_id)

    async def steer_message(self, message: Any, state: dict[str, Any],
                            reason: str | None = None) -> bool:
        """Queue a message into the running turn's inbox; False when there is no inbox."""
        inbox = self._steering_inbox
        if inbox is None:
            return False
        session_id = await self.resolve_session(message)
        state.setdefault("session_id", session_id)
        if reason:
            context = get_field(message, "context") or {}
            # Dicts and frozen envelopes refuse attributes: the reason is then skipped.
            with contextlib.suppress(AttributeError, TypeError):
                message.context = {**context, "steering_reason": reason}
        await inbox.enqueue_message(message, state)
        return True

    # -- collectors --------------------------------------------------------------------

    def get_tools(self) -> list[Tool]:
        """Tools from every provider, one per name, the first in priority order winning."""
        tools = self._collect_lists("provide_tools", "list of Tool")
        return dedupe_by_name(tools, key=lambda tool: tool.name)

    def get_channels(self, message_handler: Callable[[Any], Any]) -> dict[str, Channel]:
        """Channels by name, the first in priority order winning a name."""
        channels = self._collect_lists(
            "provide_channels", "list of Channel", message_handler=message_handler
        )
        return {c.name: c for c in dedupe_by_name(channels, key=lambda c: c.name)}

    def get_tape_sidecars(self) -> list[Any]:
        """One sidecar per name, the first in priority order winning; None means none."""
        sidecars = [_require_name(impl, s) for impl, s in
                    self.runtime.call_each_sync("provide_tape_sidecar") if s is not None]
        return dedupe_by_name(sidecars, key=lambda sidecar: sidecar.name)

    def get_system_prompt(self, prompt: Any, state: dict[str, Any]) -> str:
        """Truthy blocks, lowest priority first, joined by a blank line."""
        blocks = []
        for impl, value in reversed(
            self.runtime.call_each_sync("system_prompt", prompt=prompt, state=state)
        ):
            if not value:
                continue
            if not isinstance(value, str):
                raise bad_return(impl, "str", value)
            blocks.append(value)
        return "\n\n".join(blocks)

    def build_tape_context(self) -> TapeContext:
        impl, value = self.runtime.call_first_each_sync("build_tape_context")
        if impl is None:
            raise TypeError(
                "hook.build_tape_context must return TapeContext; no plugin returned one "
                "(register a plugin implementing build_tape_context)"
            )
        if not isinstance(value, TapeContext):
            raise bad_return(impl, "TapeContext", value)
        return value

    def collect_onboard_config(
        self, current_config: Mapping[str, Any] | None = None, plugin: str | None = None
    ) -> dict[str, Any]:
        """Merge every onboard_config fragment, lowest priority first, into one config."""
        impls: Iterable[HookImpl] = reversed(self.registry.hook_impls("onboard_config"))
        if plugin is not None:
            impls = [impl for impl in impls if impl.plugin_name == plugin]
            if not impls:
                available = sorted({i.plugin_name for i in
                                    self.registry.hook_impls("onboard_config")})
                raise ValueError(
                    f"No onboard_config hook found for plugin {plugin!r}. Available plugins: "
                    f"{', '.join(available) or '(none)'}"
                )
        config = copy.deepcopy(dict(current_config or {}))
        for impl in impls:
            value = impl.call({"current_config": config}, self.registry.tracer)
            if not usable_sync("onboard_config", impl.plugin_name, value) or value is None:
                continue
            if not isinstance(value, dict):
                raise bad_return(impl, "dict or None", value)
            _deep_merge(config, value)
        return config

    async def get_model_options(
        self, session_id: str, workspace: str | os.PathLike[str] | None = None
    ) -> ModelOptions:
        """Model options from every provider merged in priority order; empty options (no
        models, no current model) when nobody answered, as the reference does."""
        where = self.workspace if workspace is None else Path(workspace).expanduser().resolve()
        options = []
        for impl, value in await self.runtime.call_each(
            "provide_model_options", session_id=session_id, workspace=where
        ):
            if value is None:
                continue
            if not isinstance(value, ModelOptions):
                raise bad_return(impl, "ModelOptions or None", value)
            options.append(value)
        return merge_model_options(options) or ModelOptions()

    async def admit_message(
        self, session_id: str, message: Any, turn: TurnSnapshot
    ) -> AdmitDecision | None:
        impl, value = await self.runtime.call_first_each(
            "admit_message", session_id=session_id, message=message, turn=turn
        )
        if impl is not None and not isinstance(value, AdmitDecision):
            raise bad_return(impl, "AdmitDecision or None", value)
        return cast("AdmitDecision | None", value)

    def _collect_lists(self, hook: str, expected: str, **kwargs: Any) -> list[Any]:
        items: list[Any] = []
        for impl, value in self.runtime.call_each_sync(hook, **kwargs):
            if value is None:
                continue
            if not isinstance(value, list | tuple):
                raise bad_return(impl, f"{expected} or None", value)
            for item in value:
                _require_name(impl, item)
            items.extend(value)
        return items


# -- helpers ---------------------------------------------------------------------------


async def _enter(stack: AsyncExitStack, value: Any) -> Any:
    """The maybe-context-manager rule: generators are entered, anything else is as is."""
    if inspect.isasyncgen(value):
        return await stack.enter_async_context(asynccontextmanager(lambda: value)())
    if inspect.isgenerator(value):
        return stack.enter_context(contextmanager(lambda: value)())
    return value


async def _enter_blamed(stack: AsyncExitStack, impl: HookImpl | None, value: Any) -> Any:
    """``_enter`` for one plugin's resource: an exception its code raises when the scope
    starts or stops gets a note naming the plugin, function and hook (the exception itself
    is unchanged)."""
    if impl is None:
        return await _enter(stack, value)
    blame = _ResourceBlame(impl)
    stack.push(blame.after_exit)  # runs after the resource's own exit
    try:
        entered = await _enter(stack, value)
    except Exception as exc:
        blame.note(exc, "started")
        blame.incoming = exc  # already noted: after_exit sees it pass
        raise
    stack.push(blame.before_exit)  # runs before it
    return entered


class _ResourceBlame:
    """Sees the exception going into a resource's exit and the one coming out: a new one
    was raised by the resource itself."""

    def __init__(self, impl: HookImpl) -> None:
        self.impl = impl
        self.incoming: BaseException | None = None

    def before_exit(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        self.incoming = exc
        return False

    def after_exit(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if isinstance(exc, Exception) and exc is not self.incoming:
            self.note(exc, "stopped")
        return False

    def note(self, exc: Exception, moment: str) -> None:
        exc.add_note(f"raised by {self.impl.describe()}, hook {self.impl.hook_name}, when "
                     f"the running() scope {moment}")


async def _close_quietly(environment: Environment, session_id: str) -> None:
    try:
        await environment.close()
    except Exception as exc:
        get_logger(__name__).warning("environment.close_failed session=%s error=%s: %s", session_id,
                       type(exc).__name__, exc)


def _require_name(impl: HookImpl, item: Any) -> Any:
    """Tools, channels and sidecars are de-duplicated by ``name``: it must be a string."""
    if not isinstance(getattr(item, "name", None), str):
        raise TypeError(
            f"hook.{impl.hook_name}: {impl.describe()} returned an item of type "
            f"{type(item).__name__}, which has no string 'name' (each item is de-duplicated "
            f"by it)"
        )
    return item


def _deep_merge(target: dict[str, Any], fragment: Mapping[str, Any]) -> None:
    for key, value in fragment.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _deep_merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
