"""Compaction in a run of the builtin agent: the budget check before each model call, the
summary call and its anchor, the retry after a refusal as too long, and `/compact`; with
the run's helpers that compaction shares with its steps (announcing a step, the system
prompt, the tool schemas). `_Run` (loop.py) is a `CompactingRun`."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any, Protocol

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.events import (
    LLMCallFinished,
    LLMCallStarted,
    StepFinished,
    StepStarted,
)
from hookline.kernel.interception import LLMCallDecision, LLMCallRequest, new_run_id
from hookline.kernel.messages import ModelMessage, as_model_messages
from hookline.kernel.prompt import to_legacy_prompt
from hookline.kernel.streaming import StreamEvent, StreamState
from hookline.kernel.tools import Tool

from ..config import setting_env
from ..models.base import ToolSchema
from ..models.failures import OVERFLOW_FIX
from ..tape.naming import should_merge_back
from ..tape.tape import Tape
from .compaction import (
    COMPACTION_ANCHOR,
    ContextMeter,
    bounded_summary,
    may_send_as_text,
    overflow_limit,
    request_chars,
    summary_as_text,
    summary_in_place,
    summary_tokens,
)
from .outcome import StepOutcome, StepRequest, as_hookline_error
from .usage import COMPACT_EVENT, add_usage

if TYPE_CHECKING:
    from hookline.kernel.events import EventBus

    from ..models.base import ModelClient

COMPACTION_STATE = "compaction"
"""Turn state key: False turns compaction off for the turn; during a summary call it holds
the reason (`budget`, `messages`, `overflow`, `user`), for a `before_llm_call` to answer
instead."""


RECALL_SCAN = 64
"""The last events of a session searched for what its runs learned of their model."""


class AgentLimits(Protocol):
    """The settings of `AgentConfig` (loop.py) that compaction reads."""

    @property
    def max_steps(self) -> int: ...
    @property
    def max_context_messages(self) -> int | None: ...
    @property
    def compaction(self) -> bool: ...


class RunningAgent(Protocol):
    """What compaction asks of the run's `Agent` (loop.py, which imports this module)."""

    @property
    def config(self) -> AgentLimits: ...
    @property
    def meter(self) -> ContextMeter: ...
    @property
    def framework(self) -> Any: ...
    def open_model(self, spec: str) -> ModelClient: ...
    def tape_for(self, session_id: str, state: dict[str, Any]) -> Tape: ...


class CompactingRun:
    """What a run knows that compaction uses, and compaction itself."""

    agent: RunningAgent
    prompt: list[Any]
    session_id: str
    state: dict[str, Any]
    model: str
    stream_state: StreamState
    usage_by_model: dict[str, dict[str, Any]]
    bus: EventBus
    tools: dict[str, Tool]
    steps: int
    run_id: str
    step_text_started: bool
    tape: Tape

    async def compact(self, instructions: str, starting: Callable[[], None] | None,
                      retrying: Callable[[dict[str, Any]], None] | None = None
                      ) -> dict[str, Any] | None:
        if not self._summarises():  # its "summary" would replace the context
            raise HooklineError(ErrorKind.config, (
                f"the offline model cannot summarise a conversation; set "
                f"{setting_env('model')} (or model in the config file) to a real model, "
                f"then compact again"))
        session_tape = self.agent.tape_for(self.session_id, self.state)
        async with session_tape.fork(merge_back=should_merge_back(self.session_id)) as tape:
            self.tape = tape
            await self._recall_meter()
            context = await tape.read_model_messages()
            if len(context) < 2:
                return None
            if starting is not None:
                starting()
            started = await self._start_step(None)
            said: dict[str, Any] = {}
            try:
                async with contextlib.aclosing(self._compact("user", context, started,
                                                             instructions)) as events:
                    async for event in events:
                        if event.kind == "compaction":
                            said = dict(event.data)
                        elif event.kind == "retry" and retrying is not None:
                            retrying(dict(event.data))
            finally:  # no run records the summary call: its own event does, for the usage
                if self.usage_by_model:
                    await tape.append_event(COMPACT_EVENT, {
                        "model": self.model, "usage_by_model": self.usage_by_model,
                    }, run_id=self.run_id)
            return {**said, "usage_by_model": self.usage_by_model}

    async def _refused(self, step: StepRequest, outcome: StepOutcome, exc: HooklineError) -> str:
        """A failed model call: `overflow` when the provider refused the request as too
        long and compacting may help (once, before anything was said); else the step
        fails with the error."""
        stated = overflow_limit(exc)
        if stated is not None and step.reason != "overflow":
            self.agent.meter.overflowed(self.model, stated)
        # The waiting messages come back after the summary: only the context before them
        # makes room, and none where the system prompt and the tools alone fill it.
        helps = (stated is not None and step.reason != "overflow" and bool(step.context)
                 and self._estimate(step.system, []) <= self.agent.meter.limit(self.model))
        if stated is not None and not helps:  # compacted already, or no summary makes room
            exc = HooklineError(ErrorKind.provider, self._still_too_long(
                step, exc.message, compacted=step.reason == "overflow"), exc.details)
        if not helps or outcome.text or outcome.tool_calls or not self._may_compact():
            await self._step_failed(step.started, exc)
            raise exc from exc.__cause__
        return "overflow"

    async def _start_step(self, prompt: list[Any] | None) -> float:
        """Count a new step (refused past `max_steps`) and announce it; its start time."""
        if self.steps >= self.agent.config.max_steps:
            raise HooklineError(
                ErrorKind.temporary,
                f"stopped after {self.agent.config.max_steps} model steps without a final "
                f"answer; raise {setting_env('max_steps')} if the task needs more",
            )
        self.steps += 1
        self.run_id = new_run_id()
        self.step_text_started = False
        await self._emit(StepStarted(step=self.steps, prompt=prompt, state=self.state,
                                     tape=self.tape))
        return time.perf_counter()

    async def _step_failed(self, started: float, exc: Exception) -> None:
        await self._emit(StepFinished(
            step=self.steps, status="error", state=self.state, tape=self.tape,
            stream_state=self.stream_state, error=f"{type(exc).__name__}: {exc}",
            elapsed_ms=(time.perf_counter() - started) * 1000))

    async def _recall_meter(self) -> None:
        """A new process knows nothing of the model's tokens per character or of the
        window an error stated: the session's last run of the model kept them."""
        meter = self.agent.meter
        if self.model in meter.ratio or self.model in meter.learned:
            return
        events = await self.tape.entries(self.tape.query().kinds("event").tail(RECALL_SCAN))
        for entry in reversed(events):
            data = entry.payload.get("data")
            if (entry.payload.get("name") == "run" and isinstance(data, dict)
                    and data.get("model") == self.model and isinstance(data.get("context"), dict)):
                meter.recall(self.model, data["context"])
                return

    def _may_compact(self) -> bool:
        """Compaction is on, for this turn, and for this model."""
        return (self.agent.config.compaction and self.state.get(COMPACTION_STATE) is not False
                and self._summarises())

    def _summarises(self) -> bool:
        """Whether the run's model can summarise a conversation: not the offline model,
        which reads no context and only echoes the last message."""
        return not self.model.startswith("offline")

    def _still_too_long(self, step: StepRequest, said: str, compacted: bool) -> str:
        """The error of a request refused as too long that compacting did not or cannot
        help: the provider's words, what takes the room when the system prompt and tools
        alone pass the budget, and the fix once."""
        meter = self.agent.meter
        fixed, limit = self._estimate(step.system, []), meter.limit(self.model)
        alone = (f" The system prompt and the tools alone are about {fixed:,} tokens, more "
                 f"than the {limit:,} a request may use ({meter.budget:g} of a "
                 f"{meter.window(self.model):,}-token window): fewer tools (MCP servers) "
                 f"or a larger context_window may help." if fixed > limit else "")
        after = " even after the context was compacted" if compacted else ""
        return (f"the model refused the request as too long{after} "
                f"({said.removesuffix(' ' + OVERFLOW_FIX).rstrip('.')}).{alone} "
                f"{OVERFLOW_FIX}")

    def _needs_compaction(self, system: str, conversation: list[ModelMessage]) -> str | None:
        """Why the context is compacted before the next request: `budget` when the request
        would pass the budget, `messages` when the context holds more messages since its
        anchor than the window; None when it need not be, or when the system prompt and
        the tools alone pass the budget: no summary makes room there, and compacting at
        every turn would only lose the conversation (the model's refusal, if it comes,
        says what takes the room)."""
        if not self._may_compact() or len(conversation) < 2:
            return None
        limit = self.agent.config.max_context_messages
        if limit is not None and len(conversation) > limit:
            return "messages"
        budget = self.agent.meter.limit(self.model)
        over = self._estimate(system, conversation) > budget
        return "budget" if over and self._estimate(system, []) <= budget else None

    def _estimate(self, system: str, conversation: list[ModelMessage]) -> int:
        """The tokens of a request holding `conversation`, estimated."""
        chars = request_chars([ModelMessage.system(system), *conversation], self._schemas())
        return self.agent.meter.estimate(self.model, chars)

    def _too_long_alone(self, step: StepRequest) -> HooklineError | None:
        """The error for new messages that pass the model's window with only the system
        prompt and the tools beside them: no compaction can make room for them. (When the
        system prompt and the tools alone pass the budget, the refusal says so instead.)"""
        meter = self.agent.meter
        if (not step.messages or not self._summarises()  # the offline model reads no context
                or self._estimate(step.system, []) > meter.limit(self.model)):
            return None
        alone, window = self._estimate(step.system, step.messages), meter.window(self.model)
        if alone <= window:
            return None
        return HooklineError(ErrorKind.invalid_input, (
            f"the message is too long for {self.model}: about {alone:,} tokens with the "
            f"system prompt and the tools, more than its {window:,}-token window. It is kept "
            f"in the session, out of the context, and was not sent: shorten it or send a part "
            f"of it, or choose a model with a larger window (context_window)."))

    async def _compact(self, reason: str, conversation: list[ModelMessage], started: float,
                       instructions: str = "") -> AsyncGenerator[StreamEvent, None]:
        """Summarise `conversation` in one model call and write it as a handoff anchor; the
        step ends with status `auto_handoff`. The call repeats the conversation's request
        when that fits the budget and was not just refused as too long. Otherwise, or
        when the repeated request fails (`may_send_as_text`) or gets no text, it sends the
        conversation as a text (again with half of it when that is refused as too long)."""
        meter = self.agent.meter
        system, schemas = self._system_prompt(), self._schemas()
        before = self._estimate(system, conversation)
        session_tape = self.agent.tape_for(self.session_id, self.state)
        end = await _last_id(session_tape)
        in_place = summary_in_place(system, conversation, instructions)
        fits = reason != "overflow" and (
            meter.estimate(self.model, request_chars(in_place, schemas))
            <= meter.limit(self.model))
        fixed = self._estimate(system, [])
        most = summary_tokens(meter.limit(self.model), fixed)
        room = max(1000, meter.limit(self.model) - most - 1000)
        chars = meter.chars_for(self.model, room)
        summary = ""
        self.state[COMPACTION_STATE] = reason  # a before_llm_call may answer it instead
        try:
            for attempt in range(3):
                whole = fits and attempt == 0
                request = LLMCallRequest(
                    run_id=self.run_id, model=self.model, max_tokens=most,
                    tool_names=tuple(self.tools) if whole else (),
                    messages=in_place if whole else summary_as_text(conversation, instructions,
                                                                    chars))
                outcome = StepOutcome()
                try:
                    async with contextlib.aclosing(self._plain_call(
                            request, outcome, schemas if whole else [])) as calls:
                        async for event in calls:
                            yield event
                except HooklineError as exc:
                    if whole and may_send_as_text(exc):
                        continue
                    if overflow_limit(exc) is None or attempt == 2:
                        raise HooklineError(exc.kind, f"compacting the context failed: "
                                                      f"{exc.message}", exc.details) from exc
                    chars //= 2
                    continue
                summary = bounded_summary(outcome.text, meter.chars_for(self.model, most))
                if summary or not whole:
                    break
        finally:
            self.state.pop(COMPACTION_STATE, None)
        if not summary:
            what = ("called a tool instead of writing a summary" if outcome.tool_calls
                    else "returned an empty summary")
            raise HooklineError(ErrorKind.provider, f"compacting the context failed: the model "
                                                    f"{self.model!r} {what}")
        if reason == "user" and fixed + meter.estimate(self.model, len(summary)) >= before:
            raise HooklineError(ErrorKind.invalid_input, (
                f"compacting the context failed: the summary (about "
                f"{meter.estimate(self.model, len(summary)):,} tokens) would not make the "
                f"context of about {before:,} tokens shorter; nothing was written"))
        if await _last_id(session_tape) != end:  # the anchor would land after what it misses
            raise HooklineError(ErrorKind.temporary, (
                "compacting the context failed: the session went on while it was summarised "
                "(another process ran a turn of it), and the summary would leave that turn "
                "out; nothing was written, try again"))
        await self.tape.handoff(COMPACTION_ANCHOR, {"summary": summary, "reason": reason,
                                                    "tokens": before, "owner": "hookline"},
                                run_id=self.run_id)
        await self.tape.flush()
        after = self._estimate(system, await self.tape.read_model_messages())
        yield StreamEvent("compaction", {"reason": reason, "tokens_before": before,
                                         "tokens_after": after, "summary_chars": len(summary),
                                         "model": self.model})
        await self._emit(StepFinished(
            step=self.steps, status="auto_handoff", state=self.state, tape=self.tape,
            stream_state=self.stream_state,
            elapsed_ms=(time.perf_counter() - started) * 1000))

    async def _plain_call(self, request: LLMCallRequest, outcome: StepOutcome,
                          tools: list[ToolSchema]) -> AsyncGenerator[StreamEvent, None]:
        """A model call whose text is not the reply (a summary), through the interception
        events: `tools` are offered only to keep the request's start, none may be called.
        Its usage counts."""
        started = await self._emit(LLMCallStarted(request=request, state=self.state,
                                                  tape=self.tape))
        request = started.request
        if isinstance(started.decision, LLMCallDecision):
            outcome.text = started.decision.text
            return
        opened = time.perf_counter()
        try:
            client = self.agent.open_model(request.model)
            stream = client.stream(as_model_messages(request.messages), tools,
                                   max_tokens=request.max_tokens,
                                   **({"tool_choice": "none"} if tools else {}))
            async with contextlib.aclosing(stream) as events:  # type: ignore[type-var]
                async for event in events:
                    said = outcome.take(event)
                    if said is not None and said.kind == "retry":
                        yield said
        except Exception as exc:
            await self._emit(LLMCallFinished(request=request, state=self.state, tape=self.tape,
                                             result=outcome.result(request.run_id, exc, opened)))
            raise as_hookline_error(exc, request.model) from exc
        if outcome.usage is not None:
            add_usage(self.usage_by_model, request.model, outcome.usage)
            yield StreamEvent("usage", {"usage": outcome.usage, "model": request.model,
                                        "summary": True,
                                        "elapsed_seconds": time.perf_counter() - opened})
        await self._emit(LLMCallFinished(request=request, state=self.state, tape=self.tape,
                                         result=outcome.result(request.run_id, None, opened)))

    def _system_prompt(self) -> str:
        return str(self.agent.framework.get_system_prompt(
            to_legacy_prompt(self.prompt) if self.steps == 1 else "", self.state) or "")

    def _schemas(self) -> list[ToolSchema]:
        return [ToolSchema(name, tool.description, tool.parameters)
                for name, tool in self.tools.items()]

    async def _emit(self, event: Any) -> Any:
        return await self.bus.emit(event)


async def _last_id(tape: Tape) -> int | None:
    """The id of the last entry on `tape` as the store holds it (other processes' runs
    included, the current run's not)."""
    last = await tape.entries(tape.query().tail(1))
    return last[-1].id if last else None
