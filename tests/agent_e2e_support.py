"""Frameworks, turns and tape readers for the end-to-end agent tests
(tests/builtins/agent/test_agent_e2e*.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openai_server import RecordedRequest, Reply

from hookline.builtins.config import Settings
from hookline.builtins.plugin import BuiltinPlugin
from hookline.builtins.store import SQLiteTapeStore
from hookline.builtins.tape.naming import session_tape_name
from hookline.builtins.tape.tape import Tape
from hookline.kernel import (
    Framework,
    LLMCallRequest,
    LLMCallResult,
    ToolCall,
    ToolCallResult,
    hookimpl,
)
from hookline.kernel.events import AgentEvent
from hookline.kernel.tape import TapeEntry
from hookline.kernel.turn import TurnResult

SPEC = "openai-compatible:test-model"


KEY = "sk-e2e"


SESSION = "e2e:chat"


def build(
    workspace: Path,
    api_base: str,
    *plugins: object,
    api_key: str = KEY,
    **settings: Any,
) -> tuple[Framework, BuiltinPlugin]:
    """The builtin plugin first, then `plugins` in order (so the last one runs first)."""
    home = workspace.parent / "home"
    framework = Framework(workspace)
    builtin = BuiltinPlugin(
        framework,
        settings=Settings(home=home, model=SPEC, api_key=api_key, api_base=api_base, **settings),
    )
    framework.registry.register(builtin, name="builtin")
    for index, plugin in enumerate(plugins):
        framework.registry.register(plugin, name=f"{type(plugin).__name__.lower()}-{index}")
    return framework, builtin


def watch(builtin: BuiltinPlugin) -> list[AgentEvent]:
    """Every agent event, as a handler on the agent's bus (after the plugin adapter)."""
    seen: list[AgentEvent] = []
    builtin.get_agent().bus.on(AgentEvent, seen.append)
    return seen


def of_type(events: list[AgentEvent], kind: type[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


async def turn(framework: Framework, content: str, **fields: Any) -> TurnResult:
    envelope = {"content": content, "session_id": SESSION, **fields}
    return await framework.process_inbound(envelope, stream_output=True)


async def tape_entries(framework: Framework, session_id: str = SESSION) -> list[TapeEntry]:
    """The session tape as stored (read through the scope's store)."""
    store = framework.get_tape_store()
    assert isinstance(store, SQLiteTapeStore), "the builtin store is SQLite"
    tape = Tape(store, session_tape_name(session_id, framework.workspace))
    return await tape.entries()


def run_entries(entries: list[TapeEntry]) -> list[TapeEntry]:
    """The entries after the bootstrap anchor."""
    assert entries[0].kind == "anchor"
    return entries[1:]


def tool_call_reply(name: str, arguments: dict[str, Any], call_id: str = "call_1",
                    text: str = "") -> Reply:
    return Reply(text=text, tool_calls=[{"id": call_id, "name": name, "arguments": arguments}])


def tool_message(request: RecordedRequest, call_id: str = "call_1") -> dict[str, Any]:
    (message,) = [m for m in request.messages
                  if m["role"] == "tool" and m.get("tool_call_id") == call_id]
    return message


def user_texts(request: RecordedRequest) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "user"]


class Recorder:
    """Observes every interception hook and on_error, keeping what it saw at call time."""

    def __init__(self) -> None:
        self.llm_requests: list[LLMCallRequest] = []
        self.llm_results: list[tuple[LLMCallRequest, LLMCallResult]] = []
        self.tool_calls: list[ToolCall] = []
        self.tool_results: list[dict[str, Any]] = []
        self.errors: list[tuple[str, BaseException, Any]] = []

    @hookimpl
    def before_llm_call(self, request: LLMCallRequest) -> None:
        self.llm_requests.append(request)

    @hookimpl
    def after_llm_call(self, request: LLMCallRequest, result: LLMCallResult) -> None:
        self.llm_results.append((request, result))

    @hookimpl
    def before_tool_call(self, call: ToolCall) -> None:
        self.tool_calls.append(call)

    @hookimpl
    def after_tool_call(self, call: ToolCall, result: ToolCallResult,
                        state: dict[str, Any]) -> None:
        self.tool_results.append({
            "call": call, "run_id": result.run_id, "tool": result.tool,
            "arguments": dict(result.arguments), "result": result.result,
            "error": result.error, "has_tape": state.get("_runtime_tape") is not None,
        })

    @hookimpl
    def on_error(self, stage: str, error: Exception, message: Any) -> None:
        self.errors.append((stage, error, message))
