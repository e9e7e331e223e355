"""What the PostgreSQL tape store does beyond the shared contract (test_store_contract.py):
the schema version, the run journal and its recovery across processes, several stores (as
replicas) on one database, the pushed-down anchors, and no password in any text it shows.
Everything runs on a real server (tests/postgres_support.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from postgres_support import BlockingStore, StoreFactory, password_of, unavailable, wait_until

from hookline.builtins.config import load_settings
from hookline.builtins.store.url import StoreURL, is_postgres_url, redact_url
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import TapeEntry, TapeQuery

pytestmark = pytest.mark.skipif(os.name != "posix", reason="signals are POSIX")


def new(kind: str, **payload: Any) -> TapeEntry:
    return TapeEntry.new(kind, payload)


def sql(url: str, statement: str, *args: Any) -> list[tuple]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement, args or None)
        return cursor.fetchall() if cursor.description else []


def test_urls_are_recognised_and_shown_without_passwords() -> None:
    assert is_postgres_url("postgresql://u:p@h/db") and is_postgres_url(" POSTGRES://h/db")
    assert not is_postgres_url("tapes.db") and not is_postgres_url("/x/postgresql://")
    assert redact_url("postgresql://u:s3cret@h:5/db?password=other&sslmode=require") == (
        "postgresql://***@h:5/db?password=***&sslmode=require")
    url = StoreURL("postgresql://u:s3cret@h/db")
    assert "s3cret" not in repr(url) and str(url).endswith("@h/db")


def test_the_setting_takes_a_url_and_keeps_paths_as_paths(tmp_path: Path) -> None:
    url = "postgresql://u:s3cret@db.internal:5432/hookline"
    settings = load_settings({"HOOKLINE_TAPE_STORE": url}, home=tmp_path)
    assert settings.tape_store == url and isinstance(settings.tape_store, str)
    assert "s3cret" not in repr(settings)
    (tmp_path / "config.toml").write_text('tape_store = "postgres://h/db"\n')
    assert load_settings({}, home=tmp_path).tape_store == "postgres://h/db"
    (tmp_path / "config.toml").write_text('tape_store = "tapes/x.db"\n')
    assert load_settings({}, home=tmp_path).tape_store == tmp_path / "tapes/x.db"


def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from hookline.builtins.store.postgres import store as postgres

    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now fails
    with pytest.raises(HooklineError) as caught:
        postgres._import_driver()
    assert caught.value.kind is ErrorKind.config
    assert "pip install 'hookline[postgres]'" in caught.value.message


def test_the_sqlite_path_never_imports_the_driver(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        import sys, anyio
        from hookline.builtins.plugin import BuiltinPlugin
        from hookline.builtins.config import load_settings
        plugin = BuiltinPlugin(None, load_settings(home=sys.argv[1]))
        async def main():
            async for store in plugin.provide_tape_store():
                print(type(store).__name__)
                break
        anyio.run(main)
        print(sorted(m for m in sys.modules if m.startswith("psycopg")))
    """)
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, check=True, env={**os.environ, "HOOKLINE_TAPE_STORE": ""})
    assert done.stdout.split() == ["SQLiteTapeStore", "[]"], done.stderr


def test_schema_version_is_recorded_and_a_newer_database_refused(
    postgres_stores: StoreFactory,
) -> None:
    url = postgres_stores.url()
    store = postgres_stores.blocking(url)
    store.append("t", new("event"))
    assert sql(url, "SELECT version FROM hookline_schema_version") == [(2,)]
    postgres_stores.blocking(url)  # a second opening migrates nothing
    assert sql(url, "SELECT version FROM hookline_schema_version") == [(2,)]
    sql(url, "UPDATE hookline_schema_version SET version = 99")
    with pytest.raises(HooklineError) as caught:
        postgres_stores.open(url)
    assert caught.value.kind is ErrorKind.config
    assert "schema version 99, newer than this hookline supports (2)" in caught.value.message
    assert password_of(url) not in caught.value.message and "***@" in caught.value.message


def test_errors_and_reprs_never_show_the_password(postgres_stores: StoreFactory) -> None:
    url = postgres_stores.url()
    store = postgres_stores.open(url)
    secret = password_of(url)
    assert secret not in repr(store) and secret not in store.display
    from postgres_support import free_port

    closed = url.replace(url.split("@")[1].split("/")[0], f"127.0.0.1:{free_port()}")
    wrong = url.replace(secret, secret + "-wrong")
    for bad in (closed, wrong):
        with pytest.raises(HooklineError) as caught:
            postgres_stores.open(bad, timeout=2.0)
        assert caught.value.kind is ErrorKind.temporary
        text = str(caught.value) + repr(caught.value.args)
        assert secret not in text and "cannot be opened" in text


def test_the_journal_is_unseen_until_its_commit_which_applies_it_once(
    postgres_stores: StoreFactory,
) -> None:
    store = postgres_stores.blocking()
    store.append("t", new("event", n=0))
    store.journal_write("run-1", "t", [("t", "bootstrap", new("anchor", name="session/start")),
                                       ("t", "append", new("message", n=1))])
    store.journal_write("run-1", "t", [("t__sidecar__s", "append", new("event", n=2))])
    assert [e.id for e in store.fetch_all(TapeQuery("t"))] == [1]
    assert store.pending_runs() == 1
    stored = store.journal_commit("run-1", [("t", "append", new("message", n=3))])
    assert [(e.kind, e.id) for e in stored] == [("anchor", 2), ("message", 3), ("event", 1),
                                                 ("message", 4)]
    assert store.pending_runs() == 0
    assert store.journal_commit("run-1") == []  # nothing left to apply twice
    with pytest.raises(HooklineError):
        store.journal_write("run-2", "t", [("t", "nonsense", None)])


STORE_PROCESS = """
import sys, anyio
from hookline.builtins.store.postgres.store import PostgresTapeStore
from hookline.kernel.tape import TapeEntry

async def main():
    store = await PostgresTapeStore(sys.argv[1]).open()
    await store.journal_write("run-dead", "t", [
        ("t", "append", TapeEntry.new("message", {"role": "user", "content": "half"})),
        ("t", "append", TapeEntry.new("tool_call", {"calls": [
            {"id": "c1", "name": "shell", "arguments": "{}"}]}))])
    print("ready", flush=True)
    await anyio.sleep(600)

anyio.run(main)
"""


def test_a_killed_processes_journal_is_recovered_by_a_live_store_as_interrupted(
    postgres_stores: StoreFactory,
) -> None:
    url = postgres_stores.url() + "&hookline_grace=2"
    survivor = postgres_stores.open(url)
    proc = subprocess.Popen([sys.executable, "-c", STORE_PROCESS, url], text=True,
                            stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        portal = postgres_stores.portal
        assert portal.call(survivor._sweep_runs) == []  # alive: left alone
        assert portal.call(survivor.pending_runs) == 1
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        recovered = wait_until(lambda: portal.call(survivor._sweep_runs), timeout=20)
        assert recovered == ["t"]
    finally:
        proc.kill()
        proc.wait()
    entries = BlockingStore(postgres_stores.portal, survivor).fetch_all(TapeQuery("t"))
    assert [e.kind for e in entries] == ["message", "tool_call", "tool_result", "event"]
    assert entries[0].payload.get("content") == "half"
    (unknown,) = entries[2].payload["results"]  # the call the killed process was running
    assert unknown["call_id"] == "c1" and unknown["outcome"] == "unknown"
    marker = entries[3].payload
    assert marker["name"] == "run" and marker["data"]["status"] == "interrupted"
    assert portal.call(survivor.pending_runs) == 0
    # The dead owner's heartbeat row goes too.
    assert sql(url.split("&hookline_grace")[0], "SELECT count(*) FROM hookline_owners") == [(1,)]


def test_a_failed_commit_leaves_the_journal_to_the_stores_own_sweep(
    postgres_stores: StoreFactory, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hookline.builtins.store.postgres import store as postgres

    store = postgres_stores.blocking()
    store.journal_write("run-x", "t", [("t", "append", new("message", n=1))])
    assert postgres_stores.portal.call(store.store._sweep_runs) == []  # still running

    def broken(*args: Any, **kwargs: Any) -> None:
        raise HooklineError(ErrorKind.temporary, "the database went away")

    monkeypatch.setattr(postgres, "apply_statement", broken)
    with pytest.raises(HooklineError, match="went away"):
        store.journal_commit("run-x")
    monkeypatch.undo()
    assert store.fetch_all(TapeQuery("t")) == []  # rolled back
    assert postgres_stores.portal.call(store.store._sweep_runs) == ["t"]
    kinds = [(e.kind, e.payload.get("data", {}).get("status")) for e in store.fetch_all(
        TapeQuery("t"))]
    assert kinds == [("message", None), ("event", "interrupted")]


def test_two_stores_on_one_database_keep_ids_gapless_and_one_bootstrap_anchor(
    postgres_stores: StoreFactory,
) -> None:
    """Two pools, as two replicas: batches race on new tapes, each led by an anchor."""
    import threading

    url = postgres_stores.url()
    stores = [postgres_stores.blocking(url), postgres_stores.blocking(url)]
    anchor = new("anchor", name="session/start")
    start = threading.Barrier(6)

    def work(worker: int) -> None:
        start.wait()
        store = stores[worker % 2]
        for n in range(10):
            for tape in ("a", "b"):
                store.append_many(tape, [new("event", w=worker, n=n, k=k) for k in range(3)],
                                  bootstrap=anchor)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for tape in ("a", "b"):
        entries = stores[0].fetch_all(TapeQuery(tape))
        assert [e.id for e in entries] == list(range(1, 6 * 10 * 3 + 2))
        assert [e.kind for e in entries].count("anchor") == 1 and entries[0].kind == "anchor"
        for offset in range(1, len(entries), 3):
            block = entries[offset:offset + 3]
            assert len({(e.payload["w"], e.payload["n"]) for e in block}) == 1
            assert [e.payload["k"] for e in block] == [0, 1, 2]


def test_a_context_read_on_a_long_tape_reads_only_its_window(
    postgres_stores: StoreFactory,
) -> None:
    from hookline.builtins.store.postgres.sql import _select

    url = postgres_stores.url()
    store = postgres_stores.blocking(url)
    store.append_many("long", [new("message", n=n) for n in range(3000)])
    store.append("long", new("anchor", name="handoff"))
    store.append_many("long", [new("message", n=n) for n in range(200)])
    for query, rows, entries in (
        (TapeQuery("long").last_anchor().tail(50), 51, 50),  # the anchor and the window
        (TapeQuery("long").after_anchor("handoff").limit(5), 6, 5),
        (TapeQuery("long").tail(10), 10, 10),
    ):
        statement, params = _select("long", query)
        assert len(_rows(url, statement, params)) == rows
        assert len(store.fetch_all(query)) == entries


def _rows(url: str, statement: str, params: dict[str, Any]) -> list[tuple]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(statement, params).fetchall()


def test_a_closed_store_refuses_calls(postgres_stores: StoreFactory) -> None:
    store = postgres_stores.blocking()
    store.close()
    store.close()
    with pytest.raises(HooklineError) as caught:
        store.append("t", new("event"))
    assert caught.value.kind is ErrorKind.config


def test_no_server_skips_outside_ci_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="NO POSTGRESQL"):
        unavailable("test")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="cannot run in CI"):
        unavailable("test")


def test_maintenance_keeps_the_heartbeat_fresh(postgres_stores: StoreFactory) -> None:
    url = postgres_stores.url()
    store = postgres_stores.open(url)
    store.heartbeat = 0.05
    before = sql(url, "SELECT heartbeat FROM hookline_owners")[0][0]

    async def briefly() -> None:
        import anyio

        with anyio.move_on_after(0.5):
            await store.maintain()

    postgres_stores.portal.call(briefly)
    time.sleep(0.01)
    assert sql(url, "SELECT heartbeat FROM hookline_owners")[0][0] > before


def test_hooklines_own_url_parameters_are_read_and_removed() -> None:
    from hookline.builtins.store.postgres.conn import split_url
    from hookline.builtins.store.postgres.store import PostgresTapeStore

    url = "postgresql://u:pw@h/db?sslmode=require&hookline_pool_max=3&hookline_grace=0.5"
    assert split_url(url) == ("postgresql://u:pw@h/db?sslmode=require",
                              {"hookline_pool_max": "3", "hookline_grace": "0.5"})
    two_settings = "postgresql://h/db?options=-c%20a%3D1%20-c%20b%3D2&hookline_grace=1"
    assert split_url(two_settings)[0] == "postgresql://h/db?options=-c%20a%3D1%20-c%20b%3D2"
    store = PostgresTapeStore(url)
    assert (store.pool_max, store.grace) == (3, 0.5)
    with pytest.raises(HooklineError) as caught:
        PostgresTapeStore("postgresql://u:pw@h/db?hookline_grace=soon")
    assert caught.value.kind is ErrorKind.config and "hookline_grace" in caught.value.message
    assert "pw" not in caught.value.message.replace("postgresql", "")
