"""Running one tool call the model requested: announced through the interception events
(a hook may rewrite its arguments, replace its result or deny it), then recorded on the
tape and made durable before anything else runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.events import EventBus, ToolCallFinished, ToolCallStarted
from hookline.kernel.interception import ToolCall, ToolCallResult
from hookline.kernel.messages import ToolCallSpec
from hookline.kernel.tools import Tool, ToolContext
from hookline.kernel.turn import RUNTIME_TAPE

from ..tape.tape import Tape
from .outcome import requested_arguments, tool_record

__all__ = ["run_tool_call"]


async def run_tool_call(spec: ToolCallSpec, run_id: str, tape: Tape, state: dict[str, Any],
                        bus: EventBus, find_tool: Callable[[str], Tool | None],
                        running: set[str] | None = None) -> dict[str, Any]:
    """Run `spec` and return the record written on the tape (`outcome.tool_record`).
    `running` holds its id while its tool is invoked (a cancellation then may have left
    it half done; before, during its approval, it did not run)."""
    running = set() if running is None else running
    started = time.perf_counter()
    arguments, invalid = requested_arguments(spec)
    state[RUNTIME_TAPE] = tape
    context = ToolContext(tape=tape, run_id=run_id, state=state, events=bus)
    call = ToolCall(run_id=run_id, tool=spec.name, arguments=arguments, context=context)
    event = await bus.emit(ToolCallStarted(call=call, state=state))
    call, decision = event.call, event.decision
    result = ToolCallResult(run_id=run_id, tool=call.tool, arguments=dict(call.arguments))
    if decision.action == "replace":
        result.result = decision.result
    elif decision.action == "deny":
        result.error = HooklineError(
            ErrorKind.tool, decision.message or f"Tool '{call.tool}' call denied by policy hook.")
    else:
        tool = find_tool(call.tool)
        try:
            if tool is None:
                raise HooklineError(ErrorKind.not_found, f"Unknown tool name: {call.tool}")
            if invalid is not None and call.arguments == arguments:  # no hook fixed them
                raise HooklineError(ErrorKind.invalid_input, f"{call.tool}: {invalid}")
            running.add(spec.id)  # kept there by a cancellation, which closes the call
            value = await tool.invoke(dict(call.arguments), context)
            running.discard(spec.id)
            result.result = tool.render(value)
        except HooklineError as exc:
            result.error = exc
        except Exception as exc:
            result.error = HooklineError(ErrorKind.tool, f"{type(exc).__name__}: {exc}")
            result.error.__cause__ = exc
    result.duration_ms = (time.perf_counter() - started) * 1000
    await bus.emit(ToolCallFinished(call=call, result=result, state=state))
    record = tool_record(spec, decision.action, arguments, call, result)
    await tape.append("tool_result", {"results": [record]}, run_id=run_id)
    await tape.flush()  # what the tool did is durable before anything else runs
    return record
