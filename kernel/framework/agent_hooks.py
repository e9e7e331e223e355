"""The bridge between the agent loop's events and the plugin interception hooks.

``PluginAgentHooks`` runs the four interception hooks (before/after LLM and tool calls)
with their own rules: implementations are isolated (an ``Exception`` is logged and the
chain goes on, because blocking a call must be an explicit decision, never a crash), and
the before-hooks are chained so each implementation sees what the previous one left.
A guard marked ``@hookimpl(fail_closed=True)`` on ``before_tool_call`` or
``before_llm_call`` opts out of that isolation: its exception refuses the call.
``AgentPlugins`` is what an agent attaches to its EventBus: the adapter plus the
``continue_prompt`` trigger on ``StepFinished`` events.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .._dispatch import HookImpl, Registry
from .._util import get_logger
from ..errors import other_copy_note
from ..events import (
    EventBus,
    LLMCallFinished,
    LLMCallStarted,
    RunFinished,
    StepFinished,
    StepStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from ..interception import (
    LLMCallDecision,
    LLMCallRequest,
    LLMCallResult,
    ToolCall,
    ToolCallDecision,
    ToolCallResult,
)
from ..prompt import LegacyPrompt, to_legacy_prompt

__all__ = ["AgentPlugins", "PluginAgentHooks"]

_LLM_EXPECTED = "LLMCallRequest | LLMCallDecision | None"
_TOOL_EXPECTED = "ToolCallDecision | None"


class PluginAgentHooks:
    """Runs the interception hooks of the framework's plugins for one agent or many.

    Implementations are read from the registry on every call, so plugins registered or
    removed after the agent was built take effect on its next call.
    """

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    # -- the four hooks ------------------------------------------------------------------

    async def before_llm_call(
        self, request: LLMCallRequest, state: dict[str, Any]
    ) -> tuple[LLMCallRequest, LLMCallDecision | None]:
        """The request as the chain left it, and the finish decision that answers instead
        of the provider (None: send the request). The reference's shape; the before-hooks
        both return ``(payload, decision)``, the after-hooks None."""
        for impl in self._impls("before_llm_call"):
            value = await self._call(impl, {"request": request, "state": state})
            if value is _FAILED_CLOSED:
                return request, LLMCallDecision.finish(_refusal(impl, "the model was not called"))
            if value is None:
                continue
            if isinstance(value, LLMCallDecision):
                return request, value
            if isinstance(value, LLMCallRequest):
                request = value
            else:
                _bad_return(impl, value, _LLM_EXPECTED)
                if _closed(impl):
                    return request, LLMCallDecision.finish(
                        _refusal(impl, "the model was not called"))
        return request, None

    async def after_llm_call(
        self, request: LLMCallRequest, result: LLMCallResult, state: dict[str, Any]
    ) -> None:
        """Tell every implementation how a provider call ended; return values are ignored."""
        kwargs = {"request": request, "result": result, "state": state}
        for impl in self._impls("after_llm_call"):
            await self._call(impl, kwargs)

    async def before_tool_call(
        self, call: ToolCall, state: dict[str, Any]
    ) -> tuple[ToolCall, ToolCallDecision]:
        """The call as the chain left it, and what to do with it (``(payload, decision)``,
        as ``before_llm_call``).

        A ``proceed(arguments)`` answer replaces the call with a copy carrying a copy of
        the arguments, so later implementations (and the tool) see them and the plugin
        cannot change them afterwards by editing its own dict.
        """
        for impl in self._impls("before_tool_call"):
            value = await self._call(impl, {"call": call, "state": state})
            if value is _FAILED_CLOSED:
                return call, ToolCallDecision.deny(_refusal(impl, "the tool was not run"))
            if value is None:
                continue
            wrong = _wrong_tool_answer(value)
            if wrong is not None:
                _bad_return(impl, *wrong)
                if _closed(impl):
                    return call, ToolCallDecision.deny(_refusal(impl, "the tool was not run"))
                continue
            if value.action != "proceed":
                return call, value
            if value.arguments is None:
                continue
            call = dataclasses.replace(call, arguments=dict(value.arguments))
        return call, ToolCallDecision.proceed(call.arguments)

    async def after_tool_call(
        self, call: ToolCall, result: ToolCallResult, state: dict[str, Any]
    ) -> None:
        """Run every implementation over the one shared, editable result."""
        kwargs = {"call": call, "result": result, "state": state}
        for impl in self._impls("after_tool_call"):
            await self._call(impl, kwargs)

    # -- event bus -----------------------------------------------------------------------

    def subscribe(self, bus: EventBus | None = None) -> EventBus:
        """Register the four handlers on ``bus`` (a new bus when None) and return it.

        Handlers added to the bus later run after these, and a decision set here stops
        delivery to them.
        """
        bus = EventBus() if bus is None else bus
        bus.on(LLMCallStarted, self._on_llm_call_started)
        bus.on(LLMCallFinished, self._on_llm_call_finished)
        bus.on(ToolCallStarted, self._on_tool_call_started)
        bus.on(ToolCallFinished, self._on_tool_call_finished)
        return bus

    def unsubscribe(self, bus: EventBus) -> None:
        """Remove what ``subscribe`` registered on ``bus``."""
        bus.off(LLMCallStarted, self._on_llm_call_started)
        bus.off(LLMCallFinished, self._on_llm_call_finished)
        bus.off(ToolCallStarted, self._on_tool_call_started)
        bus.off(ToolCallFinished, self._on_tool_call_finished)

    async def _on_llm_call_started(self, event: LLMCallStarted) -> None:
        # The event keeps the final request even on a finish, so the step records the
        # model the chain chose.
        event.request, decision = await self.before_llm_call(event.request, event.state)
        if decision is not None:
            event.decision = decision

    async def _on_llm_call_finished(self, event: LLMCallFinished) -> None:
        await self.after_llm_call(event.request, event.result, event.state)

    async def _on_tool_call_started(self, event: ToolCallStarted) -> None:
        event.call, event.decision = await self.before_tool_call(event.call, event.state)

    async def _on_tool_call_finished(self, event: ToolCallFinished) -> None:
        await self.after_tool_call(event.call, event.result, event.state)

    # -- internals -----------------------------------------------------------------------

    def _impls(self, hook_name: str) -> tuple[HookImpl, ...]:
        return self.registry.hook_impls(hook_name)

    async def _call(self, impl: HookImpl, kwargs: Mapping[str, Any]) -> Any:
        """Call one implementation; an Exception (raised or awaited) is logged and means None,
        or ``_FAILED_CLOSED`` for a before-hook guard marked ``fail_closed``.

        BaseExceptions such as cancellation are deliberately not caught.
        """
        try:
            value = impl.call(kwargs, self.registry.tracer)
            if inspect.isawaitable(value):
                value = await value
        except Exception:
            # Isolated by the contract (the agent goes on): a warning, as the reference logs
            # it, with the traceback so the plugin's author can find the fault.
            closed = _closed(impl)
            get_logger(__name__).warning(
                "hook.agent_hook_failed hook=%s adapter=%s%s", impl.hook_name, impl.plugin_name,
                " fail_closed=denied" if closed else "", exc_info=True,
            )
            return _FAILED_CLOSED if closed else None
        return value


FAIL_CLOSED_HOOKS = frozenset({"before_llm_call", "before_tool_call"})
"""The hooks on which ``@hookimpl(fail_closed=True)`` means something: a guard's failure
refuses the call it guards."""

def _wrong_tool_answer(value: Any) -> tuple[Any, str] | None:
    """What is wrong with a ``before_tool_call`` answer (the value, and what was expected),
    or None: a plugin may break the declared types."""
    if not isinstance(value, ToolCallDecision):
        return value, _TOOL_EXPECTED
    arguments: Any = value.arguments
    if arguments is not None and not isinstance(arguments, Mapping):
        return arguments, "ToolCallDecision.arguments: dict"
    return None


def _closed(impl: HookImpl) -> bool:
    """A guard whose failure (an exception, or an answer of the wrong type) refuses the
    call it guards."""
    return impl.opts.fail_closed and impl.hook_name in FAIL_CLOSED_HOOKS


_FAILED_CLOSED: Any = object()
"""What ``_call`` returns for a fail-closed guard that raised."""


def _refusal(impl: HookImpl, what: str) -> str:
    """The text a refused call carries: whose guard failed, never the exception's text
    (which may hold what the guard was protecting)."""
    return (f"refused: the guard {impl.plugin_name!r} ({impl.hook_name}, fail_closed) failed; "
            f"{what}")


def _bad_return(impl: HookImpl, value: Any, expected: str) -> None:
    get_logger(__name__).warning(
        "hook.agent_hook_bad_return hook=%s adapter=%s got=%s expected=%s%s",
        impl.hook_name,
        impl.plugin_name,
        type(value).__name__,
        expected,
        other_copy_note(value, expected),
    )


class AgentPlugins:
    """What an agent attaches to its EventBus to let the framework's plugins take part.

    Besides the interception adapter it triggers ``continue_prompt``: a step's prompt is
    remembered from its ``StepStarted`` and, when the matching ``StepFinished`` says
    ``continue``, the hook's answer is put on ``event.next_prompt`` for the agent loop.
    """

    def __init__(self, agent_hooks: PluginAgentHooks,
                 continue_prompt: Callable[..., Awaitable[Any]]) -> None:
        self.agent_hooks = agent_hooks
        self.continue_prompt = continue_prompt
        """The framework's ``continue_prompt`` stage (its signature, its checks)."""
        # (id of the run's tape, step) -> that step's prompt. Entries live from a step's
        # start to its end (or the run's end), while the tape is alive, so ids are unique.
        self._prompts: dict[tuple[int, int], list[Any] | None] = {}

    def attach(self, bus: EventBus | None = None) -> EventBus:
        """Subscribe the adapter and the continue_prompt trigger to ``bus`` (new if None)."""
        bus = self.agent_hooks.subscribe(bus)
        bus.on(StepStarted, self._on_step_started)
        bus.on(StepFinished, self._on_step_finished)
        bus.on(RunFinished, self._on_run_finished)
        return bus

    def detach(self, bus: EventBus) -> None:
        """Remove what ``attach`` registered on ``bus``."""
        self.agent_hooks.unsubscribe(bus)
        bus.off(StepStarted, self._on_step_started)
        bus.off(StepFinished, self._on_step_finished)
        bus.off(RunFinished, self._on_run_finished)

    def _on_step_started(self, event: StepStarted) -> None:
        self._prompts[(id(event.tape), event.step)] = event.prompt

    async def _on_step_finished(self, event: StepFinished) -> None:
        content = self._prompts.pop((id(event.tape), event.step), None)
        if event.status != "continue":
            return
        prompt: LegacyPrompt | None = None if content is None else to_legacy_prompt(content)
        # A non-str answer raises TypeError here: a contract error, so it is not isolated.
        event.next_prompt = await self.continue_prompt(
            prompt=prompt, tape=event.tape, state=event.stream_state
        )

    def _on_run_finished(self, event: RunFinished) -> None:
        # A run cancelled mid-step never finishes that step: drop what it left behind.
        tape_id = id(event.tape)
        for key in [key for key in self._prompts if key[0] == tape_id]:
            del self._prompts[key]
