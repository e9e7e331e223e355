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
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from hookline.kernel.errors import HooklineError
from hookline.kernel.events import (
    ChatFinished,
    EventBus,
    LLMCallFinished,
    LLMCallStarted,
    RunFinished,
    RunStarted,
    StepFinished,
)
from hookline.kernel.interception import LLMCallDecision, LLMCallRequest
from hookline.kernel.messages import ModelMessage, as_model_messages
from hookline.kernel.prompt import to_content
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent, StreamState
from hookline.kernel.tools import Tool
from hookline.kernel.turn import RUNTIME_TOOL_NAMES

from ..config.limits import MAX_REQUEST_TOOLS
from ..models.base import ModelClient
from ..models.failures import waiting_may_mend
from ..models.options import MODEL_OPTIONS_STATE
from ..store.entries import REQUEST_META
from ..tape.context import RESUMES, STEERED
from ..tape.fork import TapeRecordError
from ..tape.naming import should_merge_back
from ..tape.requests import REQUEST_CONTEXT
from ..tape.tape import Tape
from .compacting import CompactingRun
from .compaction import (
    CONTINUE_AFTER_COMPACTION,
    ContextMeter,
    request_chars,
    request_messages,
)
from .interruption import close_cut_calls, keep_partial_text
from .outcome import StepOutcome, StepRequest, as_hookline_error
from .steering import scope_inbox, steered_messages
from .tool_call import run_tool_call
from .usage import add_usage

logger = logging.getLogger(__name__)

UNANSWERED = ("The message is kept in the session, unanswered: try again, set compaction = "
              "false to send requests without compacting them, or start a new session "
              "(--new).")
"""What a turn whose compaction failed says after the failure."""


@dataclass(frozen=True)
class AgentConfig:
    """What a run needs besides the prompt: limits and the model to use by default.

    `context_window` (None: by model) and `context_budget` bound each request; past them
    (or past `max_context_messages` messages since the last anchor) the context is
    compacted first, unless `compaction` is off (docs/context.md)."""

    model: str = "offline"
    max_steps: int = 20
    max_tokens: int | None = None
    context_window: int | None = None
    context_budget: float = 0.8
    max_context_messages: int | None = None
    compaction: bool = True


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
        self.meter = ContextMeter(config.context_window, config.context_budget)
        """What is known of each model's window and tokens per character."""
        self.bus = EventBus()
        framework.agent_plugins.attach(self.bus)

    async def compact(self, session_id: str, state: dict[str, Any], model: str | None = None,
                      instructions: str = "", starting: Callable[[], None] | None = None,
                      retrying: Callable[[dict[str, Any]], None] | None = None
                      ) -> dict[str, Any] | None:
        """Compact the session's context now (`/compact`, `hookline compact`): what the
        `compaction` event said, with the summary call's `usage_by_model`, or None when
        there was nothing to compact. `starting()` says the summary call is next,
        `retrying(data)` that it is tried again (a `retry` stream event's data)."""
        run = _Run(self, [""], session_id, state, model or self.config.model, StreamState())
        return await run.compact(instructions, starting, retrying)

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
    (``auto``, ``direct``), the first `MAX_REQUEST_TOOLS` of them (one warning names how
    many were left out). Comma commands are not offered; nor is anything loaded later:
    there is no deferred loading, a Bub ``deferred`` tool is offered like any other."""
    offered = [tool for tool in tools if tool.exposure in ("auto", "direct")]
    if len(offered) > MAX_REQUEST_TOOLS and len(offered) not in _WARNED_TOOL_COUNTS:
        _WARNED_TOOL_COUNTS.add(len(offered))
        logger.warning("agent.too_many_tools offered=%d left_out=%d: a model request may "
                       "offer %d tools; the last in priority order are not offered (an MCP "
                       "server's tools.allow chooses fewer)", len(offered),
                       len(offered) - MAX_REQUEST_TOOLS, MAX_REQUEST_TOOLS)
    return offered[:MAX_REQUEST_TOOLS]


_WARNED_TOOL_COUNTS: set[int] = set()
"""Tool counts warned about already: every run collects its tools."""


class _Run(CompactingRun):
    """One run's state; ``events()`` is its whole life as an async generator."""

    agent: Agent

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
        self.first_meta: dict[str, Any] = {}
        """Meta for the next message the run records: the request's mark, on its first."""
        self.running_calls: set[str] = set()
        """Ids of the calls whose tool is running (`run_tool_call`)."""

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
        retryable = False  # a provider's refusal that waiting may mend: the run event says so
        async with session_tape.fork(merge_back=should_merge_back(self.session_id)) as tape:
            await tape.ensure_bootstrap_anchor()  # in the fork: temp/ sessions write nothing
            self.tape = tape
            await self._emit(RunStarted(model=self.model, prompt=self.prompt,
                                        state=self.state, tape=tape))
            try:
                await self._recall_meter()
                async with contextlib.aclosing(self._steps()) as steps:
                    async for event in steps:
                        yield event
            except TapeRecordError as exc:  # fails the turn: never a quiet error event
                status, error = "error", str(exc)
                raise
            except HooklineError as exc:
                status, error = "error", str(exc)
                retryable = waiting_may_mend(exc)
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
                    if status == "cancelled":
                        await close_cut_calls(tape, self.run_id, self.running_calls)
                    await self._emit(RunFinished(
                        status=status, steps=self.steps, error=error, state=self.state,
                        tape=tape, elapsed_ms=(time.perf_counter() - started) * 1000))
                    await tape.append_event("run", {
                        "status": status, "steps": self.steps, "error": error,
                        **({"retryable": True} if retryable else {}),
                        "usage": self.stream_state.usage, "model": self.model,
                        "usage_by_model": self.usage_by_model,
                        "context": self.agent.meter.known(self.model),
                    }, run_id=self.run_id)

    async def _steps(self) -> AsyncGenerator[StreamEvent, None]:
        """The run's steps, until nothing is left to answer. The model's events pass
        straight through (the hot path: no generator in between)."""
        prompt = self.prompt
        first = prompt if any(not isinstance(item, str) for item in prompt) else "\n".join(prompt)
        new_messages = [ModelMessage.user(first)]
        step_prompt: list[Any] | None = self.prompt
        marked = self.state.get(REQUEST_CONTEXT)  # the request's id and key, with its prompt
        self.first_meta = {REQUEST_META: marked} if isinstance(marked, dict) else {}
        while True:
            step = await self._open_step(step_prompt, new_messages)
            too_long = self._too_long_alone(step)
            if too_long is not None:
                await self._record_step_messages(step, context=False)
                raise too_long
            while True:
                if step.reason is not None:
                    try:
                        async with contextlib.aclosing(self._compact(
                                step.reason, step.conversation(), step.started)) as events:
                            async for event in events:
                                yield event
                    except HooklineError as exc:  # the message stays, unanswered
                        await self._record_step_messages(step)
                        raise HooklineError(exc.kind, f"{exc.message.rstrip('.')}. {UNANSWERED}",
                                            exc.details) from exc
                    except BaseException:  # cancelled while summarising: the message stays
                        with anyio.CancelScope(shield=True):
                            await self._record_step_messages(step)
                        raise
                    await self._restart_step(step)
                await self._record_step_messages(step)
                outcome = StepOutcome()
                call = self._model_call(step.run_id, outcome, step.system, step.conversation())
                try:
                    async with contextlib.aclosing(call):  # closed with us: keeps partial text
                        async for event in call:
                            yield event
                    break
                except HooklineError as exc:
                    step.reason = await self._refused(step, outcome, exc)
                except Exception as exc:
                    await self._step_failed(step.started, exc)
                    raise
            if outcome.tool_calls:
                results = [await run_tool_call(call, step.run_id, self.tape, self.state,
                                               self.bus, self._find_tool, self.running_calls)
                           for call in outcome.tool_calls]
                yield StreamEvent("tool_result", {"tool_results": results})
            yield StreamEvent("final", {"ok": True, "text": outcome.text,
                                        "tool_calls": [c.to_dict() for c in outcome.tool_calls]})
            next_messages = await self._close_step(step, outcome)
            if next_messages is None:
                return
            step_prompt, new_messages = None, next_messages

    async def _open_step(self, prompt: list[Any] | None,
                         new_messages: list[ModelMessage]) -> StepRequest:
        """Start a step. Its context is read before its new messages (steered ones last)
        are recorded: the tape keeps only their text, the model gets them whole. Compacted
        first when the request would pass the budget."""
        started = await self._start_step(prompt)
        run_id = self.run_id
        context = await self.tape.read_model_messages()
        steered = await steered_messages(self.agent.framework, self.session_id, self.state)
        new_messages = new_messages + steered
        system = self._system_prompt()
        reason = self._needs_compaction(system, context + new_messages)
        return StepRequest(prompt, started, run_id, system, context, new_messages, reason,
                           steered=len(steered))

    async def _restart_step(self, step: StepRequest) -> None:
        """After a compaction: a new step on the summary, its new messages recorded after
        the anchor (again, when a refusal as too long came after they were recorded);
        mid-turn (nothing new to say), a message saying why the conversation is a summary.
        Either is marked `RESUMES`: not a turn of its own."""
        step.started = await self._start_step(step.prompt)
        step.run_id = self.run_id
        step.system = self._system_prompt()
        step.context = await self.tape.read_model_messages()
        if not step.messages:
            step.messages = [ModelMessage.user(CONTINUE_AFTER_COMPACTION)]
            step.recorded, step.resumes = False, True
        elif step.recorded:  # before the anchor (an overflow): again after it
            step.recorded, step.resumes = False, True

    async def _record_step_messages(self, step: StepRequest, context: bool = True) -> None:
        """The step's new messages on the tape, once, durable before the model sees them
        (without `context`, kept out of every later request); the run's first carries the
        request's mark."""
        if step.recorded:
            return
        first_steered = len(step.messages) - step.steered
        for index, message in enumerate(step.messages):
            meta = {RESUMES: True} if step.resumes else self.first_meta
            if index >= first_steered:  # fed into the running turn: part of it
                meta = {**meta, STEERED: True}
            if not context:
                meta = {**meta, "context": False}
            await self.tape.append("message", message.to_dict(), run_id=step.run_id, **meta)
            if not step.resumes:
                self.first_meta = {}
        await self.tape.flush()
        step.recorded = True

    async def _close_step(self, step: StepRequest, outcome: StepOutcome
                          ) -> list[ModelMessage] | None:
        """Announce the step's end; the next step's new messages (a `StepFinished`
        handler's prompt, if any), or None when nothing is left to answer."""
        inbox = scope_inbox(self.agent.framework)
        pending = inbox.message_count(self.state) if inbox is not None else 0
        status: Literal["continue", "ok"] = "continue" if outcome.tool_calls or pending else "ok"
        finished = await self._emit(StepFinished(
            step=self.steps, status=status, state=self.state, tape=self.tape,
            stream_state=self.stream_state,
            elapsed_ms=(time.perf_counter() - step.started) * 1000))
        if status != "continue":
            return None
        if finished.next_prompt is not None:
            return [ModelMessage.user(finished.next_prompt)]
        return []

    async def _model_call(self, run_id: str, outcome: StepOutcome, system: str,
                          conversation: list[ModelMessage]
                          ) -> AsyncGenerator[StreamEvent, None]:
        """One provider call (or a finish decision), streamed and recorded."""
        messages = request_messages(system, conversation)
        options = dict(self.state.get(MODEL_OPTIONS_STATE) or {})  # `run -o`, checked
        limit = options.pop("max_tokens", self.agent.config.max_tokens)
        request = LLMCallRequest(run_id=run_id, model=self.model, messages=messages,
                                 tool_names=tuple(self.tools), max_tokens=limit)
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
        schemas = self._schemas()
        chars = request_chars(as_model_messages(request.messages), schemas)
        opened = time.perf_counter()
        try:
            stream = client.stream(as_model_messages(request.messages), schemas,
                                   max_tokens=request.max_tokens, **options)
            async with contextlib.aclosing(stream) as events:  # type: ignore[type-var]
                async for event in events:
                    delta = outcome.take(event)
                    if delta is not None and delta.kind == "text":
                        delta = self._separated(delta)
                    if delta is not None:
                        yield delta
        except Exception as exc:
            await keep_partial_text(self.tape, run_id, request.model, outcome.text)
            await self._emit(LLMCallFinished(request=request, state=self.state, tape=self.tape,
                                             result=outcome.result(run_id, exc, opened)))
            raise as_hookline_error(exc, request.model) from exc
        except BaseException:  # cancelled, or the consumer stopped reading
            with anyio.CancelScope(shield=True):
                await keep_partial_text(self.tape, run_id, request.model, outcome.text)
            raise
        self.stream_state.usage = outcome.usage
        self.agent.meter.measured(request.model, chars, outcome.usage)
        if outcome.usage is not None:
            add_usage(self.usage_by_model, request.model, outcome.usage)
            yield StreamEvent("usage", {"usage": outcome.usage, "model": request.model,
                                        "elapsed_seconds": time.perf_counter() - opened})
        await self._emit(LLMCallFinished(request=request, state=self.state, tape=self.tape,
                                         result=outcome.result(run_id, None, opened)))
        await self._record_reply(run_id, request, outcome, system)

    def _separated(self, delta: StreamEvent) -> StreamEvent:
        """Text of a later step starts on a new paragraph, so step replies do not run on."""
        if self.text_emitted and not self.step_text_started:
            delta = StreamEvent("text", {"delta": "\n\n" + delta.data["delta"]})
        self.text_emitted = self.step_text_started = True
        return delta

    def _find_tool(self, name: str) -> Tool | None:
        """A tool by the name the model called it, or by its own (`fs.read`)."""
        return self.tools.get(name) or self.tool_aliases.get(name)

    async def _record_reply(self, run_id: str, request: LLMCallRequest, outcome: StepOutcome,
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


__all__ = ["Agent", "AgentConfig"]
