"""A real gateway on the default SQLite store whose file is deleted, replaced or failing.

The gateway runs as a subprocess on a real `tapes.db` in its home; the test deletes the
file, or renames a backup over it, while it runs, and then checks what the gateway
answers and what the file at the path holds after a restart: nothing is acknowledged that
is not there. A test plugin's store (the real SQLite store with a short busy timeout)
holds the database's write lock from another connection during one commit, so that
commit really fails as busy and the store has recovered before the answer goes out; its
health check hangs while a flag file exists.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_support import (
    TEST_TOKEN,
    Gateway,
    Response,
    call,
    gateway_env,
    post,
    start_gateway_process,
    tape_payloads,
)
from plugin_site import install_plugin

from hookline.builtins.store import COMMIT_FAILED_ERROR, backup_database, check_database


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    started: list[Gateway] = []
    workspace = tmp_path / "work"
    workspace.mkdir()

    def run(**extra: str) -> Gateway:
        gateway = start_gateway_process(["--port", "0"], gateway_env(tmp_path / "home", **extra),
                                        workspace)
        started.append(gateway)
        return gateway

    yield run
    for gateway in started:
        gateway.end()


def health(gateway: Gateway, token: str | None = None) -> Response:
    return call(gateway.url, "GET", "/v1/health", token=token)


def until_health(gateway: Gateway, status: int) -> Response:
    """Probe until health answers `status` (the cached answer may lag a second)."""
    deadline = time.monotonic() + 30
    while (answer := health(gateway, TEST_TOKEN)).status != status:
        assert time.monotonic() < deadline, f"health never became {status}: {answer.body!r}"
        time.sleep(0.05)
    return answer


def turn(gateway: Gateway, content: str) -> Response:
    return post(gateway.url, {"content": content, "chat_id": "c"})


def prompts(home: Path) -> list[str]:
    """The user prompts recorded in the file at the store's path."""
    return [text for text in tape_payloads(home) if '"role": "user"' in text]


def refused_for_the_file(answer: Response, what: str) -> None:
    """The turn was not acknowledged, and its error names the file and what happened."""
    assert answer.status == 503, (answer.status, answer.body)
    assert answer.headers.get("retry-after") == "2"
    error = answer.json()["error"]
    assert f"Tape store $HOOKLINE_HOME/tapes.db {what} while this process had it open" in error
    assert "restart hookline" in error


def test_a_deleted_store_file_fails_turns_and_health_until_restart(
        start: Any, tmp_path: Path) -> None:
    home = tmp_path / "home"
    gateway = start()
    assert turn(gateway, "before the delete").status == 200
    assert health(gateway).status == 200
    os.unlink(home / "tapes.db")  # its -wal and -shm stay, as after a plain `rm`
    # At once, before health has looked: the turn's first write notices the file is gone.
    refused_for_the_file(turn(gateway, "right after the delete"), "was deleted")
    assert until_health(gateway, 503).json()["reason"].startswith(
        "the tape store cannot write: [config] Tape store $HOOKLINE_HOME/tapes.db was deleted")
    assert health(gateway).json() == {"status": "unavailable"}
    answers = [turn(gateway, f"after the delete {n}") for n in range(5)]
    assert {answer.status for answer in answers} == {503}
    gateway.end()
    # A restart makes a new, empty store at the path; it works, and nothing of the old
    # file (whose WAL the store emptied when it let go of it) comes back.
    again = start()
    assert until_health(again, 200).json() == {"status": "ok"}
    assert turn(again, "after the restart").status == 200
    [only] = prompts(home)
    assert '"after the restart"' in only

def test_a_backup_renamed_over_the_store_file_fails_turns_and_health(
        start: Any, tmp_path: Path) -> None:
    home = tmp_path / "home"
    gateway = start()
    assert turn(gateway, "in the backup").status == 200
    backup = tmp_path / "backup.db"
    assert backup_database(home / "tapes.db", backup).ok
    assert turn(gateway, "after the backup").status == 200  # in the running file only
    os.replace(backup, home / "tapes.db")
    refused_for_the_file(turn(gateway, "after the rename"), "was replaced by another file")
    assert "was replaced by another file" in until_health(gateway, 503).json()["reason"]
    answers = [turn(gateway, f"after the rename {n}") for n in range(5)]
    assert {answer.status for answer in answers} == {503}
    gateway.end()
    # The file at the path is the backup, whole, and the old file's WAL was not replayed
    # onto it: exactly the backup's turn, then what the restarted gateway records.
    assert check_database(home / "tapes.db").ok
    again = start()
    assert turn(again, "after the restart").status == 200
    assert [p.split('"content": ')[1][:20] for p in prompts(home)] == [
        '"in the backup"}', '"after the restart"}']


LOCKING_PLUGIN = '''
import os
import sqlite3
import time
from pathlib import Path

from hookline.builtins.store import SQLiteTapeStore
from hookline.kernel import hookimpl

HOME = Path(os.environ["HOOKLINE_HOME"])


class LockedOnce(SQLiteTapeStore):
    """The real store; while the flag file exists, one commit finds the write lock held by
    another connection (longer than the busy timeout), which lets go right after."""

    def journal_commit(self, run, ops=()):
        flag = HOME / "lock-next-commit"
        if not flag.exists():
            return super().journal_commit(run, ops)
        flag.unlink()
        other = sqlite3.connect(self.path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            return super().journal_commit(run, ops)
        finally:
            other.execute("ROLLBACK")
            other.close()

    def check_writable(self):
        """Hangs while the flag file exists, as on a disk that stopped answering."""
        while (HOME / "stall-health").exists():
            time.sleep(0.05)
        super().check_writable()


class LockingPlugin:
    def __init__(self, framework):
        self.framework = framework

    @hookimpl
    def provide_tape_store(self):
        store = LockedOnce(HOME / "tapes.db", busy_timeout=0.3)
        try:
            yield store
        finally:
            store.close()
'''


def install_locking_plugin(tmp_path: Path) -> str:
    """The plugin above on a PYTHONPATH folder; returns that folder."""
    return str(install_plugin(tmp_path / "site", "locking_plugin", LOCKING_PLUGIN,
                              "lock = locking_plugin:LockingPlugin"))


def test_a_temporary_store_failure_answers_503_with_retry_after_though_healthy_again(
        start: Any, tmp_path: Path) -> None:
    home = tmp_path / "home"
    gateway = start(PYTHONPATH=install_locking_plugin(tmp_path))
    assert turn(gateway, "first").status == 200
    (home / "lock-next-commit").write_text("")
    failed = turn(gateway, "second")
    # The store is healthy again when the answer goes out: still 503, to be retried.
    assert failed.status == 503, (failed.status, failed.body)
    assert failed.headers.get("retry-after") == "2"
    assert "reason" not in failed.json()
    assert "[temporary] Could not save the run" in failed.json()["error"]
    assert "is busy: database is locked" in failed.json()["error"]
    assert health(gateway, TEST_TOKEN).json() == {"status": "ok"}
    # The failed run's journal is put back at the store's next call, before the next
    # turn reads its context: the prompt of the failed turn is in the history, marked.
    assert turn(gateway, "third").status == 200
    with contextlib.closing(sqlite3.connect(home / "tapes.db")) as db:
        rows = [(kind, payload) for kind, payload in db.execute(
            "SELECT kind, payload FROM entries ORDER BY id")]
    second = next(n for n, (_, payload) in enumerate(rows) if '"second"' in payload)
    marker = next(n for n, (_, payload) in enumerate(rows) if COMMIT_FAILED_ERROR in payload)
    third = next(n for n, (_, payload) in enumerate(rows) if '"third"' in payload)
    assert second < marker < third, rows
    assert rows[marker][0] == "event" and '"interrupted"' in rows[marker][1]


def test_a_store_failure_after_a_tool_ran_is_no_invitation_to_send_it_again(
        start: Any, tmp_path: Path) -> None:
    """The run could not be saved, but its tool had run: a 500 that says so, without
    `Retry-After` (and `x-should-retry: false` for the OpenAI SDK), since the message sent
    again would run the tool again."""
    import json

    home = tmp_path / "home"
    made = {"name": "shell", "arguments": {"command": "echo ran >> counter.txt"}}
    script = tmp_path / "turns.json"
    script.write_text(json.dumps({"turns": [{"tool_calls": [made]}, {"text": "done"}] * 2}))
    gateway = start(PYTHONPATH=install_locking_plugin(tmp_path),
                    HOOKLINE_MODEL=f"scripted:{script}")
    (home / "lock-next-commit").write_text("")
    failed = turn(gateway, "run it")
    (home / "lock-next-commit").write_text("")
    completion = call(gateway.url, "POST", "/v1/chat/completions", {
        "model": f"scripted:{script}", "messages": [{"role": "user", "content": "again"}]})
    assert failed.status == 500, (failed.status, failed.body)
    assert "retry-after" not in failed.headers
    assert "[temporary] Could not save the run" in failed.json()["error"]
    assert "A tool of this turn had run: sending the message again would run it " \
           "again" in failed.json()["error"]
    assert completion.status == 500, completion.body
    assert "retry-after" not in completion.headers
    assert completion.headers["x-should-retry"] == "false"
    assert (tmp_path / "work" / "counter.txt").read_text() == "ran\nran\n"


def test_health_answers_while_the_store_check_hangs(start: Any, tmp_path: Path) -> None:
    home = tmp_path / "home"
    gateway = start(PYTHONPATH=install_locking_plugin(tmp_path))
    assert health(gateway).status == 200
    (home / "stall-health").write_text("")
    # Every probe is answered (the client waits up to 60 s; the check would hang for
    # ever): unavailable, first for the deadline, then because that check still runs.
    stalled = until_health(gateway, 503).json()["reason"]
    assert stalled == "the health check did not finish within 2 s", stalled
    # A second later the next check finds the first still running and starts no other.
    deadline = time.monotonic() + 30
    while (reason := health(gateway, TEST_TOKEN).json().get("reason")) == stalled:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert reason == "the tape store cannot write: its last check has not finished", reason
    assert health(gateway).json() == {"status": "unavailable"}
    (home / "stall-health").unlink()
    assert until_health(gateway, 200).json() == {"status": "ok"}
    assert turn(gateway, "after the stall").status == 200


def test_a_turn_waits_for_a_locked_store_no_longer_than_its_deadline(
        start: Any, tmp_path: Path) -> None:
    """Another process holds the write lock (the store would wait its 30 s busy timeout):
    the turn answers 503 once its store deadline (2 s here) is spent; what it wrote lands
    when the lock is let go, as an interrupted run, and the next turn is answered."""
    gateway = start(HOOKLINE_STORE_TURN_DEADLINE="2")
    assert turn(gateway, "before").status == 200
    other = sqlite3.connect(tmp_path / "home" / "tapes.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        locked = turn(gateway, "while locked")
        took = time.monotonic() - started
    finally:
        other.execute("ROLLBACK")
        other.close()
    print(f"the locked turn answered after {took:.2f} s")
    assert locked.status == 503 and locked.headers.get("retry-after"), locked.body
    assert b"did not answer within 2 s during this turn" in locked.body, locked.body
    assert took < 2 + 10, took  # a hang check (the busy timeout is 30 s); printed above
    assert turn(gateway, "after").status == 200
    said = prompts(tmp_path / "home")
    assert sum('"while locked"' in p for p in said) == 1, said
