"""One session, one history: concurrent runs, killed runs and failed records, end to end.

Real processes share one real SQLite store; a scripted model runs real shell steps; the
process is really SIGKILLed. Each test reproduces a failure seen before the run journal
and the atomic merge existed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from procs import host_pid, is_gone, wait_gone

from hookline.builtins.config import Settings
from hookline.builtins.plugin import BuiltinPlugin
from hookline.builtins.store import COMMIT_FAILED_ERROR, INTERRUPTED_ERROR, SQLiteTapeStore
from hookline.builtins.tape.fork import TapeRecordError
from hookline.builtins.tape.naming import session_tape_name
from hookline.builtins.tape.tape import BOOTSTRAP_ANCHOR
from hookline.kernel import Framework, hookimpl
from hookline.kernel.tape import TapeEntry, TapeQuery

REPO = Path(__file__).resolve().parents[3]
HOOKLINE = shutil.which("hookline", path=str(Path(sys.executable).parent))


def child_env(home: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    environ["HOOKLINE_HOME"] = str(home)
    return environ


def stored(home: Path, session: str, workspace: Path) -> tuple[list[TapeEntry], list[str]]:
    """The session tape as the next opener of the store sees it, and what it recovered."""
    with SQLiteTapeStore(home / "tapes.db") as store:
        entries = list(store.fetch_all(TapeQuery(session_tape_name(session, workspace))))
        return entries, store.recovered


def check_one_history(entries: list[TapeEntry], *, tools: bool = False) -> list[str]:
    """One bootstrap anchor first, then whole runs back to back; returns the prompts in order.

    An offline run without tools is exactly: the user message, the reply quoting it, the
    `run` event; with `tools` (the SLOW_STEP script), a tool call and its result come
    between. Interleaved runs or a second anchor break that pattern.
    """
    assert [e.kind for e in entries].count("anchor") == 1, [e.kind for e in entries]
    assert entries[0].kind == "anchor" and entries[0].payload["name"] == BOOTSTRAP_ANCHOR
    size = 5 if tools else 3
    runs = entries[1:]
    assert len(runs) % size == 0, [e.kind for e in runs]
    prompts = []
    for start in range(0, len(runs), size):
        user, *steps, reply, event = runs[start : start + size]
        assert user.kind == "message" and user.payload["role"] == "user"
        prompt = user.payload["content"]
        assert [e.kind for e in steps] == (["tool_call", "tool_result"] if tools else [])
        assert reply.kind == "message" and reply.payload["role"] == "assistant"
        expected = "slept" if tools else f'"{prompt}"'
        assert expected in reply.payload["content"], "the reply belongs to this run"
        assert event.kind == "event" and event.payload["data"]["status"] == "ok"
        prompts.append(prompt)
    return prompts


# -- concurrent runs of one session, in two processes --------------------------------------

CONCURRENT_TURNS = """
import json, sys, time
import anyio
from hookline.kernel import Framework, hookimpl

name, rounds = sys.argv[1], int(sys.argv[2])
seen = {}


class Watch:
    @hookimpl
    def before_llm_call(self, request, state):
        users = [m.text for m in request.messages if m.role == "user"]
        seen[users[-1]] = users[:-1]  # what the context held besides this turn's prompt


async def main():
    framework = Framework()
    framework.load_hooks()
    framework.registry.register(Watch(), name="watch")
    turns = []

    async def turn(prompt):
        started = time.time()
        await framework.process_inbound({"content": prompt, "session_id": "shared"})
        turns.append({"prompt": prompt, "started": started, "ended": time.time(),
                      "seen": seen[prompt]})

    async with framework.running():
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        for n in range(rounds):
            async with anyio.create_task_group() as group:  # two turns at once, as a
                for k in range(2):                           # gateway admitting both
                    group.start_soon(turn, f"{name}-{n}-{k}")
    print(json.dumps(turns), flush=True)


anyio.run(main)
"""


def test_concurrent_runs_in_two_processes_keep_one_history(tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "work"
    workspace.mkdir()
    rounds = 6
    children = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(CONCURRENT_TURNS), name, str(rounds)],
            cwd=workspace, env=child_env(home), text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        for name in ("a", "b")
    ]
    for child in children:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready", child.stderr and child.stderr.read()
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    turns: list[dict[str, Any]] = []
    for child in children:
        out, err = child.communicate(timeout=240)
        assert child.returncode == 0, err
        turns.extend(json.loads(out.splitlines()[-1]))
    assert len(turns) == 2 * rounds * 2

    entries, _ = stored(home, "shared", workspace)
    order = check_one_history(entries)
    assert sorted(order) == sorted(turn["prompt"] for turn in turns), "every turn, once"
    for turn in turns:
        # The context is the history as committed when the turn read it: a prefix of
        # the final order, holding every turn that had completed before this one began.
        seen = turn["seen"]
        assert seen == order[: len(seen)], (turn["prompt"], seen)
        done_before = {t["prompt"] for t in turns if t["ended"] < turn["started"]}
        assert done_before <= set(seen), (turn["prompt"], done_before - set(seen))


SLOW_STEP = json.dumps([
    {"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 1"}}]},
    {"text": "slept"},
])


def scripted_cli(tmp_path: Path, script: str, name: str) -> tuple[Path, Path, dict[str, str]]:
    """Home, workspace and environment for `hookline` runs playing `script` back."""
    assert HOOKLINE, "the hookline console script is not installed in this environment"
    home, workspace = tmp_path / "home", tmp_path / "work"
    workspace.mkdir()
    path = tmp_path / name
    path.write_text(script)
    return home, workspace, {**child_env(home), "HOOKLINE_MODEL": f"scripted:{path}"}


def test_hookline_runs_started_together_on_a_new_session_write_one_anchor(
    tmp_path: Path,
) -> None:
    """Each run spends a second in its tool, so runs of the new session overlap."""
    home, workspace, env = scripted_cli(tmp_path, SLOW_STEP, "slow.json")
    prompts = [f"hello {n}" for n in range(5)]
    runs = [
        subprocess.Popen([HOOKLINE, "run", "--session", "fresh", prompt], cwd=workspace,
                         env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for prompt in prompts
    ]
    for run in runs:
        out, err = run.communicate(timeout=240)
        assert run.returncode == 0, err
        assert out.strip() == "slept"
    entries, _ = stored(home, "fresh", workspace)
    assert sorted(check_one_history(entries, tools=True)) == sorted(prompts)


# -- a run killed with SIGKILL ---------------------------------------------------------------

THREE_STEPS = """
[[turns]]
[[turns.tool_calls]]
name = "shell"
arguments = { command = "echo one > one.txt" }

[[turns]]
[[turns.tool_calls]]
name = "shell"
arguments = { command = "echo two > two.txt" }

[[turns]]
[[turns.tool_calls]]
name = "shell"
arguments = { command = "echo $$ > three.pid; echo three > three.txt; exec sleep 120" }

[[turns]]
text = "all three done"
"""


def test_a_run_killed_mid_tool_is_on_the_tape_marked_interrupted(tmp_path: Path) -> None:
    home, workspace, env = scripted_cli(tmp_path, THREE_STEPS, "three.toml")
    assert HOOKLINE
    run = subprocess.Popen([HOOKLINE, "run", "--session", "killed", "run the three steps"],
                           cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pid_file = workspace / "three.pid"
    deadline = time.monotonic() + 120
    while not (workspace / "three.txt").exists() and time.monotonic() < deadline:
        assert run.poll() is None, run.communicate()[1]
        time.sleep(0.05)
    shell_pid = host_pid(int(pid_file.read_text()))
    assert not is_gone(shell_pid)
    run.send_signal(signal.SIGKILL)  # during the third step
    run.communicate(timeout=30)
    assert run.returncode == -signal.SIGKILL
    # The third step ends with hookline: its sandbox helper's pid namespace goes with it.
    assert anyio.run(wait_gone, [shell_pid]) == []
    assert [(workspace / f"{n}.txt").read_text() for n in ("one", "two", "three")] == [
        "one\n", "two\n", "three\n"]

    entries, recovered = stored(home, "killed", workspace)
    tape = session_tape_name("killed", workspace)
    assert recovered == [tape]
    assert [e.kind for e in entries] == [
        "anchor", "message", "tool_call", "tool_result", "tool_call", "tool_result",
        "tool_call", "tool_result", "event"]
    assert entries[1].payload == {"role": "user", "content": "run the three steps"}
    commands = [json.loads(e.payload["calls"][0]["arguments"])["command"]
                for e in entries if e.kind == "tool_call"]
    assert [command.split(" > ")[0] for command in commands] == [
        "echo one", "echo two", "echo $$"]
    results = [e.payload["results"][0] for e in entries if e.kind == "tool_result"]
    assert [r["is_error"] for r in results] == [False, False, True]
    # The third call was running: recovery says its outcome is unknown, never drops it.
    assert results[2]["outcome"] == "unknown" and entries[-2].meta["recovered"] is True
    marker = entries[-1]
    assert marker.payload == {"name": "run",
                              "data": {"status": "interrupted", "error": INTERRUPTED_ERROR}}
    assert marker.meta["interrupted"] is True

    again, recovered_again = stored(home, "killed", workspace)
    assert recovered_again == [] and again == entries, "recovered exactly once"
    # The next turn of the session goes on from there.
    after = subprocess.run([HOOKLINE, "run", "--session", "killed", "and now?"], cwd=workspace,
                           env=child_env(home), capture_output=True, text=True, timeout=120)
    assert after.returncode == 0, after.stderr
    final, _ = stored(home, "killed", workspace)
    assert final[: len(entries)] == entries and final[len(entries)].payload["content"] == "and now?"


# -- in one process: completed runs, failed records -----------------------------------------


def scripted(tmp_path: Path, turns: list[dict[str, Any]]) -> str:
    path = tmp_path / f"turns-{len(list(tmp_path.glob('turns-*')))}.json"
    path.write_text(json.dumps(turns))
    return f"scripted:{path}"


def beside(workspace: Path) -> Path:
    """A hookline home next to the workspace: the sandbox refuses one inside it."""
    return workspace.with_name(f"{workspace.name}-home")


TWO_FILES = [
    {"tool_calls": [{"name": "shell", "arguments": {"command": "echo a > a.txt"}}]},
    {"tool_calls": [{"name": "shell", "arguments": {"command": "echo b > b.txt"}}]},
    {"text": "wrote both"},
]


@pytest.mark.anyio
async def test_a_completed_run_is_stored_once_and_leaves_no_journal(tmp_path: Path) -> None:
    framework = Framework(tmp_path)
    settings = Settings(home=beside(tmp_path), model=scripted(tmp_path, TWO_FILES))
    framework.registry.register(BuiltinPlugin(framework, settings=settings), name="builtin")
    async with framework.running():
        result = await framework.process_inbound({"content": "write", "session_id": "s"})
        store = framework.get_tape_store()
        assert isinstance(store, SQLiteTapeStore) and store.pending_runs() == 0
    assert result.model_output == "wrote both"
    entries, recovered = stored(beside(tmp_path), "s", tmp_path)
    assert recovered == []
    assert [e.kind for e in entries] == [
        "anchor", "message", "tool_call", "tool_result", "tool_call", "tool_result", "message",
        "event"]
    assert entries[-1].payload["data"]["status"] == "ok"
    assert [e.id for e in entries] == list(range(1, 9))


class FailingJournal(SQLiteTapeStore):
    """The real store, except that journal writes fail from the `fail_from`-th one on."""

    fail_from = 2

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.writes = 0

    def journal_write(self, run: str, tape: str, ops: Any) -> None:
        self.writes += 1
        if self.writes >= self.fail_from:
            raise OSError(28, "No space left on device")
        super().journal_write(run, tape, ops)


class FailingStorePlugin:
    def __init__(self, path: Path) -> None:
        self.path = path

    @hookimpl
    def provide_tape_store(self) -> Any:
        store = FailingJournal(self.path)
        try:
            yield store
        finally:
            store.close()


@pytest.mark.anyio
@pytest.mark.parametrize("stream_output", [True, False])
async def test_a_failure_to_record_fails_the_turn_before_the_tool_runs(
    tmp_path: Path, stream_output: bool
) -> None:
    framework = Framework(tmp_path)
    settings = Settings(home=beside(tmp_path), model=scripted(tmp_path, TWO_FILES))
    framework.registry.register(BuiltinPlugin(framework, settings=settings), name="builtin")
    framework.registry.register(FailingStorePlugin(tmp_path / "tapes.db"), name="failing")
    errors: list[tuple[str, BaseException]] = []

    class Errors:
        @hookimpl
        def on_error(self, stage: str, error: Exception, message: Any) -> None:
            errors.append((stage, error))

    framework.registry.register(Errors(), name="errors")
    async with framework.running():
        with pytest.raises(TapeRecordError) as caught:
            await framework.process_inbound({"content": "write", "session_id": "s"},
                                            stream_output=stream_output)
    assert "Could not record the run" in caught.value.message
    assert "No space left on device" in caught.value.message
    assert not (tmp_path / "a.txt").exists(), "the tool call was not recorded, so not run"
    assert [stage for stage, _ in errors] == ["turn"]
    # What could be recorded is on the tape: the journal's first write and, merged at the
    # end, the call that was refused and the failed run.
    with SQLiteTapeStore(tmp_path / "tapes.db") as store:
        entries = list(store.fetch_all(TapeQuery(session_tape_name("s", tmp_path))))
        assert store.pending_runs() == 0
    assert [e.kind for e in entries] == ["anchor", "message", "tool_call", "event"]
    assert entries[-1].payload["data"]["status"] == "error"


class FailingCommit(SQLiteTapeStore):
    """The real store, except that merging a run fails (the disk filled up meanwhile)."""

    def journal_commit(self, run: str, ops: Any = ()) -> list[TapeEntry]:
        raise OSError(28, "No space left on device")


@pytest.mark.anyio
async def test_a_failed_merge_is_reported_and_its_journal_recovered(tmp_path: Path) -> None:
    framework = Framework(tmp_path)
    settings = Settings(home=beside(tmp_path), model=scripted(tmp_path, TWO_FILES))
    framework.registry.register(BuiltinPlugin(framework, settings=settings), name="builtin")

    class Store:
        @hookimpl
        def provide_tape_store(self) -> Any:
            store = FailingCommit(tmp_path / "tapes.db")
            try:
                yield store
            finally:
                store.close()

    framework.registry.register(Store(), name="failing")
    async with framework.running():
        with pytest.raises(TapeRecordError, match="Could not save the run") as caught:
            await framework.process_inbound({"content": "write", "session_id": "s"})
    assert "No space left on device" in caught.value.message
    # Both tools ran; their record was not lost: the next opening puts it on the tape.
    assert (tmp_path / "a.txt").exists() and (tmp_path / "b.txt").exists()
    with SQLiteTapeStore(tmp_path / "tapes.db") as store:
        assert store.recovered == [session_tape_name("s", tmp_path)]
        entries = list(store.fetch_all(TapeQuery(session_tape_name("s", tmp_path))))
    assert [e.kind for e in entries] == [
        "anchor", "message", "tool_call", "tool_result", "tool_call", "tool_result", "event"]
    assert entries[-1].payload["data"]["status"] == "interrupted"


class CommitMeetsALock(SQLiteTapeStore):
    """The real store with a short busy timeout; its first commit finds the write lock held
    by another connection, so that commit really fails (busy), in the store's own code."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, busy_timeout=0.2)
        self.commits = 0

    def journal_commit(self, run: str, ops: Any = ()) -> list[TapeEntry]:
        self.commits += 1
        if self.commits > 1:
            return super().journal_commit(run, ops)
        other = sqlite3.connect(self.path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            return super().journal_commit(run, ops)
        finally:
            other.execute("ROLLBACK")
            other.close()


@pytest.mark.anyio
async def test_a_failed_commit_is_in_the_next_turns_context_without_a_reopen(
    tmp_path: Path,
) -> None:
    framework = Framework(tmp_path)
    turns = [*TWO_FILES, {"text": "second turn"}]
    settings = Settings(home=beside(tmp_path), model=scripted(tmp_path, turns))
    framework.registry.register(BuiltinPlugin(framework, settings=settings), name="builtin")
    seen: list[list[str]] = []

    class Store:
        @hookimpl
        def provide_tape_store(self) -> Any:
            store = CommitMeetsALock(tmp_path / "tapes.db")
            try:
                yield store
            finally:
                store.close()

    class Context:
        @hookimpl
        def before_llm_call(self, request: Any, state: Any) -> None:
            seen.append([f"{m.role}:{m.text}" for m in request.messages if m.role != "system"])

    framework.registry.register(Store(), name="locked")
    framework.registry.register(Context(), name="context")
    async with framework.running():
        with pytest.raises(TapeRecordError, match="is busy"):
            await framework.process_inbound({"content": "write", "session_id": "s"})
        result = await framework.process_inbound({"content": "again", "session_id": "s"})
        store = framework.get_tape_store()
        assert isinstance(store, SQLiteTapeStore) and store.pending_runs() == 0
    assert result.model_output == "second turn"
    # The second turn's model saw the first turn's prompt and both tool results.
    assert seen[-1][0] == "user:write" and seen[-1][-1] == "user:again", seen[-1]
    assert sum(1 for text in seen[-1] if text.startswith("tool:")) == 2, seen[-1]
    with SQLiteTapeStore(tmp_path / "tapes.db") as reopened:
        assert reopened.recovered == []
        entries = list(reopened.fetch_all(TapeQuery(session_tape_name("s", tmp_path))))
    assert [e.kind for e in entries] == [
        "anchor", "message", "tool_call", "tool_result", "tool_call", "tool_result", "event",
        "message", "message", "event"]
    assert entries[6].payload["data"] == {"status": "interrupted", "error": COMMIT_FAILED_ERROR}
    assert entries[-1].payload["data"]["status"] == "ok"
