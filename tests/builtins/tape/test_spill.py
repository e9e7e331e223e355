"""The builtin spill sidecar: oversized tool results leave the context, the model gets a note.

Turns run through `Framework.process_inbound` inside `running()` with a scripted model, so
the test can read what the model was shown in its next request (`ScriptedModel.calls`).
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from builtin_support import build_builtin, model_of

from hookline.builtins.models import ModelMessage
from hookline.builtins.plugin import BuiltinPlugin
from hookline.builtins.store import InMemoryTapeStore
from hookline.builtins.tape import spill as spill_module
from hookline.builtins.tape.naming import session_tape_name
from hookline.builtins.tape.spill import SpillSidecar, spill_result
from hookline.builtins.tape.tape import Tape
from hookline.builtins.tape.tools import spill_tools
from hookline.kernel import Framework, ToolCall, ToolCallResult, hookimpl
from hookline.kernel.errors import HooklineError
from hookline.kernel.tape import TapeEntry
from hookline.kernel.tools import Tool, ToolContext

pytestmark = pytest.mark.anyio

SESSION = "spill:chat"
BIG = 50_000
SPILL_ID = re.compile(r"spill '(spill-[0-9a-f]{12})'")


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ("MODEL", "FALLBACK_MODELS", "API_KEY", "API_BASE", "API_FORMAT", "MAX_STEPS",
                 "MAX_TOKENS", "TAPE_STORE", "STREAM"):
        monkeypatch.delenv(f"HOOKLINE_{name}", raising=False)
    path = tmp_path / "home"
    monkeypatch.setenv("HOOKLINE_HOME", str(path))
    return path


class BigText:
    """Provides `big.text`, a tool returning `n` characters (a run of `x` ending in `END`)."""

    @hookimpl
    def provide_tools(self) -> list[Tool]:
        def big_text(n: int) -> str:
            return "x" * (n - 3) + "END"

        return [Tool(name="big.text", handler=big_text, description="n characters",
                     parameters={"type": "object", "properties": {"n": {"type": "integer"}},
                                 "required": ["n"]})]


class Seen:
    """Records the model-facing result an after_tool_call implementation was given."""

    def __init__(self) -> None:
        self.results: list[Any] = []

    def record(self, result: ToolCallResult) -> None:
        self.results.append(result.result)


class NormalObserver(Seen):
    @hookimpl
    def after_tool_call(self, result: ToolCallResult) -> None:
        self.record(result)


class TrylastObserver(Seen):
    @hookimpl(trylast=True)
    def after_tool_call(self, result: ToolCallResult) -> None:
        self.record(result)


def build(workspace: Path, turns: list[dict[str, Any]], *plugins: object
          ) -> tuple[Framework, BuiltinPlugin]:
    return build_builtin(workspace, turns, *plugins)


def call_turn(name: str, arguments: dict[str, Any], call_id: str = "call-1") -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments, "id": call_id}]}


def tool_text(messages: list[ModelMessage]) -> str:
    (message,) = [m for m in messages if m.role == "tool"]
    return message.text


async def run(framework: Framework) -> None:
    await framework.process_inbound({"content": "go", "session_id": SESSION},
                                    stream_output=True)


async def tapes(framework: Framework) -> tuple[list[TapeEntry], list[TapeEntry]]:
    """The session tape and its spill sidecar tape, as stored after the run merged."""
    name = session_tape_name(SESSION, framework.workspace)
    tape = Tape(framework.get_tape_store(), name, sidecars=[SpillSidecar()])
    return await tape.entries(), await tape.sidecar_tape("spill").entries()


# -- the turn ------------------------------------------------------------------------------


async def test_an_oversized_result_is_cut_for_the_model_and_kept_whole_in_the_sidecar(
    workspace: Path,
) -> None:
    turns = [call_turn("big_text", {"n": BIG}), {"text": "done"}]
    framework, builtin = build(workspace, turns, BigText())
    async with framework.running():
        await run(framework)
        main, spilled = await tapes(framework)

    shown = tool_text(model_of(builtin).calls[1].messages)
    assert len(shown) < 3_000
    assert shown.startswith("x" * 2_000) and "END" not in shown
    assert f"showing the first 2,000 of {BIG:,} characters" in shown
    match = SPILL_ID.search(shown)
    assert match is not None and f'spill_read(id="{match[1]}", offset=2000)' in shown

    (entry,) = spilled
    assert entry.kind == "event" and entry.payload["name"] == "spill"
    data = entry.payload["data"]
    assert data["id"] == match[1] and data["tool"] == "big_text" and data["chars"] == BIG
    assert data["text"] == "x" * (BIG - 3) + "END"
    assert data["arguments"] == {"n": BIG} and data["run_id"].startswith("run-")
    assert entry.meta["run_id"] == data["run_id"]
    (recorded,) = [e for e in main if e.kind == "tool_result"]
    assert recorded.payload["results"][0]["output"] == shown, "the tape keeps the cut text"
    assert len(json.dumps([e.payload for e in main])) < BIG


async def test_a_big_shell_output_is_spilled_too(workspace: Path) -> None:
    command = "python3 -c \"print('x'*50000)\""
    framework, builtin = build(workspace, [call_turn("shell", {"command": command}),
                                           {"text": "done"}])
    async with framework.running():
        await run(framework)
        _, spilled = await tapes(framework)

    shown = tool_text(model_of(builtin).calls[1].messages)
    assert "output cut" in shown and len(shown) < 3_000
    (entry,) = spilled
    assert "x" * 50_000 in entry.payload["data"]["text"]


async def test_the_model_can_read_the_rest_with_spill_read(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spill_module.uuid, "uuid4", lambda: uuid.UUID(int=0xABC))
    spill_id = "spill-000000000000"
    turns = [
        call_turn("big_text", {"n": BIG}),
        call_turn("spill_read", {"id": spill_id, "offset": BIG - 10, "limit": 100},
                  "call-2"),
        {"text": "done"},
    ]
    framework, builtin = build(workspace, turns, BigText())
    async with framework.running():
        await run(framework)

    calls = model_of(builtin).calls
    assert "spill_read" in calls[0].tool_names
    assert f"spill '{spill_id}'" in tool_text(calls[1].messages)
    results = [m.text for m in calls[2].messages if m.role == "tool"]
    assert results[-1] == f"[characters {BIG - 10}-{BIG} of {BIG}]\nxxxxxxxEND"


async def test_small_results_are_untouched(workspace: Path) -> None:
    framework, builtin = build(workspace, [call_turn("big_text", {"n": 16_000}),
                                           {"text": "done"}], BigText())
    async with framework.running():
        await run(framework)
        _, spilled = await tapes(framework)

    assert tool_text(model_of(builtin).calls[1].messages) == "x" * 15_997 + "END"
    assert spilled == []


async def test_normal_plugins_see_the_full_text_and_later_trylast_ones_the_cut_text(
    workspace: Path,
) -> None:
    normal, late = NormalObserver(), TrylastObserver()
    turns = [call_turn("big_text", {"n": BIG}), {"text": "done"}]
    framework, builtin = build(workspace, turns, BigText(), normal, late)
    execution = framework.hook_report().binding("after_tool_call").execution
    assert [info.plugin for info in execution] == [
        "normalobserver-1", "builtin", "trylastobserver-2"]
    async with framework.running():
        await run(framework)

    (full,) = normal.results
    assert len(full) == BIG
    (cut,) = late.results
    assert "output cut" in cut and len(cut) < 3_000
    assert tool_text(model_of(builtin).calls[1].messages) == cut


# -- the pieces ----------------------------------------------------------------------------


async def test_spill_result_leaves_results_alone_unless_needed_and_spill_read_pages() -> None:
    store = InMemoryTapeStore()
    bare = Tape(store, "ws__sess")
    result = ToolCallResult("run-1", "t", {}, result="y" * 20)
    assert await spill_result(None, result, {"_runtime_tape": bare}) is None
    assert await spill_result(None, result, {}) is None
    assert result.result == "y" * 20

    small = Tape(store, "ws__sess", sidecars=[SpillSidecar(limit=10, head=4)])
    failed = ToolCallResult("run-1", "t", {}, error=RuntimeError("x"))
    assert await spill_result(None, failed, {"_runtime_tape": small}) is None
    reread = ToolCallResult("run-1", "spill_read", {}, result="y" * 20)
    assert await spill_result(None, reread, {"_runtime_tape": small}) is None

    # A non-text result is measured (and stored) as the JSON the model would see.
    context = ToolContext(tape=small, run_id="run-1")
    value = ToolCallResult("run-1", "t", {}, result={"rows": list(range(10))})
    entry = await spill_result(ToolCall("run-1", "t", {}, context=context), value, {})
    assert entry is not None
    assert value.result.startswith('{"ro\n...\n[output cut: showing the first 4 of')
    assert entry.payload["data"]["text"] == json.dumps({"rows": list(range(10))})

    (tool,) = spill_tools()
    spill_id = entry.payload["data"]["id"]
    page = await tool.invoke({"id": spill_id, "offset": 4, "limit": 5}, context)
    assert page.startswith("[characters 4-9 of ") and "continue with offset=9" in page
    with pytest.raises(HooklineError, match="no spilled output"):
        await tool.invoke({"id": "spill-000000000000"}, context)
    with pytest.raises(HooklineError, match="no spilled output"):
        await tool.invoke({"id": spill_id}, ToolContext(tape=bare))


def test_spill_sidecar_checks_its_limits() -> None:
    assert SpillSidecar().name == "spill" and SpillSidecar().limit == 16_000
    with pytest.raises(ValueError, match="limit"):
        SpillSidecar(limit=10, head=20)
