"""Group commit of the SQLite store: writes waiting together share one transaction, a
failing member fails alone, a failing transaction fails its whole group, and neither
other processes nor a SIGKILL make an acknowledged write go missing."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from hookline.builtins.store import SQLiteTapeStore
from hookline.kernel.errors import HooklineError
from hookline.kernel.tape import TapeEntry, TapeQuery

REPO = Path(__file__).resolve().parents[3]


def message(text: str) -> TapeEntry:
    return TapeEntry.new("message", {"role": "user", "content": text})


def texts(store: SQLiteTapeStore, tape: str) -> list[str]:
    return [entry.payload["content"] for entry in store.fetch_all(TapeQuery(tape))]


class Held:
    """Keeps the store's writer busy so that the writes started meanwhile form one group."""

    def __init__(self, store: SQLiteTapeStore) -> None:
        self.store = store
        self.gate = threading.Event()
        self.inside = threading.Event()
        self.outcomes: dict[str, Any] = {}
        self.threads: list[threading.Thread] = []

    def _block(self, conn: sqlite3.Connection) -> None:
        self.inside.set()
        self.gate.wait(30)

    def __enter__(self) -> Held:
        self.blocker = self.store._writer.submit(self._block)
        assert self.inside.wait(30)
        return self

    def start(self, name: str, call: Callable[[], Any]) -> None:
        def run() -> None:
            try:
                self.outcomes[name] = call()
            except Exception as exc:
                self.outcomes[name] = exc

        thread = threading.Thread(target=run)
        thread.start()
        self.threads.append(thread)

    def __exit__(self, *exc: object) -> None:
        deadline = time.monotonic() + 30
        while self.store._writer._queue.qsize() < len(self.threads):  # all of them waiting
            assert time.monotonic() < deadline, "the writes never reached the writer"
            time.sleep(0.01)
        self.gate.set()
        for thread in self.threads:
            thread.join(30)
        self.blocker.exception(30)  # the holding write itself may fail with its group


def commits(store: SQLiteTapeStore, statements: list[str]) -> int:
    return sum(1 for statement in statements if statement.strip().upper() == "COMMIT")


def test_writes_waiting_together_share_one_commit_and_each_gets_its_own_result(
    tmp_path: Path,
) -> None:
    with SQLiteTapeStore(tmp_path / "tapes.db") as store:
        statements: list[str] = []
        assert store._conn is not None
        store._conn.set_trace_callback(statements.append)
        with Held(store) as held:
            for n in range(8):
                ops = [(f"s{n}", "append", message(f"question {n}"))]
                held.start(f"write {n}", lambda ops=ops, n=n: store.journal_write(
                    f"run-{n}", f"s{n}", ops))
            held.start("append", lambda: store.append_many("log", [message("a"), message("b")]))
        # The holding write's own commit, then one transaction for the nine writes.
        assert commits(store, statements) == 2
        assert [e.id for e in held.outcomes["append"]] == [1, 2]
        statements.clear()
        with Held(store) as held:
            for n in range(8):
                held.start(f"commit {n}", lambda n=n: store.journal_commit(
                    f"run-{n}", [(f"s{n}", "append", message(f"answer {n}"))]))
        assert commits(store, statements) == 2
        store._conn.set_trace_callback(None)
        for n in range(8):
            assert [e.id for e in held.outcomes[f"commit {n}"]] == [1, 2]
            assert texts(store, f"s{n}") == [f"question {n}", f"answer {n}"]
        assert store.pending_runs() == 0


def test_a_member_whose_write_fails_fails_alone_and_the_rest_of_its_group_commits(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tapes.db"
    with SQLiteTapeStore(path) as store:
        store.journal_write("run-ok", "ok", [("ok", "append", message("prompt"))])
        store.journal_write("run-bad", "bad", [("bad", "append", message("prompt"))])
        with closing(sqlite3.connect(path)) as other:  # a real failure inside SQLite
            other.execute("CREATE TRIGGER refuse BEFORE INSERT ON entries WHEN NEW.tape = 'bad' "
                          "BEGIN SELECT RAISE(ABORT, 'tape bad refuses writes'); END")
            other.commit()
        with Held(store) as held:
            held.start("append ok", lambda: store.append("log", message("kept")))
            held.start("append bad", lambda: store.append_many("bad", [message("lost")]))
            held.start("commit ok", lambda: store.journal_commit(
                "run-ok", [("ok", "append", message("answer"))]))
            held.start("commit bad", lambda: store.journal_commit(
                "run-bad", [("bad", "append", message("answer"))]))
        for failed in ("append bad", "commit bad"):
            assert isinstance(held.outcomes[failed], sqlite3.IntegrityError)
            assert "tape bad refuses writes" in str(held.outcomes[failed])
        assert held.outcomes["append ok"].payload["content"] == "kept"
        assert texts(store, "log") == ["kept"]
        assert texts(store, "ok") == ["prompt", "answer"]
        assert store.pending_runs() == 1  # the failed run's journal is kept, not half applied
    with closing(sqlite3.connect(path)) as other:
        other.execute("DROP TRIGGER refuse")
        other.commit()
    with SQLiteTapeStore(path) as store:  # reopened: the failed run is recovered whole
        prompt, marker = store.fetch_all(TapeQuery("bad"))
        assert prompt.payload["content"] == "prompt"
        assert marker.payload["data"]["status"] == "interrupted"
        assert store.pending_runs() == 0


def test_a_group_whose_transaction_fails_fails_every_member_and_applies_none(
    tmp_path: Path,
) -> None:
    path, moved = tmp_path / "tapes.db", tmp_path / "moved.db"
    with SQLiteTapeStore(path) as store:
        store.append("a", message("before"))
        with Held(store) as held:
            held.start("a", lambda: store.append("a", message("one")))
            held.start("b", lambda: store.append("b", message("two")))
            path.rename(moved)  # the group's file check fails once it holds the write lock
        for name in ("a", "b"):
            assert isinstance(held.outcomes[name], HooklineError)
            assert "moved.db" not in str(held.outcomes[name])
            assert str(path) in str(held.outcomes[name])
        with pytest.raises(HooklineError):
            store.append("a", message("later"))
    with closing(sqlite3.connect(moved)) as old:
        assert old.execute("SELECT tape, id FROM entries").fetchall() == [("a", 1)]


TURNS = """
import sys, threading
from hookline.builtins.store import SQLiteTapeStore
from hookline.kernel.tape import TapeEntry

path, name, sessions, turns = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
store = SQLiteTapeStore(path)

def message(role, text):
    return TapeEntry.new("message", {"role": role, "content": text})

def session(k):
    for n in range(turns):
        run, tape = f"{name}-{k}-{n}", f"s{k}"
        store.journal_write(run, tape, [(tape, "append", message("user", run))])
        store.journal_commit(run, [(tape, "append", message("assistant", run))])

print("ready", flush=True)
sys.stdin.readline()
threads = [threading.Thread(target=session, args=(k,)) for k in range(sessions)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(store._writer.groups, flush=True)
store.close()
"""


def test_concurrent_turns_from_two_processes_keep_one_history_per_session(
    tmp_path: Path,
) -> None:
    path, sessions, turns = tmp_path / "tapes.db", 6, 15
    children = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(TURNS), str(path), name,
                                  str(sessions), str(turns)], cwd=REPO, text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE) for name in ("a", "b")]
    for child in children:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    groups = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        groups.append(int(out))
    assert sum(groups) < 2 * 2 * sessions * turns  # writes did share commits
    with SQLiteTapeStore(path) as store:
        assert store.pending_runs() == 0
        for k in range(sessions):
            entries = list(store.fetch_all(TapeQuery(f"s{k}")))
            assert [e.id for e in entries] == list(range(1, 4 * turns + 1))
            runs = [e.payload["content"] for e in entries]
            # One history: every turn's question right before its own answer.
            assert runs[0::2] == runs[1::2]
            assert [e.payload["role"] for e in entries[:2]] == ["user", "assistant"]
            for name in ("a", "b"):
                mine = [run for run in runs[0::2] if run.startswith(f"{name}-")]
                assert mine == [f"{name}-{k}-{n}" for n in range(turns)]


KILLED = """
import sys, threading
from hookline.builtins.store import SQLiteTapeStore
from hookline.kernel.tape import TapeEntry

store = SQLiteTapeStore(sys.argv[1])
lock = threading.Lock()

def writer(k):
    n = 0
    while True:
        n += 1
        run, tape = f"run-{k}-{n}", f"t{k}"
        store.journal_write(run, tape, [(tape, "append", TapeEntry.new("message", {"n": n}))])
        stored = store.journal_commit(run, [(tape, "append", TapeEntry.new("reply", {"n": n}))])
        with lock:
            print(tape, n, stored[-1].id, flush=True)

for k in range(8):
    threading.Thread(target=writer, args=(k,), daemon=True).start()
threading.Event().wait()
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_during_group_commits_loses_no_acknowledged_reply(tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(KILLED), str(path)],
                             cwd=REPO, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    assert child.stdout is not None
    acknowledged: list[str] = []
    deadline = time.monotonic() + 60
    while len(acknowledged) < 400 and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        acknowledged.append(line)
    assert len(acknowledged) >= 400, child.stderr.read() if child.stderr else ""
    os.kill(child.pid, signal.SIGKILL)  # eight writers keep the group commits going
    child.wait(timeout=30)
    acknowledged += child.stdout.read().splitlines(keepends=True)
    child.stdout.close()
    if child.stderr is not None:
        child.stderr.close()
    with SQLiteTapeStore(path) as store:
        stored = {tape: list(store.fetch_all(TapeQuery(tape))) for tape in store.list_tapes()}
    # A line the kill cut short was never acknowledged: its print had not finished.
    for line in (line for line in acknowledged if line.endswith("\n")):
        tape, n, reply_id = line.split()
        entries = {entry.id: entry for entry in stored[tape]}
        reply = entries[int(reply_id)]
        assert (reply.kind, reply.payload) == ("reply", {"n": int(n)})
        question = entries[int(reply_id) - 1]
        assert (question.kind, question.payload) == ("message", {"n": int(n)})
