"""SQLite store specifics: setup, schema versioning, two processes, and a SIGKILL mid-append."""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from store_files import damage, fill_store

from hookline.builtins.store import (
    INTERRUPTED_ERROR,
    SCHEMA_VERSION,
    SQLiteTapeStore,
    backup_database,
    check_database,
)
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import TapeEntry, TapeQuery

REPO = Path(__file__).resolve().parents[3]


def run_child(script: str, *args: str) -> subprocess.Popen[str]:
    """A child running `script` with the venv's python (the interpreter running the tests)."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_setup_wal_synchronous_schema_and_parent_directory(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "tapes.db"
    with SQLiteTapeStore(path) as store:
        assert store.path == path and path.exists()
        store.append("t", TapeEntry.new("event", {}))
        conn = store._conn  # the store's own connection: synchronous is per connection
        assert conn is not None
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        columns = [row[1] for row in raw.execute("PRAGMA table_info(entries)")]
        assert columns == ["tape", "id", "kind", "payload", "meta", "date"]
        pk = [
            row[1]
            for row in sorted(raw.execute("PRAGMA table_info(entries)"), key=lambda r: r[5])
            if row[5]
        ]
        assert pk == ["tape", "id"]
    finally:
        raw.close()
    with SQLiteTapeStore(path, synchronous="NORMAL") as store:
        assert store._conn is not None
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 1


def test_bad_options_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        SQLiteTapeStore(tmp_path / "x.db", synchronous="OFF")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        SQLiteTapeStore(tmp_path / "x.db", busy_timeout=-1)


def test_entries_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    with SQLiteTapeStore(path) as store:
        first = store.append("t", TapeEntry.new("message", {"role": "user", "content": "ü"}, k=1))
    with SQLiteTapeStore(path) as store:
        assert list(store.fetch_all(TapeQuery("t"))) == [first]
        assert store.append("t", TapeEntry.new("event", {})).id == 2


def test_newer_schema_is_refused_and_older_file_is_untouched(tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(HooklineError) as caught:
        SQLiteTapeStore(path)
    assert caught.value.kind is ErrorKind.config
    assert "newer" in caught.value.message


def test_closed_store_raises_and_close_is_idempotent(tmp_path: Path) -> None:
    store = SQLiteTapeStore(tmp_path / "tapes.db")
    store.close()
    store.close()
    with pytest.raises(HooklineError) as caught:
        store.append("t", TapeEntry.new("event", {}))
    assert caught.value.kind is ErrorKind.config
    with pytest.raises(HooklineError):
        store.list_tapes()


def test_a_failed_append_rolls_back_and_leaves_no_transaction_open(tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    with SQLiteTapeStore(path) as store:
        assert store._conn is not None
        # Make the INSERT itself fail, inside the append's transaction.
        store._conn.execute(
            "CREATE TEMP TRIGGER boom BEFORE INSERT ON entries WHEN NEW.kind = 'boom' "
            "BEGIN SELECT RAISE(ABORT, 'boom'); END"
        )
        assert store.append("t", TapeEntry.new("event", {})).id == 1
        with pytest.raises(sqlite3.IntegrityError):
            store.append("t", TapeEntry.new("boom", {}))
        assert not store._conn.in_transaction
        with pytest.raises(HooklineError):
            store.append("t", TapeEntry.new("event", {"x": object()}))
        assert store.append("t", TapeEntry.new("event", {})).id == 2
        assert [e.kind for e in store.fetch_all(TapeQuery("t"))] == ["event", "event"]


def test_busy_database_is_a_temporary_error(tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    with SQLiteTapeStore(path, busy_timeout=0.05) as store:
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            with pytest.raises(HooklineError) as caught:
                store.append("t", TapeEntry.new("event", {}))
            assert caught.value.kind is ErrorKind.temporary
            assert list(store.fetch_all(TapeQuery("t"))) == []  # readers are not blocked
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert store.append("t", TapeEntry.new("event", {})).id == 1


APPENDER = """
import sys
from hookline.builtins.store import SQLiteTapeStore
from hookline.kernel.tape import TapeEntry

path, writer, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = SQLiteTapeStore(path)
print("ready", flush=True)
sys.stdin.readline()  # start together
for n in range(count):
    entry = store.append("shared", TapeEntry.new("event", {"writer": writer, "n": n}))
    store.append(f"own-{writer}", TapeEntry.new("event", {"n": n}))
    print(entry.id, flush=True)
store.close()
"""


def test_two_processes_appending_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "tapes.db"
    count = 150
    children = []
    for writer in ("a", "b"):
        child = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(APPENDER), str(path), writer, str(count)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        children.append(child)
    for child in children:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            child.kill()
            raise AssertionError(f"a writer failed to open the store: {child.communicate()[1]}")
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    acknowledged: list[int] = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        acknowledged.extend(int(line) for line in out.split())
    assert sorted(acknowledged) == list(range(1, 2 * count + 1))  # unique, gapless

    with SQLiteTapeStore(path) as store:
        entries = list(store.fetch_all(TapeQuery("shared")))
        assert [e.id for e in entries] == list(range(1, 2 * count + 1))
        for writer in ("a", "b"):
            ns = [e.payload["n"] for e in entries if e.payload["writer"] == writer]
            assert ns == list(range(count))  # each writer's order kept
            own = list(store.fetch_all(TapeQuery(f"own-{writer}")))
            assert [e.id for e in own] == list(range(1, count + 1))
        assert store.list_tapes() == ["own-a", "own-b", "shared"]


KILLED_WRITER = """
import sys
from hookline.builtins.store import SQLiteTapeStore
from hookline.kernel.tape import TapeEntry

def payload(n):
    blob = "x" * (n % 40) * 512
    return {"n": n, "text": f"entry {n} ✓", "blob": blob, "list": list(range(n % 7))}

store = SQLiteTapeStore(sys.argv[1])
n = 0
while True:
    n += 1
    entry = store.append("log", TapeEntry.new("message", payload(n), seq=n))
    print(entry.id, flush=True)
"""


def expected_payload(n: int) -> dict:
    return {
        "n": n,
        "text": f"entry {n} ✓",
        "blob": "x" * (n % 40) * 512,
        "list": list(range(n % 7)),
    }


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_mid_append_keeps_every_acknowledged_entry_intact(tmp_path: Path) -> None:
    path = tmp_path / "durable" / "tapes.db"
    child = run_child(KILLED_WRITER, str(path))
    assert child.stdout is not None
    acknowledged: list[int] = []
    deadline = time.monotonic() + 60
    while len(acknowledged) < 300 and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        acknowledged.append(int(line))
    assert len(acknowledged) >= 300, child.stderr.read() if child.stderr else ""
    os.kill(child.pid, signal.SIGKILL)  # while it keeps appending
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    # Ids printed before the kill and still in the pipe were acknowledged too.
    acknowledged.extend(int(line) for line in child.stdout.read().split())
    child.stdout.close()
    if child.stderr is not None:
        child.stderr.close()

    with SQLiteTapeStore(path) as store:
        assert store._conn is not None
        assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        entries = list(store.fetch_all(TapeQuery("log")))
        raw_rows = store._conn.execute(
            "SELECT id, payload, meta FROM entries WHERE tape = 'log' ORDER BY id"
        ).fetchall()
    by_id = {entry.id: entry for entry in entries}
    for entry_id in acknowledged:
        entry = by_id[entry_id]
        assert entry.kind == "message"
        assert entry.payload == expected_payload(entry_id)
        assert entry.meta == {"seq": entry_id}
    # Nothing partial: ids gapless, every stored row (acknowledged or not) complete.
    assert [entry.id for entry in entries] == list(range(1, len(entries) + 1))
    assert len(entries) >= max(acknowledged)
    for entry_id, payload, meta in raw_rows:
        assert json.loads(payload) == expected_payload(entry_id)
        assert json.loads(meta) == {"seq": entry_id}


# -- schema upgrade, batches, the run journal ----------------------------------------------


def test_a_version_1_file_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    raw = sqlite3.connect(path)
    raw.execute(
        "CREATE TABLE entries (tape TEXT NOT NULL, id INTEGER NOT NULL, kind TEXT NOT NULL, "
        "payload TEXT NOT NULL, meta TEXT NOT NULL, date TEXT NOT NULL, PRIMARY KEY (tape, id)) "
        "WITHOUT ROWID"
    )
    raw.execute("INSERT INTO entries VALUES ('t', 1, 'anchor', '{\"name\": \"a\"}', '{}', 'd')")
    raw.execute("PRAGMA user_version = 1")
    raw.commit()
    raw.close()
    with SQLiteTapeStore(path) as store:
        assert [e.payload for e in store.fetch_all(TapeQuery("t"))] == [{"name": "a"}]
        assert store.append("t", TapeEntry.new("event", {})).id == 2
        conn = store._conn
        assert conn is not None
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
        indexes = [row[1] for row in conn.execute("PRAGMA index_list(entries)")]
        assert "entries_by_kind" in indexes
        plan = " ".join(str(row) for row in conn.execute(
            "EXPLAIN QUERY PLAN SELECT MAX(id) FROM entries WHERE tape = 't' AND kind = 'anchor'"))
        assert "entries_by_kind" in plan, "the last anchor is found through the index"


def commits_during(store: SQLiteTapeStore, action: Callable[[], object]) -> int:
    statements: list[str] = []
    assert store._conn is not None
    store._conn.set_trace_callback(statements.append)
    try:
        action()
    finally:
        store._conn.set_trace_callback(None)
    return sum(1 for statement in statements if statement.strip().upper() == "COMMIT")


def test_a_batch_and_a_run_commit_are_one_transaction_each(tmp_path: Path) -> None:
    with SQLiteTapeStore(tmp_path / "tapes.db") as store:
        batch = [TapeEntry.new("event", {"n": n}) for n in range(20)]
        assert commits_during(store, lambda: store.append_many("t", batch)) == 1
        ops = [("t", "append", entry) for entry in batch]
        assert commits_during(store, lambda: store.journal_write("run-1", "t", ops[:5])) == 1
        assert commits_during(store, lambda: store.journal_commit("run-1", ops[5:])) == 1
        assert [e.payload["n"] for e in store.fetch_all(TapeQuery("t"))] == [
            *range(20), *range(20)]


def test_the_journal_is_unseen_until_its_commit_which_applies_it_once(tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    anchor = TapeEntry.new("anchor", {"name": "session/start", "state": {}})
    with SQLiteTapeStore(path) as store:
        store.journal_write("run-1", "t", [("t", "bootstrap", anchor),
                                           ("t", "append", TapeEntry.new("event", {"n": 1})),
                                           ("t__sidecar__s", "append", TapeEntry.new("event", {}))])
        assert list(store.fetch_all(TapeQuery("t"))) == [] and store.pending_runs() == 1
        store.append("t", TapeEntry.new("anchor", {"name": "elsewhere"}))  # another writer
        stored = store.journal_commit("run-1", [("t", "append", TapeEntry.new("event", {"n": 2}))])
        # The bootstrap anchor was dropped: the tape got one meanwhile.
        assert [(e.id, e.kind) for e in stored] == [(2, "event"), (1, "event"), (3, "event")]
        assert store.pending_runs() == 0
        assert store.journal_commit("run-1") == []  # an empty or finished journal: nothing
    with SQLiteTapeStore(path) as store:
        assert store.recovered == []
        assert [e.kind for e in store.fetch_all(TapeQuery("t"))] == ["anchor", "event", "event"]
        with pytest.raises(HooklineError, match="journal action"):
            store.journal_write("r", "t", [("t", "drop", None)])
        with pytest.raises(HooklineError, match="must be an anchor"):
            store.journal_write("r", "t", [("t", "bootstrap", TapeEntry.new("x", {}))])
        assert store.pending_runs() == 0


def test_a_live_owners_journal_is_left_alone_and_a_dead_ones_recovered(tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    running = SQLiteTapeStore(path)
    running.journal_write("run-1", "t", [("t", "append", TapeEntry.new("message", {"n": 1}))])
    owners = list((tmp_path / "tapes.db-owners").iterdir())
    assert len(owners) == 1
    with SQLiteTapeStore(path) as other:  # another opener while the run is alive
        assert other.recovered == [] and other.pending_runs() == 1
        assert list(other.fetch_all(TapeQuery("t"))) == []
    running.close()  # its process "ends" without committing: the owner file goes
    assert list((tmp_path / "tapes.db-owners").iterdir()) == []
    with SQLiteTapeStore(path) as reopened:
        assert reopened.recovered == ["t"] and reopened.pending_runs() == 0
        entries = list(reopened.fetch_all(TapeQuery("t")))
    assert [e.kind for e in entries] == ["message", "event"]
    marker = entries[1]
    assert marker.payload["name"] == "run"
    assert marker.payload["data"] == {"status": "interrupted", "error": INTERRUPTED_ERROR}
    assert marker.meta["interrupted"] is True and "recovered" in marker.meta


def test_a_call_left_without_a_result_is_recovered_with_an_unknown_outcome(
        tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    running = SQLiteTapeStore(path)
    calls = [{"id": "c1", "name": "shell", "arguments": '{"command": "make"}'},
             {"id": "c2", "name": "shell", "arguments": '{"command": "make deploy"}'}]
    running.journal_write("run-1", "t", [
        ("t", "append", TapeEntry.new("tool_call", {"calls": calls})),
        ("t", "append", TapeEntry.new("tool_result", {"results": [
            {"call_id": "c1", "name": "shell", "output": "ok", "outcome": "ran"}]}))])
    running.close()  # its process ended while c2 ran
    with SQLiteTapeStore(path) as reopened:
        entries = list(reopened.fetch_all(TapeQuery("t")))
    assert [e.kind for e in entries] == ["tool_call", "tool_result", "tool_result", "event"]
    (unknown,) = entries[2].payload["results"]
    assert unknown["call_id"] == "c2" and unknown["outcome"] == "unknown"
    assert unknown["is_error"] is True and "outcome is unknown" in unknown["output"]
    assert unknown["arguments"] == {"command": "make deploy"}  # as a ran result's
    assert entries[2].meta["recovered"] is True


@pytest.mark.parametrize("where", ["middle", "header"])
def test_a_damaged_file_is_refused_naming_it_and_left_untouched(
    tmp_path: Path, where: str
) -> None:
    path = tmp_path / "tapes.db"
    fill_store(path)
    damaged = damage(path, None if where == "middle" else 0)
    with pytest.raises(HooklineError) as caught:
        SQLiteTapeStore(path)
    error = caught.value
    assert error.kind is ErrorKind.config
    assert f"Tape store {path} is damaged" in error.message
    assert "backup" in error.message and f"mv {path} {path}.damaged" in error.message
    assert "\n" not in error.message, "one line"
    assert error.details == {"path": str(path)}
    assert path.read_bytes() == damaged, "nothing was written into the damaged file"


def test_a_damaged_entry_found_later_stops_the_store(tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    with SQLiteTapeStore(path) as store:
        store.append_many("t", [TapeEntry.new("event", {"n": n}) for n in range(3)])
        raw = sqlite3.connect(path)
        raw.execute("UPDATE entries SET payload = '{\"n\": 1' WHERE id = 2")  # cut short
        raw.commit()
        raw.close()
        with pytest.raises(HooklineError, match=r"entry 2 of tape 't' is not valid JSON"):
            store.fetch_all(TapeQuery("t"))
        with pytest.raises(HooklineError, match="is damaged"):
            store.append("t", TapeEntry.new("event", {}))  # refused, not written
    raw = sqlite3.connect(path)
    assert raw.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 3
    raw.close()


def test_check_and_backup_of_a_sound_and_a_damaged_file(tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    fill_store(path)
    sound = check_database(path)
    assert sound.ok and (sound.tapes, sound.entries, sound.schema_version) == (20, 2000, 2)
    copy = backup_database(path, tmp_path / "copies" / "b.db")
    assert copy.ok and copy.entries == 2000
    with pytest.raises(HooklineError, match="already exists"):
        backup_database(path, tmp_path / "copies" / "b.db")
    with pytest.raises(HooklineError) as missing:
        backup_database(tmp_path / "none.db", tmp_path / "c.db")
    assert missing.value.kind is ErrorKind.not_found
    damage(path)
    damaged = check_database(path)
    assert not damaged.ok and damaged.problems
    assert not check_database(tmp_path / "none.db").ok


FULL_DISK_CHILD = r"""
import resource
import signal
import sys

from hookline.builtins.store import SQLiteTapeStore
from hookline.kernel.tape import TapeEntry

store = SQLiteTapeStore(sys.argv[1])
store.append("t", TapeEntry.new("message", {"role": "user", "content": "hi"}))
store.check_writable()
print("writable", flush=True)
# No file may grow from here on, as on a full disk (SIGXFSZ ignored: writes fail instead).
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (1, hard))
failures = 0
for _ in range(50):  # until the WAL has no reusable room left
    try:
        store.check_writable()
    except Exception as exc:
        print("refused", type(exc).__name__, exc, flush=True)
        failures += 1
        break
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
store.check_writable()
print("writable again" if failures else "never refused", flush=True)
"""


def test_check_writable_tells_the_truth_about_a_full_disk(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", FULL_DISK_CHILD, str(tmp_path / "t.db")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "writable"
    assert lines[1].startswith("refused "), out.stdout
    assert "disk" in lines[1].lower(), "SQLite's own report (disk I/O error, disk is full)"
    assert lines[-1] == "writable again"




OPENER = """
import sys
from hookline.builtins.store import SQLiteTapeStore

sys.stdin.readline()  # open together
SQLiteTapeStore(sys.argv[1]).close()
print("opened", flush=True)
"""


def test_processes_opening_a_new_store_at_once_all_succeed(tmp_path: Path) -> None:
    """SQLite does not apply the busy timeout to every step of making a new file a WAL
    database: without a retry, one of two processes creating the same new store at once
    could fail with "database is locked" (about 1 round in 20 here)."""
    for round_ in range(30):
        path = tmp_path / f"round-{round_}" / "tapes.db"
        openers = [subprocess.Popen([sys.executable, "-c", OPENER, str(path)], cwd=REPO,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
                   for _ in range(2)]
        time.sleep(0.3)  # both have imported hookline and wait on stdin
        for opener in openers:
            assert opener.stdin is not None
            opener.stdin.write("go\n")
            opener.stdin.flush()
        for opener in openers:
            out, err = opener.communicate(timeout=60)
            assert (opener.returncode, out.strip()) == (0, "opened"), err


FULL_DISK_APPENDS = r"""
import resource
import signal
import sys

from hookline.builtins.store import SQLiteTapeStore
from hookline.kernel.errors import HooklineError
from hookline.kernel.tape import TapeEntry

store = SQLiteTapeStore(sys.argv[1])
store.append("t", TapeEntry.new("message", {"n": 0}))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (1, hard))  # as on a full disk
for n in range(1, 200):
    try:
        store.append("t", TapeEntry.new("message", {"n": n, "pad": "x" * 4000}))
    except HooklineError as exc:
        print("refused", exc.kind.value, exc.message, flush=True)
        break
    except Exception as exc:
        print("raw", type(exc).__name__, exc, flush=True)
        break
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
store.append("t", TapeEntry.new("message", {"n": "after"}))
print("appended again", flush=True)
"""


def test_a_full_disk_is_a_temporary_error_never_a_raw_sqlite_one(tmp_path: Path) -> None:
    """What the gateway answers 503 with Retry-After: a `temporary` HooklineError naming
    the store and SQLite's own words; the store takes writes again once there is room."""
    out = subprocess.run([sys.executable, "-c", FULL_DISK_APPENDS, str(tmp_path / "t.db")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    refused, again = out.stdout.splitlines()
    assert refused.startswith("refused temporary Tape store "), out.stdout
    assert "disk" in refused.lower() and "Nothing of this call was written" in refused
    assert again == "appended again"


def test_a_failed_write_is_raised_once_not_logged_again_as_never_retrieved(
        caplog: pytest.LogCaptureFixture) -> None:
    """A disk filled mid-turn: the caller raises the write's failure; asyncio must not
    also print "Future exception was never retrieved" for its copy of the future."""
    import asyncio
    import gc
    from concurrent.futures import Future

    from hookline.builtins.store.sqlite.writer import wait

    async def main() -> None:
        written: Future[None] = Future()
        asyncio.get_running_loop().call_later(
            0.01, written.set_exception,
            HooklineError(ErrorKind.temporary, "database or disk is full"))
        with pytest.raises(HooklineError, match="disk is full"):
            await wait(written)
        await asyncio.sleep(0)

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(main())
        gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


def test_a_write_lock_held_past_the_wait_is_said_as_such(tmp_path: Path) -> None:
    """Another process holding the write lock (a long write, or one suspended while it
    wrote) is what the error says, not a full disk."""
    path = tmp_path / "tapes.db"
    SQLiteTapeStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(HooklineError) as caught, \
                SQLiteTapeStore(path, busy_timeout=0.2) as store:
            store.append("main", TapeEntry.new("event", {}))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert caught.value.kind is ErrorKind.temporary
    assert "database is locked" in caught.value.message
    assert ("another process has held the store's write lock for longer than the wait"
            in caught.value.message)
    assert "free disk space" not in caught.value.message
