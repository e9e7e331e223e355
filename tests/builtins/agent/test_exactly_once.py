"""No tool runs more often than the model asked, however the model names its calls.

Long sessions past the context window (100 entries, about 20 turns with one tool call
each), with the real agent loop, the real shell tool and the real SQLite store under a
temporary HOOKLINE_HOME: a provider that names its call `call_1`, or gives it no id,
every turn (real HTTP on 127.0.0.1), a scripted model sending empty ids, the offline model
in process for 200 turns, and `hookline run` itself, one process per turn.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_server import OpenAIServer, RecordedRequest, Reply
from terminal_support import HOOKLINE, clean_env

from hookline.builtins.config import Settings
from hookline.builtins.config.limits import CONTEXT_WINDOW
from hookline.builtins.models import ScriptedModel
from hookline.builtins.plugin import BuiltinPlugin
from hookline.builtins.store import SQLiteTapeStore
from hookline.builtins.tape.naming import session_tape_name
from hookline.builtins.tape.tape import Tape
from hookline.kernel import Framework
from hookline.kernel.tape import TapeEntry, TapeQuery

SESSION = "soak"


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No key, endpoint or setting of the machine running the tests may leak in."""
    for name in list(os.environ):
        if name.startswith(("HOOKLINE_", "REPUBLIC_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOOKLINE_HOME", str(tmp_path / "home"))


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(api_key="sk-loop") as running:
        yield running


def framework_on(workspace: Path, **settings: Any) -> Framework:
    """The builtin plugin on `settings`, compaction off: these sessions go past the tape's
    read window on purpose, to see the calls paired across its edge."""
    framework = Framework(workspace)
    builtin = BuiltinPlugin(framework, settings=Settings(home=workspace.parent / "home",
                                                         compaction=False, **settings))
    framework.registry.register(builtin, name="builtin")
    return framework


async def session_entries(framework: Framework) -> list[TapeEntry]:
    store = framework.get_tape_store()
    assert isinstance(store, SQLiteTapeStore)
    return await Tape(store, session_tape_name(SESSION, framework.workspace)).entries()


def run_events(entries: list[TapeEntry]) -> list[dict[str, Any]]:
    return [e.payload["data"] for e in entries if e.kind == "event" and e.payload["name"] == "run"]


def counter_lines(workspace: Path) -> list[str]:
    return (workspace / "counter.txt").read_text().splitlines()


# -- a model that calls `call_1` (or `""`) every turn ------------------------------------------


def command(serial: int) -> str:
    return f"echo run >> counter.txt && echo result-{serial}"


def shown_calls(messages: list[dict[str, Any]], call_id: str) -> list[int]:
    """The serials of the calls a request shows (as sent over HTTP, or as a ModelMessage's
    `to_dict`), checking that each is followed by its own result and by nothing else."""
    serials = []
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            continue
        calls = message.get("tool_calls") or []
        answers = messages[index + 1 : index + 1 + len(calls)]
        assert [answer["role"] for answer in answers] == ["tool"] * len(calls)
        for made, answer in zip(calls, answers, strict=True):
            assert made["id"] == answer["tool_call_id"] == call_id
            arguments = json.loads(made.get("function", made)["arguments"])
            found = re.fullmatch(command(0).replace("0", r"(\d+)"), arguments["command"])
            assert found, arguments
            assert f"result-{found[1]}" in answer["content"], "a result on the wrong call"
            serials.append(int(found[1]))
    assert sum(m["role"] == "tool" for m in messages) == len(serials)
    return serials


def check_requests(requests: list[list[dict[str, Any]]], entries: list[TapeEntry],
                   turns: int, call_id: str) -> None:
    """Each turn asks twice (the call, then the answer); each request shows every call of
    the session recorded within the window before its turn once, with its own result.
    The call of turn j carries serial 2j + 1, the number of the request that made it."""
    assert len(requests) == 2 * turns
    assert [(run["status"], run["steps"]) for run in run_events(entries)] == [("ok", 2)] * turns
    starts = [i for i, e in enumerate(entries)
              if e.kind == "message" and e.payload["role"] == "user"]
    call_at = [i for i, e in enumerate(entries) if e.kind == "tool_call"]
    assert len(starts) == len(call_at) == turns
    earlier: list[int] = []
    for turn in range(turns):
        window_start = max(1, starts[turn] - READ_WINDOW)  # entry 0 is the anchor
        earlier = [2 * j + 1 for j in range(turn) if call_at[j] >= window_start]
        asking, answering = requests[2 * turn], requests[2 * turn + 1]
        assert shown_calls(asking, call_id) == earlier, f"turn {turn + 1}, first request"
        assert shown_calls(answering, call_id) == [*earlier, 2 * turn + 1], \
            f"turn {turn + 1}, after its tool"
    assert len(earlier) == READ_WINDOW // 5, "the window was full: 40 earlier turns shown"


READ_WINDOW = 2 * CONTEXT_WINDOW
"""Entries the builtin reads at most (compaction off, the window slides)."""
TURNS = 45


@pytest.mark.anyio
@pytest.mark.parametrize(("sent", "seen"), [("call_1", "call_1"), ("", "call-1")])
async def test_a_provider_reusing_one_call_id_gets_every_call_back_once_with_its_result(
    server: OpenAIServer, workspace: Path, sent: str, seen: str
) -> None:
    """Over HTTP through republic; a call sent without an id is named after its place
    in the response (`call-1`), so that provider too has one id every turn."""
    def reply(request: RecordedRequest) -> Reply:
        if request.messages[-1]["role"] == "tool":
            return Reply(text="Appended.")
        serial = len(server.requests)  # this request's number
        return Reply(tool_calls=[{"id": sent, "name": "shell",
                                  "arguments": {"command": command(serial)}}])

    server.responder = reply
    framework = framework_on(workspace, model="openai-compatible:loop", api_key="sk-loop",
                             api_base=server.base_url)
    async with framework.running():
        for number in range(TURNS):
            await framework.process_inbound({"content": f"append {number}",
                                             "session_id": SESSION})
        entries = await session_entries(framework)

    assert counter_lines(workspace) == ["run"] * TURNS
    check_requests([request.messages for request in server.requests], entries, TURNS, seen)


@pytest.mark.anyio
async def test_a_scripted_model_sending_empty_ids_gets_every_call_back_once(
    workspace: Path, tmp_path: Path
) -> None:
    """The agent records the empty ids as they came, and pairs them by position."""
    turns = []
    for number in range(TURNS):
        arguments = {"command": command(2 * number + 1)}
        turns += [{"tool_calls": [{"name": "shell", "id": "", "arguments": arguments}]},
                  {"text": "Appended."}]
    script = tmp_path / "empty-ids.json"
    script.write_text(json.dumps(turns), encoding="utf-8")
    framework = framework_on(workspace, model=f"scripted:{script}")
    async with framework.running():
        for number in range(TURNS):
            await framework.process_inbound({"content": f"append {number}",
                                             "session_id": SESSION})
        entries = await session_entries(framework)
    builtin = framework.registry.get_plugin("builtin")
    assert isinstance(builtin, BuiltinPlugin)
    model = builtin.get_agent().open_model(f"scripted:{script}")
    assert isinstance(model, ScriptedModel) and model.remaining == 0

    assert counter_lines(workspace) == ["run"] * TURNS
    assert {call["id"] for e in entries if e.kind == "tool_call" for call in e.payload["calls"]} \
        == {""}
    requests = [[message.to_dict() for message in call.messages] for call in model.calls]
    check_requests(requests, entries, TURNS, "")


# -- the offline model, 200 turns in process ----------------------------------------------------


@pytest.mark.anyio
async def test_two_hundred_offline_turns_run_the_command_two_hundred_times(
    workspace: Path,
) -> None:
    turns = 200
    message = '/tool shell {"command": "echo run >> counter.txt"}'
    framework = framework_on(workspace, model="offline")
    async with framework.running():
        for _ in range(turns):
            await framework.process_inbound({"content": message, "session_id": SESSION})
        entries = await session_entries(framework)

    assert counter_lines(workspace) == ["run"] * turns
    runs = run_events(entries)
    assert [(run["status"], run["steps"], run["error"]) for run in runs] == \
        [("ok", 2, None)] * turns
    calls = [call for e in entries if e.kind == "tool_call" for call in e.payload["calls"]]
    assert len(calls) == turns and len({call["id"] for call in calls}) == turns


# -- `hookline run`, one process per turn ---------------------------------------------------------


def test_hookline_run_past_the_window_runs_each_requested_command_once(
    workspace: Path, tmp_path: Path
) -> None:
    """The issue's soak on the command line, shortened: 30 turns fill the window and go on."""
    assert HOOKLINE, "the hookline console script is not installed in this environment"
    env = clean_env(tmp_path / "home")
    message = '/tool shell {"command": "echo run >> counter.txt"}'
    turns = 30
    for number in range(turns):
        done = subprocess.run([HOOKLINE, "run", "--session", SESSION, message],
                              cwd=workspace, env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, f"turn {number + 1}: {done.stderr}"
        assert "model steps" not in done.stdout + done.stderr, f"turn {number + 1}"
        assert len(counter_lines(workspace)) == number + 1, f"turn {number + 1}: {done.stdout}"
    assert counter_lines(workspace) == ["run"] * turns
    store = SQLiteTapeStore(tmp_path / "home" / "tapes.db")
    try:
        entries = store.fetch_all(TapeQuery(session_tape_name(SESSION, workspace)))
    finally:
        store.close()
    assert len(entries) > CONTEXT_WINDOW, "the session went past the context window"
    runs = run_events(entries)
    assert [(run["status"], run["steps"]) for run in runs] == [("ok", 2)] * turns
