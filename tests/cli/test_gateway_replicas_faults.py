"""Two `hookline gateway` replicas on one PostgreSQL database, one of them behind a TCP
proxy the test controls (tests/tcp_proxy.py): its lock connection's backend is terminated
mid-turn while no new connection can be made (as with a full max_connections)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from gateway_support import gateway_env, post, start_gateway_process
from postgres_support import StoreFactory, password_of, wait_until
from tcp_proxy import proxy_for

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX processes")


def rows(url: str, statement: str, *args: Any) -> list[tuple]:
    import psycopg

    with psycopg.connect(url.split("&hookline_")[0], autocommit=True) as conn:
        cursor = conn.execute(statement, args or None)
        return cursor.fetchall() if cursor.description else []


def test_a_replica_losing_its_lock_mid_tool_runs_the_tool_once_and_never_interleaves(
    postgres_stores: StoreFactory, tmp_path: Path,
) -> None:
    url = postgres_stores.url() + "&hookline_grace=1"
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with proxy_for(url) as proxy:
        cut_off = start_gateway_process(["--port", "0"], gateway_env(
            tmp_path / "home-a", HOOKLINE_TAPE_STORE=proxy.url(url)), workspace)
        peer = start_gateway_process(["--port", "0"], gateway_env(
            tmp_path / "home-b", HOOKLINE_TAPE_STORE=url), workspace)
        try:
            ran = workspace / "ran"  # where a sandboxed command may write
            command = json.dumps({"command": f"echo once >> {ran}; sleep 4"})
            reply: dict[str, Any] = {}

            def turn() -> None:
                reply["r"] = post(cut_off.url, {"content": f"/tool shell {command}",
                                                "session_id": "s"}, timeout=60)

            thread = threading.Thread(target=turn)
            thread.start()
            wait_until(ran.exists)
            proxy.refuse = True
            (owner,), = rows(url, "SELECT owner FROM hookline_owners WHERE pid = %s",
                             cut_off.proc.pid)
            rows(url, "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = "
                      "'advisory' AND objsubid = 1 "
                      "AND ((classid::bigint << 32) | objid::bigint) = %s", owner)
            thread.join(60)
            assert reply["r"].status != 200, reply["r"].body
            assert b"lost its lock on the database" in reply["r"].body, reply["r"].body
            proxy.refuse = False

            def tape() -> list[tuple[str, Any]]:
                return [(kind, json.loads(payload)) for kind, payload in rows(
                    url, "SELECT kind, payload FROM hookline_entries "
                         "WHERE strpos(tape, '__sidecar__') = 0 ORDER BY id")]

            wait_until(lambda: any(p.get("data", {}).get("status") == "interrupted"
                                   for _, p in tape()), timeout=30)
            assert post(peer.url, {"content": "after", "session_id": "s"}).status == 200
            kinds = [(kind, p.get("role") or p.get("name")) for kind, p in tape()]
            assert kinds == [("anchor", "session/start"), ("message", "user"),
                             ("tool_call", None), ("event", "run"),
                             ("message", "user"), ("message", "assistant"), ("event", "run")]
            assert tape()[3][1]["data"]["status"] == "interrupted"
            assert ran.read_text() == "once\n"
            assert rows(url, "SELECT count(*) FROM hookline_journal_runs") == [(0,)]
        finally:
            for gateway in (cut_off, peer):
                gateway.end()
            for gateway in (cut_off, peer):
                assert password_of(url) not in "\n".join(gateway.stdout + gateway.stderr)
