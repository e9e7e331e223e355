"""Fail-closed guards, through real turns of the builtin agent on a scripted model: a
before_tool_call / before_llm_call guard marked ``@hookimpl(fail_closed=True)`` that
raises, or answers a value of the wrong type, refuses the call; an unmarked one that
raises is skipped (the contract's fail-open default)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from builtin_support import build_builtin, model_of

from hookline.builtins.tape import Tape, session_tape_name
from hookline.kernel import LLMCallRequest, ToolCall, hookimpl

pytestmark = pytest.mark.anyio

SESSION = "guards:chat"
WRITE = {"tool_calls": [{"name": "fs_write", "arguments": {"path": "out.txt", "content": "x"},
                         "id": "call-0"}]}


class BrokenToolGuard:
    @hookimpl(fail_closed=True)
    def before_tool_call(self, call: ToolCall) -> None:
        raise RuntimeError("policy service unreachable: secret-token-123")


class OpenToolGuard:
    @hookimpl
    def before_tool_call(self, call: ToolCall) -> None:
        raise RuntimeError("policy service unreachable")


class BrokenModelGuard:
    @hookimpl(fail_closed=True)
    async def before_llm_call(self, request: LLMCallRequest) -> None:
        raise RuntimeError("classifier down")


async def _turn(workspace: Path, turns: list[dict[str, Any]], guard: object
                ) -> tuple[Any, list[dict[str, Any]], Any]:
    framework, builtin = build_builtin(workspace, turns, guard)
    async with framework.running():
        result = await framework.process_inbound({"content": "go", "session_id": SESSION})
        tape = Tape(framework.get_tape_store(), session_tape_name(SESSION, workspace))
        entries = await tape.entries()
    records = [record for entry in entries if entry.kind == "tool_result"
               for record in entry.payload["results"]]
    return result, records, model_of(builtin)


async def test_a_fail_closed_tool_guard_that_raises_denies_the_call(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        result, records, model = await _turn(workspace, [WRITE, {"text": "done"}],
                                             BrokenToolGuard())
    assert not (workspace / "out.txt").exists()
    (record,) = records
    assert record["outcome"] == "denied"
    assert record["error"] == ("refused: the guard 'brokentoolguard-0' (before_tool_call, "
                               "fail_closed) failed; the tool was not run")
    assert "secret-token-123" not in record["error"]
    assert result.model_output == "done" and model.used == 2
    (warning,) = [r for r in caplog.records if "agent_hook_failed" in r.getMessage()]
    assert warning.getMessage() == ("hook.agent_hook_failed hook=before_tool_call "
                                    "adapter=brokentoolguard-0 fail_closed=denied")
    assert warning.exc_info is not None


async def test_an_unmarked_tool_guard_that_raises_fails_open(workspace: Path) -> None:
    _result, records, _model = await _turn(workspace, [WRITE, {"text": "done"}],
                                           OpenToolGuard())
    assert (workspace / "out.txt").read_text() == "x"
    (record,) = records
    assert record["outcome"] == "ran"


async def test_a_fail_closed_model_guard_that_raises_answers_instead_of_the_model(
    workspace: Path
) -> None:
    result, records, model = await _turn(workspace, [WRITE, {"text": "done"}],
                                         BrokenModelGuard())
    assert model.used == 0, "the provider was never called"
    assert records == [] and not (workspace / "out.txt").exists()
    assert result.model_output == ("refused: the guard 'brokenmodelguard-0' (before_llm_call, "
                                   "fail_closed) failed; the model was not called")


class ConfusedToolGuard:
    """Answers with a string where a decision is expected: a broken guard too."""

    @hookimpl(fail_closed=True)
    def before_tool_call(self, call: ToolCall) -> str:
        return "deny"


class ConfusedModelGuard:
    @hookimpl(fail_closed=True)
    def before_llm_call(self, request: LLMCallRequest) -> int:
        return 42


async def test_a_fail_closed_guard_that_answers_the_wrong_type_refuses_too(
        workspace: Path) -> None:
    _result, records, _model = await _turn(workspace, [WRITE, {"text": "done"}],
                                           ConfusedToolGuard())
    assert not (workspace / "out.txt").exists()
    (record,) = records
    assert (record["outcome"], record["error"]) == ("denied", (
        "refused: the guard 'confusedtoolguard-0' (before_tool_call, fail_closed) failed; "
        "the tool was not run"))
    result, _records, model = await _turn(workspace, [WRITE, {"text": "done"}],
                                          ConfusedModelGuard())
    assert model.used == 0 and "the model was not called" in result.model_output
