"""The SQLite store and its file: deleted or replaced while open, the health check, and a
run whose commit failed, on real files with real SQLite connections.

A second connection holding `BEGIN IMMEDIATE` past the store's busy timeout is what makes a
write fail as busy; `os.unlink` and `os.replace` are what an operator's `rm` and `mv` do.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hookline.builtins.channels.http.health import HealthCache
from hookline.builtins.plugin import BuiltinPlugin
from hookline.builtins.store import (
    COMMIT_FAILED_ERROR,
    SQLiteTapeStore,
    backup_database,
    check_database,
)
from hookline.kernel import Framework
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import TapeEntry, TapeQuery


def message(text: str, role: str = "user") -> TapeEntry:
    return TapeEntry.new("message", {"role": role, "content": text})


def contents(store: SQLiteTapeStore, tape: str = "t") -> list[Any]:
    return [entry.payload.get("content", entry.payload.get("data")) for entry in
            store.fetch_all(TapeQuery(tape))]


@contextlib.contextmanager
def write_lock_held(path: Path) -> Iterator[None]:
    """Another connection holds the database's write lock."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def count(path: Path, sql: str) -> int:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return int(db.execute(sql).fetchone()[0])


# -- the file deleted or replaced while the store has it open ------------------------------


def test_a_deleted_file_is_refused_with_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    store = SQLiteTapeStore(path)
    store.append("t", message("kept"))
    store.check_writable()
    os.unlink(path)
    with pytest.raises(HooklineError) as caught:
        store.check_writable()
    assert caught.value.kind is ErrorKind.config
    assert f"Tape store {path} was deleted while this process had it open" in caught.value.message
    assert "restart hookline" in caught.value.message
    assert caught.value.details == {"path": str(path)}
    # Every call is refused from then on, reads too: the file they would read is gone.
    for call in (lambda: store.append("t", message("lost")), lambda: store.list_tapes(),
                 lambda: store.journal_write("r", "t", [("t", "append", message("x"))])):
        with pytest.raises(HooklineError, match="was deleted"):
            call()
    store.close()
    # The next store at the path is new and empty: the old file's WAL was emptied.
    with SQLiteTapeStore(path) as fresh:
        assert fresh.list_tapes() == []


def test_a_file_renamed_over_the_path_is_refused_and_neither_file_is_mixed(
        tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    store = SQLiteTapeStore(path)
    store.append("t", message("in the backup"))
    assert backup_database(path, tmp_path / "backup.db").ok
    for n in range(30):  # in the running file's WAL only
        store.append("t", message(f"after the backup {n} " + "x" * 2000))
    os.replace(path, tmp_path / "old.db")  # the running file moved aside, a backup put back
    os.replace(tmp_path / "backup.db", path)
    with pytest.raises(HooklineError, match="was replaced by another file") as caught:
        store.append("t", message("never acknowledged"))
    assert caught.value.kind is ErrorKind.config
    with pytest.raises(HooklineError, match="was replaced by another file"):
        store.fetch_all(TapeQuery("t"))
    store.close()
    # The backup is itself, not the old WAL replayed onto it; the old file is whole.
    with SQLiteTapeStore(path) as restored:
        assert contents(restored) == ["in the backup"]
    old = check_database(tmp_path / "old.db")
    assert old.ok and old.entries == 31


def test_a_commit_made_after_the_file_was_deleted_is_reported_failed(tmp_path: Path) -> None:
    """The file goes between the check at the start of the write and its COMMIT: the commit
    lands in the unlinked file, so the store must not report it as done."""
    path = tmp_path / "tapes.db"
    store = SQLiteTapeStore(path)
    store.append("t", message("before"))

    def delete_at_commit(statement: str) -> None:
        if statement == "COMMIT" and path.exists():
            os.unlink(path)

    assert store._conn is not None
    store._conn.set_trace_callback(delete_at_commit)
    with pytest.raises(HooklineError, match="was deleted"):
        store.append("t", message("committed into the unlinked file"))
    store.close()


def test_an_unchanged_file_keeps_working(tmp_path: Path) -> None:
    """Same device and inode: a chmod or a copy elsewhere is no change of file."""
    path = tmp_path / "tapes.db"
    with SQLiteTapeStore(path) as store:
        store.append("t", message("one"))
        os.chmod(path, 0o600)
        assert backup_database(path, tmp_path / "copy.db").ok
        store.append("t", message("two"))
        store.check_writable()
        assert contents(store) == ["one", "two"]


# -- the health check -----------------------------------------------------------------------


def test_the_health_check_writes_as_a_turn_does_and_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    with SQLiteTapeStore(path, busy_timeout=0.2) as store:
        store.append("t", message("one"))
        for _ in range(3):
            store.check_writable()
        assert count(path, "SELECT COUNT(*) FROM entries") == 1
        assert count(path, "SELECT COUNT(*) FROM journal") == 0
        assert store.pending_runs() == 0
        with write_lock_held(path), pytest.raises(HooklineError) as caught:
            store.check_writable()
        assert caught.value.kind is ErrorKind.temporary and "is busy" in caught.value.message
        store.check_writable()


@pytest.mark.anyio
async def test_health_answers_by_its_deadline_and_a_stuck_check_holds_one_thread(
        tmp_path: Path) -> None:
    """A sync store whose check blocks: the cached health check gives up at its deadline,
    and until the blocked check ends no second one starts."""
    release = threading.Event()
    calls: list[int] = []

    class StuckStore:
        def check_writable(self) -> None:
            calls.append(1)
            release.wait(30)

    framework = Framework(tmp_path)
    plugin = BuiltinPlugin(framework)
    framework.get_tape_store = lambda: StuckStore()  # type: ignore[method-assign]
    now = [0.0]
    cache = HealthCache(plugin.store_health, deadline=0.2, clock=lambda: now[0])
    try:
        assert await cache.reason() == "the health check did not finish within 0.2 s"
        now[0] += 1.5
        assert await cache.reason() == (
            "the tape store cannot write: its last check has not finished")
        assert len(calls) == 1
    finally:
        release.set()
    while plugin._store_probe is not None and not plugin._store_probe.is_set():
        await anyio.sleep(0.01)
    now[0] += 1.5
    assert await cache.reason() is None
    assert len(calls) == 2


# -- a run whose commit failed --------------------------------------------------------------


def test_a_failed_commit_is_put_on_the_tape_at_the_next_call(tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    with SQLiteTapeStore(path, busy_timeout=0.2) as store:
        store.append("t", message("earlier"))
        store.journal_write("run-1", "t", [("t", "append", message("the prompt"))])
        with write_lock_held(path), pytest.raises(HooklineError, match="is busy"):
            store.journal_commit("run-1", [("t", "append", message("the reply", "assistant"))])
        # The very next call, a read, finds the run's journal on the tape, then the marker.
        entries = list(store.fetch_all(TapeQuery("t")))
        assert [entry.kind for entry in entries] == ["message", "message", "event"]
        assert entries[1].payload["content"] == "the prompt"
        assert entries[2].payload["data"] == {"status": "interrupted",
                                              "error": COMMIT_FAILED_ERROR}
        assert entries[2].meta["interrupted"] is True and "started" in entries[2].meta
        assert store.pending_runs() == 0
        assert store.recovered == []


def test_a_failed_commit_waits_while_the_store_still_cannot_write(tmp_path: Path) -> None:
    path = tmp_path / "tapes.db"
    with SQLiteTapeStore(path, busy_timeout=0.2) as store:
        store.journal_write("run-1", "t", [("t", "append", message("the prompt"))])
        with write_lock_held(path):
            with pytest.raises(HooklineError, match="is busy"):
                store.journal_commit("run-1")
            assert store.fetch_all(TapeQuery("t")) == []  # read on; the run waits
            with pytest.raises(HooklineError, match="is busy"):
                store.append("t", message("another"))
        store.append("t", message("after"))
        assert contents(store) == [
            "the prompt", {"status": "interrupted", "error": COMMIT_FAILED_ERROR}, "after"]


def test_a_sound_store_in_a_folder_the_user_may_not_write_checks_sound() -> None:
    """SQLite cannot make the -shm file a reader of a WAL database needs where the folder
    is read-only (a read-only home): the file is read as it lies, not called damaged."""
    base = Path(tempfile.mkdtemp(dir="/var/tmp"))  # a place `nobody` may enter
    try:
        base.chmod(0o755)
        path = base / "tapes.db"
        made = sqlite3.connect(path)
        made.execute("PRAGMA journal_mode=WAL")
        made.execute("CREATE TABLE entries (tape TEXT)")
        made.commit()
        made.close()
        user = 65534 if os.getuid() == 0 else os.getuid()
        os.chown(path, user, user)
        if os.getuid() != 0:
            base.chmod(0o555)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the check as a user who owns the file, not the folder
            try:
                if os.getuid() == 0:
                    os.setgroups([])
                    os.setgid(65534)
                    os.setuid(65534)
                found = check_database(path)
                os.write(write, repr((found.ok, found.problems)).encode())
            finally:
                os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        with os.fdopen(read) as said:
            assert said.read() == "(True, [])"
    finally:
        base.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_a_file_that_is_no_database_keeps_its_mode(tmp_path: Path) -> None:
    """A mistyped `tape_store` naming someone's notes: refused, and not made private (it
    is not hookline's)."""
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    notes.chmod(0o644)
    with pytest.raises(HooklineError, match="is damaged: file is not a database"):
        SQLiteTapeStore(notes)
    assert stat.S_IMODE(notes.stat().st_mode) == 0o644
    assert notes.read_text() == "my notes\n"
