"""PluginAgentHooks on an event bus (subscribe/unsubscribe) and AgentPlugins' continue_prompt
trigger, run against a real Framework and its registry."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from agent_hooks_support import _call, _request

from hookline.kernel import hookimpl
from hookline.kernel.events import (
    EventBus,
    LLMCallFinished,
    LLMCallStarted,
    RunFinished,
    StepFinished,
    StepStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from hookline.kernel.framework.core import Framework
from hookline.kernel.interception import (
    LLMCallDecision,
    LLMCallRequest,
    LLMCallResult,
    ToolCall,
    ToolCallDecision,
    ToolCallResult,
)

# -- subscribe() -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_subscribe_creates_a_bus_and_routes_every_event(framework: Framework) -> None:
    log: list[str] = []

    class Plugin:
        @hookimpl
        def before_llm_call(self, request: LLMCallRequest) -> LLMCallRequest:
            return dataclasses.replace(request, model="routed:model")

        @hookimpl
        def after_llm_call(self, request: LLMCallRequest, result: LLMCallResult) -> None:
            log.append(f"after_llm {request.model} {result.text}")

        @hookimpl
        def before_tool_call(self, call: ToolCall) -> ToolCallDecision:
            return ToolCallDecision.proceed({"query": "rewritten"})

        @hookimpl
        def after_tool_call(self, call: ToolCall, result: ToolCallResult) -> None:
            log.append(f"after_tool {call.tool}")
            result.result = "edited"

    framework.registry.register(Plugin(), name="plugin")
    bus = framework.agent_hooks.subscribe()
    assert isinstance(bus, EventBus)

    started = await bus.emit(LLMCallStarted(request=_request()))
    assert started.request.model == "routed:model" and started.decision is None
    await bus.emit(LLMCallFinished(request=started.request,
                                   result=LLMCallResult("run-1", text="hello")))
    tool = await bus.emit(ToolCallStarted(call=_call(query="x")))
    assert tool.call.arguments == {"query": "rewritten"}
    assert tool.decision == ToolCallDecision.proceed({"query": "rewritten"})
    finished = await bus.emit(ToolCallFinished(
        call=tool.call, result=ToolCallResult("run-1", "search", tool.call.arguments)))
    assert finished.result.result == "edited"
    assert log == ["after_llm routed:model hello", "after_tool search"]


@pytest.mark.anyio
async def test_finish_on_the_bus_stops_later_handlers(framework: Framework) -> None:
    later: list[Any] = []

    class Router:
        @hookimpl(tryfirst=True)
        def before_llm_call(self, request: LLMCallRequest) -> LLMCallRequest:
            return dataclasses.replace(request, model="cheap:model")

    class Cache:
        @hookimpl
        async def before_llm_call(self, request: LLMCallRequest) -> LLMCallDecision:
            return LLMCallDecision.finish("from cache")

    framework.registry.register(Cache(), name="cache")
    framework.registry.register(Router(), name="router")
    bus = EventBus()
    assert framework.agent_hooks.subscribe(bus) is bus
    bus.on(LLMCallStarted, later.append)
    event = await bus.emit(LLMCallStarted(request=_request()))

    assert event.decision == LLMCallDecision.finish("from cache")
    assert event.stopped and later == []
    assert event.request.model == "cheap:model"  # the request as the chain left it


@pytest.mark.anyio
async def test_deny_on_the_bus_stops_later_handlers(framework: Framework) -> None:
    later: list[Any] = []

    class Policy:
        @hookimpl
        def before_tool_call(self, call: ToolCall) -> ToolCallDecision:
            return ToolCallDecision.deny("no")

    framework.registry.register(Policy(), name="policy")
    bus = framework.agent_hooks.subscribe(EventBus())
    bus.on(ToolCallStarted, later.append)
    event = await bus.emit(ToolCallStarted(call=_call()))

    assert event.decision == ToolCallDecision.deny("no") and later == []


@pytest.mark.anyio
async def test_handlers_registered_on_the_bus_are_not_isolated(
    framework: Framework,
) -> None:
    bus = framework.agent_hooks.subscribe()

    def broken(event: LLMCallStarted) -> None:
        raise RuntimeError("trusted handler failed")

    bus.on(LLMCallStarted, broken)
    with pytest.raises(RuntimeError, match="trusted handler failed"):
        await bus.emit(LLMCallStarted(request=_request()))


@pytest.mark.anyio
async def test_unsubscribe_removes_the_handlers(framework: Framework) -> None:
    class Cache:
        @hookimpl
        def before_llm_call(self, request: LLMCallRequest) -> LLMCallDecision:
            return LLMCallDecision.finish("cached")

    framework.registry.register(Cache(), name="cache")
    bus = framework.agent_hooks.subscribe()
    framework.agent_hooks.unsubscribe(bus)
    event = await bus.emit(LLMCallStarted(request=_request()))
    assert event.decision is None


# -- AgentPlugins ----------------------------------------------------------------------


class ContinuePlugin:
    def __init__(self, answer: Any = "keep going") -> None:
        self.answer = answer
        self.calls: list[tuple[Any, Any, Any]] = []

    @hookimpl
    def continue_prompt(self, prompt: Any, tape: Any, state: Any) -> Any:
        self.calls.append((prompt, tape, state))
        return self.answer


@pytest.mark.anyio
async def test_attach_calls_continue_prompt_with_the_legacy_prompt(
    framework: Framework,
) -> None:
    plugin = ContinuePlugin()
    framework.registry.register(plugin, name="continuer")
    bus = framework.agent_plugins.attach()
    tape, stream_state = object(), object()

    await bus.emit(StepStarted(step=1, prompt=["look at", "this"], tape=tape))
    first = await bus.emit(
        StepFinished(step=1, status="continue", tape=tape, stream_state=stream_state)
    )
    await bus.emit(StepStarted(step=2, prompt=None, tape=tape))
    second = await bus.emit(StepFinished(step=2, status="continue", tape=tape))

    assert plugin.calls == [("look at\nthis", tape, stream_state), (None, tape, None)]
    assert first.next_prompt == "keep going" and second.next_prompt == "keep going"


@pytest.mark.anyio
async def test_attach_keeps_runs_apart_and_allows_none(framework: Framework) -> None:
    plugin = ContinuePlugin(answer=None)
    framework.registry.register(plugin, name="continuer")
    bus = framework.agent_plugins.attach(EventBus())
    tape_a, tape_b = object(), object()

    await bus.emit(StepStarted(step=1, prompt=["from a"], tape=tape_a))
    await bus.emit(StepStarted(step=1, prompt=["from b"], tape=tape_b))
    event_b = await bus.emit(StepFinished(step=1, status="continue", tape=tape_b))
    event_a = await bus.emit(StepFinished(step=1, status="continue", tape=tape_a))

    assert [call[0] for call in plugin.calls] == ["from b", "from a"]
    assert event_a.next_prompt is None and event_b.next_prompt is None


@pytest.mark.anyio
@pytest.mark.parametrize("status", ["ok", "error", "auto_handoff"])
async def test_other_statuses_do_not_call_continue_prompt(
    framework: Framework, status: Any
) -> None:
    plugin = ContinuePlugin()
    framework.registry.register(plugin, name="continuer")
    bus = framework.agent_plugins.attach()
    await bus.emit(StepStarted(step=1, prompt=["hi"]))
    event = await bus.emit(StepFinished(step=1, status=status))

    assert plugin.calls == [] and event.next_prompt is None
    assert framework.agent_plugins._prompts == {}  # the remembered prompt was dropped


@pytest.mark.anyio
async def test_run_finished_drops_prompts_of_unfinished_steps(framework: Framework) -> None:
    bus = framework.agent_plugins.attach()
    tape = object()
    await bus.emit(StepStarted(step=1, prompt=["cancelled mid-step"], tape=tape))
    await bus.emit(RunFinished(status="cancelled", tape=tape))
    assert framework.agent_plugins._prompts == {}


@pytest.mark.anyio
async def test_non_str_continue_prompt_raises_type_error(framework: Framework) -> None:
    framework.registry.register(ContinuePlugin(answer=42), name="continuer")
    bus = framework.agent_plugins.attach()
    await bus.emit(StepStarted(step=1, prompt=["hi"]))
    with pytest.raises(TypeError, match=r"hook\.continue_prompt must return str or None"):
        await bus.emit(StepFinished(step=1, status="continue"))


@pytest.mark.anyio
async def test_attach_also_subscribes_the_interception_adapter(
    framework: Framework,
) -> None:
    class Cache:
        @hookimpl
        def before_llm_call(self, request: LLMCallRequest) -> LLMCallDecision:
            return LLMCallDecision.finish("cached")

    framework.registry.register(Cache(), name="cache")
    bus = framework.agent_plugins.attach()
    event = await bus.emit(LLMCallStarted(request=_request()))
    assert event.decision == LLMCallDecision.finish("cached")
