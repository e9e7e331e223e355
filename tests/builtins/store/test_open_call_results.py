"""The result recovery and cancellation write for the calls of a run that had none: each
open call answered once, and the call a result answers found as the agent pairs them,
also when one response repeats an id."""

from __future__ import annotations

import json
from typing import Any

from hookline.builtins.store import open_call_results


def call(call_id: str, command: str) -> dict[str, Any]:
    return {"id": call_id, "name": "shell", "arguments": json.dumps({"command": command})}


def answered(entries: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, Any]]:
    entry = open_call_results(entries, "unknown", "stopped")
    assert entry is not None
    return [(result["call_id"], result["arguments"]) for result in entry.payload["results"]]


def test_a_repeated_id_leaves_open_the_call_that_had_no_result() -> None:
    entries = [("tool_call", {"calls": [call("x", "echo 0"), call("x", "echo 1")]}),
               ("tool_result", {"results": [{"call_id": "x", "output": "0"}]})]
    assert answered(entries) == [("x", {"command": "echo 1"})]


def test_a_result_answers_the_latest_entry_that_has_its_id_open() -> None:
    entries = [("tool_call", {"calls": [call("c", "first turn")]}),
               ("tool_call", {"calls": [call("c", "second turn"), call("d", "other")]}),
               ("tool_result", {"results": [{"call_id": "c", "output": "done"}]})]
    assert answered(entries) == [("c", {"command": "first turn"}), ("d", {"command": "other"})]


def test_every_call_answered_gives_nothing_and_odd_arguments_stay_as_sent() -> None:
    entries = [("tool_call", {"calls": [call("a", "x")]}),
               ("tool_result", {"results": [{"call_id": "a", "output": "x"}]})]
    assert open_call_results(entries, "unknown", "stopped") is None
    odd = [("tool_call", {"calls": [{"id": "b", "name": "t", "arguments": "not json"}]})]
    assert answered(odd) == [("b", "not json")]
