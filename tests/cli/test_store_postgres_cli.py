"""`hookline store copy` (SQLite <-> PostgreSQL) and `hookline store check` / `backup` on
a PostgreSQL URL, through the real console script against a real server."""

from __future__ import annotations

import json
from pathlib import Path

import test_cli
from postgres_support import StoreFactory, password_of

from hookline.builtins.store import SQLiteTapeStore
from hookline.builtins.store.copy import copy_store
from hookline.builtins.store.url import redact_url
from hookline.kernel.tape import TapeEntry, TapeQuery

env = test_cli.env  # the fixture: an environment with a fresh hookline home
hookline = test_cli.hookline


def fill(path: Path) -> dict[str, list[TapeEntry]]:
    """A SQLite store with awkward content: sidecar tapes, anchors, unicode, nesting,
    a reset tape, a tape with one entry; returns every tape's entries."""
    with SQLiteTapeStore(path) as store:
        for n in range(5):
            tape = f"session-{n}"
            store.append_many(tape, [
                TapeEntry.new("message", {"role": "user", "content": f"ünï {n} \u0000 \"q\"",
                                          "nested": {"list": [1, 2.5, None, True]}}),
                TapeEntry.new("anchor", {"name": "phase", "state": {"n": n}}, context=False),
                TapeEntry.new("tool_result", {"results": [{"output": "x" * 2000}]}),
            ], bootstrap=TapeEntry.new("anchor", {"name": "session/start"}))
            store.append(f"{tape}__sidecar__spill", TapeEntry.new("event", {"n": n}))
        store.append("gone", TapeEntry.new("event", {}))
        store.reset("gone")
        store.append("gone", TapeEntry.new("event", {"after": "reset"}))
        return {tape: store.fetch_all(TapeQuery(tape)) for tape in store.list_all_tapes()}


def test_copy_sqlite_into_postgres_keeps_every_entry(
    env: dict[str, str], tmp_path: Path, postgres_stores: StoreFactory,
) -> None:
    source = tmp_path / "tapes.db"
    expected = fill(source)
    assert len(expected) == 11
    url = postgres_stores.url()
    secret = password_of(url)
    copied = hookline("store", "copy", str(source), url, env=env, cwd=tmp_path)
    assert copied.returncode == 0, copied.stderr
    assert copied.stdout.strip() == (
        f"copied {source} to {redact_url(url)}: 11 tape(s), 26 entries, verified")
    progress = copied.stderr.splitlines()
    assert len(progress) == 12 and progress[-1] == "verifying 11 tape(s)"
    assert progress[0].startswith("copied tape 1/11 ") and secret not in copied.stderr
    target = postgres_stores.blocking(url)
    assert target.list_all_tapes() == sorted(expected)
    for tape, entries in expected.items():
        assert target.fetch_all(TapeQuery(tape)) == entries  # ids, payloads, meta, dates

    # A non-empty destination is refused; --into-existing skips identical tapes.
    again = hookline("store", "copy", str(source), url, env=env, cwd=tmp_path)
    assert again.returncode == 1 and "already holds 11 tape(s)" in again.stderr
    resumed = hookline("store", "copy", "--into-existing", str(source), url, env=env,
                       cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "0 tape(s), 0 entries, 11 already there, verified" in resumed.stdout
    target.append("session-0", TapeEntry.new("event", {"extra": True}))
    differs = hookline("store", "copy", "--into-existing", str(source), url, env=env,
                       cwd=tmp_path)
    assert differs.returncode == 1 and "'session-0' is in both stores" in differs.stderr

    # And back into a new SQLite file.
    back = tmp_path / "back.db"
    returned = hookline("store", "copy", url, str(back), env=env, cwd=tmp_path)
    assert returned.returncode == 0, returned.stderr
    with SQLiteTapeStore(back) as store:
        assert store.fetch_all(TapeQuery("session-1")) == expected["session-1"]
        assert len(store.fetch_all(TapeQuery("session-0"))) == len(expected["session-0"]) + 1


def test_copy_refuses_a_missing_source_and_the_same_store(
    env: dict[str, str], tmp_path: Path,
) -> None:
    missing = hookline("store", "copy", str(tmp_path / "none.db"), str(tmp_path / "x.db"),
                       env=env, cwd=tmp_path)
    assert missing.returncode == 1 and "No tape store at" in missing.stderr
    assert not (tmp_path / "x.db").exists()
    fill(tmp_path / "a.db")
    same = hookline("store", "copy", str(tmp_path / "a.db"), str(tmp_path / "a.db"), env=env)
    assert same.returncode == 1 and "the same" in same.stderr


def test_copy_between_sqlite_files_reports_progress(tmp_path: Path) -> None:
    import functools

    import anyio

    expected = fill(tmp_path / "a.db")
    lines: list[str] = []
    report = anyio.run(functools.partial(copy_store, tmp_path / "a.db", tmp_path / "b.db",
                                         progress=lines.append))
    assert (report.tapes, report.entries, report.skipped) == (11, 26, 0)
    assert len(lines) == 12
    with SQLiteTapeStore(tmp_path / "b.db") as store:
        assert {tape: store.fetch_all(TapeQuery(tape)) for tape in store.list_all_tapes()} \
            == expected


def test_check_and_backup_on_a_postgres_url(
    env: dict[str, str], tmp_path: Path, postgres_stores: StoreFactory,
) -> None:
    url = postgres_stores.url()
    shown, secret = redact_url(url), password_of(url)
    fresh = hookline("store", "check", "--store", url, env=env)
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout.startswith(f"ok: {shown}: reachable, no hookline tables yet")
    environ = {**env, "HOOKLINE_TAPE_STORE": url}
    assert hookline("run", "hello", env=environ, cwd=tmp_path).returncode == 0
    checked = hookline("store", "check", env=environ)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == (
        f"ok: {shown}: 1 tape(s), 4 entries, schema version 2, 0 open store(s)")
    refused = hookline("store", "backup", str(tmp_path / "b.db"), env=environ)
    assert refused.returncode == 1 and "pg_dump" in refused.stderr
    wrong = url.replace(secret, "nope")
    bad = hookline("store", "check", "--store", wrong, env=env)
    assert bad.returncode == 1 and bad.stderr.startswith("unusable: ")
    assert "cannot connect" in bad.stderr and "nope" not in bad.stderr
    text = json.dumps([fresh.stdout, checked.stdout, refused.stderr, bad.stderr])
    assert secret not in text
