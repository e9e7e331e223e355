"""Agent events and EventBus delivery rules."""

from __future__ import annotations

from typing import Any

import pytest

from hookline.kernel.events import (
    AgentEvent,
    ChatFinished,
    CommandFinished,
    EventBus,
    LLMCallFinished,
    LLMCallStarted,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    TapeEvent,
    ToolCallFinished,
    ToolCallStarted,
)
from hookline.kernel.interception import (
    LLMCallDecision,
    LLMCallRequest,
    LLMCallResult,
    ToolCall,
    ToolCallDecision,
    ToolCallResult,
)


def request() -> LLMCallRequest:
    return LLMCallRequest("run-1", "openai:gpt", [])


def tool_started() -> ToolCallStarted:
    return ToolCallStarted(call=ToolCall("run-1", "fs_read", {}), state={"k": 1})


def test_event_fields_and_defaults() -> None:
    started = RunStarted(model="a:b", prompt=["hi"], tape="tape")
    assert started.metadata == {} and started.state == {} and started.tape == "tape"
    assert RunFinished(status="cancelled").error is None
    assert StepStarted(step=2).prompt is None
    assert StepFinished(step=1, status="continue").elapsed_ms == 0.0
    assert CommandFinished(line="help", name="help", status="ok").output == ""
    chat = ChatFinished(run_id="run-1")
    assert chat.new_messages == [] and chat.assistant_fields == {} and chat.error is None
    finished = ToolCallFinished(call=ToolCall("r", "t", {}), result=ToolCallResult("r", "t", {}))
    assert not hasattr(finished, "tape")
    assert isinstance(LLMCallFinished(request=request(), result=LLMCallResult("r")), TapeEvent)
    assert not isinstance(tool_started(), TapeEvent)
    for event in (started, chat, finished, tool_started()):
        assert isinstance(event, AgentEvent)
        assert event.stopped is False
    with pytest.raises(TypeError):
        RunStarted("a:b", ["hi"])  # type: ignore[misc]  # keyword-only


def test_decisions_stop_events() -> None:
    llm = LLMCallStarted(request=request())
    assert not llm.stopped
    llm.decision = LLMCallDecision.finish("done")
    assert llm.stopped

    tool = tool_started()
    assert tool.decision == ToolCallDecision.proceed()
    assert not tool.stopped
    tool.decision = ToolCallDecision.proceed({"x": 1})
    assert not tool.stopped
    tool.decision = ToolCallDecision.replace("r")
    assert tool.stopped
    tool.decision = ToolCallDecision.deny("no")
    assert tool.stopped


@pytest.mark.anyio
async def test_emit_order_subclass_delivery_and_sync_async_handlers() -> None:
    bus = EventBus()
    calls: list[str] = []

    async def on_any(event: AgentEvent) -> None:
        calls.append(f"any:{type(event).__name__}")

    def on_tape(event: TapeEvent) -> None:
        calls.append(f"tape:{type(event).__name__}")

    def on_step(event: StepStarted) -> None:
        calls.append("step")

    bus.on(StepStarted, on_step)
    bus.on(AgentEvent, on_any)
    bus.on(TapeEvent, on_tape)

    step = StepStarted(step=1)
    assert await bus.emit(step) is step
    assert calls == ["step", "any:StepStarted", "tape:StepStarted"]

    calls.clear()
    await bus.emit(tool_started())
    assert calls == ["any:ToolCallStarted"]


@pytest.mark.anyio
async def test_emit_stops_once_event_is_stopped() -> None:
    bus = EventBus()
    calls: list[str] = []

    def decide(event: LLMCallStarted) -> None:
        calls.append("decide")
        event.decision = LLMCallDecision.finish("cached")

    def later(event: AgentEvent) -> None:
        calls.append("later")

    bus.on(AgentEvent, lambda event: calls.append("first"))
    bus.on(LLMCallStarted, decide)
    bus.on(AgentEvent, later)

    event = await bus.emit(LLMCallStarted(request=request()))
    assert calls == ["first", "decide"]
    assert event.decision == LLMCallDecision.finish("cached")

    calls.clear()
    tool = tool_started()
    tool.decision = ToolCallDecision.deny("pre-decided")
    await bus.emit(tool)
    assert calls == []

    calls.clear()
    await bus.emit(tool_started())  # a proceed decision does not stop delivery
    assert calls == ["first", "later"]


@pytest.mark.anyio
async def test_handler_exception_propagates_and_stops_delivery() -> None:
    bus = EventBus()
    calls: list[str] = []

    async def broken(event: AgentEvent) -> None:
        raise RuntimeError("handler failed")

    bus.on(AgentEvent, broken)
    bus.on(AgentEvent, lambda event: calls.append("after"))
    with pytest.raises(RuntimeError, match="handler failed"):
        await bus.emit(StepStarted(step=1))
    assert calls == []


@pytest.mark.anyio
async def test_on_decorator_off_and_snapshot() -> None:
    bus = EventBus()
    calls: list[str] = []

    @bus.on(StepStarted)
    def decorated(event: StepStarted) -> None:
        calls.append("decorated")

    def late(event: AgentEvent) -> None:
        calls.append("late")

    def subscribe_more(event: AgentEvent) -> None:
        calls.append("subscriber")
        bus.on(AgentEvent, late)

    assert callable(decorated)
    bus.on(AgentEvent, subscribe_more)
    await bus.emit(StepStarted(step=1))
    assert calls == ["decorated", "subscriber"]  # `late` joined after the snapshot

    calls.clear()
    bus.off(AgentEvent, subscribe_more)
    bus.off(AgentEvent, subscribe_more)  # already gone: silent
    bus.off(TapeEvent, late)  # never registered for that type: silent
    await bus.emit(StepStarted(step=2))
    assert calls == ["decorated", "late"]

    calls.clear()
    bus.off(StepStarted, decorated)
    bus.off(AgentEvent, late)
    await bus.emit(StepStarted(step=3))
    assert calls == []


@pytest.mark.anyio
async def test_off_removes_one_registration_of_bound_methods() -> None:
    class Recorder:
        def __init__(self) -> None:
            self.seen: list[Any] = []

        def handle(self, event: AgentEvent) -> None:
            self.seen.append(event)

    recorder = Recorder()
    bus = EventBus()
    bus.on(AgentEvent, recorder.handle)
    bus.on(AgentEvent, recorder.handle)
    bus.off(AgentEvent, recorder.handle)
    await bus.emit(StepStarted(step=1))
    assert len(recorder.seen) == 1


@pytest.mark.anyio
async def test_handlers_may_modify_the_event() -> None:
    bus = EventBus()

    def enrich(event: ToolCallStarted) -> None:
        event.decision = ToolCallDecision.proceed({"path": "safe.txt"})
        event.state["seen"] = True

    bus.on(ToolCallStarted, enrich)
    event = await bus.emit(tool_started())
    assert event.decision.arguments == {"path": "safe.txt"}
    assert event.state == {"k": 1, "seen": True}
