"""The builtin agent loop: model steps, tool calls and interception, as one event stream.

One run answers one prompt. Each step asks the model (through the run's ModelClient)
with the tape's context, streams its text, runs the tool calls it requested, and goes on
while there are tool results or steering messages to answer, up to ``max_steps``. Every
stage is announced on the agent's EventBus, to which the framework's ``AgentPlugins`` is
attached, so interception plugins take effect on real calls. Everything the run says and
does is recorded on a fork of the session tape, merged back when the run closes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from hookline.kernel.envelope import get_field
from hookline.kernel.events import (
    ChatFinished,
    EventBus,
    LLMCallFinished,
    LLMCallStarted,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolCallFinished,
    ToolCallStarted,
)
from hookline.kernel.interception import (
    LLMCallDecision,
    LLMCallRequest,
    LLMCallResult,
    ToolCall,
    ToolCallResult,
    new_run_id,
)
from hookline.kernel.prompt import to_content, to_legacy_prompt
from hookline.kernel.streaming import (
    AsyncStreamEvents,
    ErrorKind,
    HooklineError,
    StreamEvent,
    StreamState,
)
from hookline.kernel.tools import Tool, ToolContext
from hookline.kernel.turn import RUNTIME_TAPE, RUNTIME_TOOL_NAMES

from ..models.base import (
    Finished,
    ModelClient,
    ModelMessage,
    TextDelta,
    ToolCallEvent,
    ToolCallSpec,
    ToolSchema,
    Usage,
    as_model_messages,
)
from ..tape.tape import Tape, TapeRecordError, should_merge_back
from .spill import model_text
from .usage import add_usage

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentConfig:
    """What a run needs besides the prompt: limits and the model to use by default."""

    model: str = "offline"
    max_steps: int = 20
    max_tokens: int | None = None


class Agent:
    """Runs prompts for the framework's sessions; one instance serves every turn.

    ``open_model(spec)`` builds the ModelClient for a ``provider:model`` spec; ``tape_for``
    gives the session's Tape. Both are injected so tests and plugins can replace them.
    """

    def __init__(
        self,
        framework: Any,
        config: AgentConfig,
        open_model: Callable[[str], ModelClient],
        tape_for: Callable[[str, dict[str, Any]], Tape],
    ) -> None:
        self.framework = framework
        self.config = config
        self.open_model = open_model
        self.tape_for = tape_for
        self.prepare_tools: Callable[[], Awaitable[None]] | None = None
        """Awaited before each run collects its tools (the MCP servers start there)."""
        self.bus = EventBus()
        framework.agent_plugins.attach(self.bus)

    def run_stream(
        self, prompt: Any, session_id: str, state: dict[str, Any], model: str | None = None
    ) -> AsyncStreamEvents:
        """The run as a stream; it must be consumed (or closed) for the run to finish."""
        stream_state = StreamState()
        run = _Run(self, to_content(prompt), session_id, state, model or self.config.model,
                   stream_state)
        return AsyncStreamEvents(run.events(), state=stream_state)


def offered_tools(tools: Iterable[Tool]) -> list[Tool]:
    """The tools the model is offered, in order: those whose exposure lets it call them
    (``auto``, ``direct``). Comma commands are not offered; nor is anything loaded later:
    there is no deferred loading, a Bub ``deferred`` tool is offered like any other."""
    return [tool for tool in tools if tool.exposure in ("auto", "direct")]


class _Run:
    """One run's state; ``events()`` is its whole life as an async generator."""

    def __init__(self, agent: Agent, prompt: list[Any], session_id: str,
                 state: dict[str, Any], model: str, stream_state: StreamState) -> None:
        self.agent = agent
        self.prompt = prompt
        self.session_id = session_id
        self.state = state
        self.model = model
        self.stream_state = stream_state
        self.usage_by_model: dict[str, dict[str, Any]] = {}
        """The turn's token counts by model (`usage.add_usage`), for its `run` event."""
        self.bus = agent.bus
        self._collect_tools()
        self.steps = 0
        self.run_id = ""
        self.text_emitted = False
        self.step_text_started = False

    def _collect_tools(self) -> None:
        offered = offered_tools(self.agent.framework.get_tools())
        self.tools = {tool.model_name: tool for tool in offered}
        # Calls may also use the tool's own name (`fs.read` for the model's `fs_read`).
        self.tool_aliases = {tool.name: tool for tool in offered}

    async def events(self) -> AsyncIterator[StreamEvent]:
        started = time.perf_counter()
        if self.agent.prepare_tools is not None:
            await self.agent.prepare_tools()
            self._collect_tools()
        session_tape = self.agent.tape_for(self.session_id, self.state)
        status: Literal["ok", "error", "cancelled"] = "ok"
        error: str | None = None
        async with session_tape.fork(merge_back=should_merge_back(self.session_id)) as tape:
            await tape.ensure_bootstrap_anchor()  # in the fork: temp/ sessions write nothing
            self.tape = tape
            await self._emit(RunStarted(model=self.model, prompt=self.prompt,
                                        state=self.state, tape=tape))
            try:
                async with contextlib.aclosing(self._steps()) as steps:
                    async for event in steps:
                        yield event
            except TapeRecordError as exc:  # fails the turn: never a quiet error event
                status, error = "error", str(exc)
                raise
            except HooklineError as exc:
                status, error = "error", str(exc)
                self.stream_state.error = exc
                yield StreamEvent("error", exc.as_dict())
            except Exception as exc:
                status, error = "error", f"{type(exc).__name__}: {exc}"
                raise
            except BaseException:  # cancellation, or the consumer closed the stream
                status = "cancelled"
                raise
            finally:
                with anyio.CancelScope(shield=True):
                    await self._emit(RunFinished(
                        status=status, steps=self.steps, error=error, state=self.state,
                        tape=tape, elapsed_ms=(time.perf_counter() - started) * 1000))
                    await tape.append_event("run", {
                        "status": status, "steps": self.steps, "error": error,
                        "usage": self.stream_state.usage, "model": self.model,
                        "usage_by_model": self.usage_by_model,
                    }, run_id=self.run_id)

    async def _steps(self) -> AsyncGenerator[StreamEvent, None]:
        prompt = self.prompt
        first = prompt if any(not isinstance(item, str) for item in prompt) else "\n".join(prompt)
        new_messages = [ModelMessage.user(first)]
        step_prompt: list[Any] | None = self.prompt
        while True:
            if self.steps >= self.agent.config.max_steps:
                raise HooklineError(
                    ErrorKind.temporary,
                    f"stopped after {self.agent.config.max_steps} model steps without a final "
                    f"answer; raise HOOKLINE_MAX_STEPS if the task needs more",
                )
            self.steps += 1
            step_started = time.perf_counter()
            run_id = self.run_id = new_run_id()
            self.step_text_started = False
            await self._emit(StepStarted(step=self.steps, prompt=step_prompt,
                                         state=self.state, tape=self.tape))
            # The context is read before the step's new messages are recorded: the tape
            # keeps only their text, the model gets them whole (media included).
            context = await self.tape.read_model_messages()
            # Steered messages came after the step's own prompt: they follow it, in order.
            new_messages = new_messages + await self._drain_steering()
            for message in new_messages:
                await self.tape.append("message", message.to_dict(), run_id=run_id)
            await self.tape.flush()  # the prompt is durable before the model sees it
            outcome = _StepOutcome()
            call = self._model_call(run_id, outcome, context + new_messages)
            try:
                async with contextlib.aclosing(call):  # closed with us: it keeps partial text
                    async for event in call:
                        yield event
            except Exception as exc:
                await self._emit(StepFinished(
                    step=self.steps, status="error", state=self.state, tape=self.tape,
                    stream_state=self.stream_state, error=f"{type(exc).__name__}: {exc}",
                    elapsed_ms=(time.perf_counter() - step_started) * 1000))
                raise
            if outcome.tool_calls:
                results = [await self._run_tool(run_id, call) for call in outcome.tool_calls]
                yield StreamEvent("tool_result", {"tool_results": results})
            yield StreamEvent("final", {"ok": True, "text": outcome.text,
                                        "tool_calls": [c.to_dict() for c in outcome.tool_calls]})
            inbox = self.agent.framework.get_steering_inbox()
            pending = inbox.message_count(self.state) if inbox is not None else 0
            status: Literal["continue", "ok"] = (
                "continue" if (outcome.tool_calls or pending) else "ok"
            )
            finished = await self._emit(StepFinished(
                step=self.steps, status=status, state=self.state, tape=self.tape,
                stream_state=self.stream_state,
                elapsed_ms=(time.perf_counter() - step_started) * 1000))
            if status != "continue":
                return
            step_prompt = None
            new_messages = []
            if finished.next_prompt is not None:
                new_messages = [ModelMessage.user(finished.next_prompt)]

    async def _model_call(self, run_id: str, outcome: _StepOutcome,
                          conversation: list[ModelMessage]
                          ) -> AsyncGenerator[StreamEvent, None]:
        """One provider call (or a finish decision), streamed and recorded."""
        system = self.agent.framework.get_system_prompt(
            to_legacy_prompt(self.prompt) if self.steps == 1 else "", self.state)
        messages = ([ModelMessage.system(system)] if system else []) + conversation
        request = LLMCallRequest(run_id=run_id, model=self.model, messages=messages,
                                 tool_names=tuple(self.tools),
                                 max_tokens=self.agent.config.max_tokens)
        self.state[RUNTIME_TOOL_NAMES] = list(self.tools)
        started = await self._emit(LLMCallStarted(request=request, state=self.state,
                                                  tape=self.tape))
        request = started.request
        if isinstance(started.decision, LLMCallDecision):
            outcome.text = started.decision.text
            yield self._separated(StreamEvent("text", {"delta": outcome.text}))
            await self._record_reply(run_id, request, outcome, system)
            return
        client = self.agent.open_model(request.model)
        schemas = [ToolSchema(name, tool.description, tool.parameters)
                   for name, tool in self.tools.items()]
        opened = time.perf_counter()
        try:
            stream = client.stream(as_model_messages(request.messages), schemas,
                                   max_tokens=request.max_tokens)
            async with contextlib.aclosing(stream) as events:  # type: ignore[type-var]
                async for event in events:
                    delta = outcome.take(event)
                    if delta is not None and delta.kind == "text":
                        delta = self._separated(delta)
                    if delta is not None:
                        yield delta
        except Exception as exc:
            await self._keep_partial_text(run_id, request, outcome)
            await self._emit(LLMCallFinished(request=request, state=self.state, tape=self.tape,
                                             result=self._llm_result(run_id, outcome, exc,
                                                                     opened)))
            raise _as_hookline_error(exc, request.model) from exc
        except BaseException:  # cancelled, or the consumer stopped reading
            with anyio.CancelScope(shield=True):
                await self._keep_partial_text(run_id, request, outcome)
            raise
        self.stream_state.usage = outcome.usage
        if outcome.usage is not None:
            add_usage(self.usage_by_model, request.model, outcome.usage)
            yield StreamEvent("usage", {"usage": outcome.usage, "model": request.model,
                                        "elapsed_seconds": time.perf_counter() - opened})
        await self._emit(LLMCallFinished(request=request, state=self.state, tape=self.tape,
                                         result=self._llm_result(run_id, outcome, None, opened)))
        await self._record_reply(run_id, request, outcome, system)

    async def _keep_partial_text(self, run_id: str, request: LLMCallRequest,
                                 outcome: _StepOutcome) -> None:
        """Text already streamed when the call ended early is recorded, marked interrupted."""
        if outcome.text:
            await self.tape.append("message", {"role": "assistant", "content": outcome.text},
                                   run_id=run_id, model=request.model, interrupted=True)

    def _separated(self, delta: StreamEvent) -> StreamEvent:
        """Text of a later step starts on a new paragraph, so step replies do not run on."""
        if self.text_emitted and not self.step_text_started:
            delta = StreamEvent("text", {"delta": "\n\n" + delta.data["delta"]})
        self.text_emitted = self.step_text_started = True
        return delta

    def _llm_result(self, run_id: str, outcome: _StepOutcome, error: BaseException | None,
                    opened: float) -> LLMCallResult:
        return LLMCallResult(
            run_id=run_id, text=outcome.text or None,
            tool_calls=[call.to_dict() for call in outcome.tool_calls], usage=outcome.usage,
            error=error, duration_ms=(time.perf_counter() - opened) * 1000)

    async def _run_tool(self, run_id: str, spec: ToolCallSpec) -> dict[str, Any]:
        """Run one requested tool call through the interception events; record it."""
        started = time.perf_counter()
        invalid = None
        try:
            arguments = spec.args
        except ValueError as exc:
            arguments = {"_raw": spec.arguments}
            invalid = f"arguments are not valid JSON ({exc}); send one JSON object"
        if not isinstance(arguments, dict):
            invalid = invalid or "arguments must be one JSON object"
            arguments = {"_value": arguments}
        self.state[RUNTIME_TAPE] = self.tape
        context = ToolContext(tape=self.tape, run_id=run_id, state=self.state, events=self.bus)
        call = ToolCall(run_id=run_id, tool=spec.name, arguments=arguments, context=context)
        event = await self._emit(ToolCallStarted(call=call, state=self.state))
        call, decision = event.call, event.decision
        result = ToolCallResult(run_id=run_id, tool=call.tool, arguments=dict(call.arguments))
        if decision.action == "replace":
            result.result = decision.result
        elif decision.action == "deny":
            result.error = HooklineError(
                ErrorKind.tool,
                decision.message or f"Tool '{call.tool}' call denied by policy hook.")
        else:
            tool = self.tools.get(call.tool) or self.tool_aliases.get(call.tool)
            try:
                if tool is None:
                    raise HooklineError(ErrorKind.not_found, f"Unknown tool name: {call.tool}")
                if invalid is not None and call.arguments == arguments:  # no hook fixed them
                    raise HooklineError(ErrorKind.invalid_input, f"{call.tool}: {invalid}")
                value = await tool.invoke(dict(call.arguments), context)
                result.result = tool.render(value)
            except HooklineError as exc:
                result.error = exc
            except Exception as exc:
                result.error = HooklineError(ErrorKind.tool, f"{type(exc).__name__}: {exc}")
                result.error.__cause__ = exc
        result.duration_ms = (time.perf_counter() - started) * 1000
        await self._emit(ToolCallFinished(call=call, result=result, state=self.state))
        output = result.result
        if output is None and result.error is not None:
            output = json.dumps(_error_dict(result.error), ensure_ascii=False)
        output = model_text(output)
        record = {"call_id": spec.id, "name": spec.name, "output": output,
                  "is_error": result.error is not None and result.result is None,
                  **_what_ran(decision.action, arguments, call, result)}
        await self.tape.append("tool_result", {"results": [record]}, run_id=run_id)
        await self.tape.flush()  # what the tool did is durable before anything else runs
        return record

    async def _drain_steering(self) -> list[ModelMessage]:
        """Steered envelopes become user messages before the step's own prompt."""
        inbox = self.agent.framework.get_steering_inbox()
        if inbox is None:
            return []
        messages = []
        for envelope in await inbox.drain_messages(self.state):
            session_id = get_field(envelope, "session_id") or self.session_id
            content = await self.agent.framework.build_prompt(envelope, session_id, self.state)
            messages.append(ModelMessage.user(content))
        return messages

    async def _record_reply(self, run_id: str, request: LLMCallRequest, outcome: _StepOutcome,
                            system: str) -> None:
        calls = [call.to_dict() for call in outcome.tool_calls]
        if calls:  # paired with the tool_result entries that follow (Tape.read_messages)
            await self.tape.append("tool_call", {"calls": calls, "content": outcome.text},
                                   run_id=run_id, model=request.model)
            await self.tape.flush()  # durable before any of the calls runs
        else:
            await self.tape.append("message", {"role": "assistant", "content": outcome.text},
                                   run_id=run_id, model=request.model)
        await self._emit(ChatFinished(
            run_id=run_id, model=request.model, system_prompt=system or None,
            response_text=outcome.text or None, tool_calls=calls,
            usage=outcome.usage, state=self.state, tape=self.tape))

    async def _emit(self, event: Any) -> Any:
        return await self.bus.emit(event)


@dataclass
class _StepOutcome:
    """What one model call produced so far."""

    text: str = ""
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    usage: dict[str, Any] | None = None

    def take(self, event: Any) -> StreamEvent | None:
        """Fold a model event in; return the stream event to pass on, if any."""
        if isinstance(event, TextDelta) and event.text:
            self.text += event.text
            return StreamEvent("text", {"delta": event.text})
        if isinstance(event, ToolCallEvent):
            self.tool_calls.append(event.call)
            return StreamEvent("tool_call", {"tool_calls": [event.call.to_dict()]})
        if isinstance(event, Usage):
            self.usage = event.data
        elif isinstance(event, Finished):
            self.usage = event.usage or self.usage
            if not self.tool_calls:
                self.tool_calls = list(event.tool_calls)
            if not self.text and event.text:  # a client that sent no deltas
                self.text = event.text
                return StreamEvent("text", {"delta": event.text})
        return None


def _error_dict(error: BaseException) -> dict[str, Any]:
    if isinstance(error, HooklineError):
        return error.as_dict()
    return {"kind": "tool", "message": f"{type(error).__name__}: {error}"}


def _as_hookline_error(exc: Exception, model: str) -> HooklineError:
    if isinstance(exc, HooklineError):
        return exc
    return HooklineError(ErrorKind.provider, f"model {model!r} failed: {type(exc).__name__}: "
                                             f"{exc}")


def _what_ran(action: str, requested: dict[str, Any], call: ToolCall,
              result: ToolCallResult) -> dict[str, Any]:
    """What a tool_result record keeps of what really happened: the outcome (`ran`,
    `denied`, `replaced` or `failed`), the arguments that ran, and the model's own when a
    plugin rewrote them, and the error message."""
    outcome = {"deny": "denied", "replace": "replaced"}.get(action, "ran")
    if outcome == "ran" and result.error is not None:
        outcome = "failed"
    ran = dict(call.arguments)
    what: dict[str, Any] = {"outcome": outcome, "arguments": ran}
    if ran != requested:
        what["requested_arguments"] = requested
    if result.error is not None:
        what["error"] = str(getattr(result.error, "message", result.error))
    return what


__all__ = ["Agent", "AgentConfig"]
