"""`hookline gateway` replicas on one PostgreSQL database under network faults, made by a
TCP proxy the test controls (tests/tcp_proxy.py) in front of one replica: its lock
backend terminated mid-turn while no new connection can be made (as with a full
max_connections), a partition (the proxy forwards nothing, connections stay open), the
reply of a journal write or of a commit lost after it committed, and an outage."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_support import Gateway, Response, call, gateway_env, post, start_gateway_process
from postgres_support import StoreFactory, password_of, wait_until
from tcp_proxy import TcpProxy, proxy_for

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX processes")

Entry = tuple[str, dict[str, Any], dict[str, Any]]


def rows(url: str, statement: str, *args: Any) -> list[tuple]:
    import psycopg

    with psycopg.connect(url.split("&hookline_")[0], autocommit=True) as conn:
        cursor = conn.execute(statement, args or None)
        return cursor.fetchall() if cursor.description else []


def tape(url: str) -> list[Entry]:
    """The session tapes' entries (one session per test): (kind, payload, meta)."""
    return [(kind, json.loads(payload), json.loads(meta)) for kind, payload, meta in rows(
        url, "SELECT kind, payload, meta FROM hookline_entries "
             "WHERE strpos(tape, '__sidecar__') = 0 ORDER BY id")]


def status(entry: Entry) -> str | None:
    kind, payload, _ = entry
    return payload["data"]["status"] if kind == "event" and payload.get("name") == "run" else None


def runs(url: str) -> list[list[Entry]]:
    """The tape after its anchor cut into runs, checking that each is whole: it starts with
    its prompt, ends with its `run` event, and holds one run's entries only (a recovered
    run's marker has no run id of its own)."""
    entries = tape(url)
    assert [e[1].get("name") for e in entries if e[0] == "anchor"] == ["session/start"]
    assert entries[0][0] == "anchor"
    blocks: list[list[Entry]] = [[]]
    for entry in entries[1:]:
        blocks[-1].append(entry)
        if status(entry) is not None:
            blocks.append([])
    assert blocks.pop() == [], "a run without its run event"
    for block in blocks:
        assert block[0][0] == "message" and block[0][1]["role"] == "user", block
        assert len({e[2]["run_id"] for e in block if "run_id" in e[2]}) == 1, block
    return blocks


def prompt(block: list[Entry]) -> str:
    return str(block[0][1]["content"])


def ask(gateway: Gateway, content: str, timeout: float = 60.0) -> Response:
    return post(gateway.url, {"content": content, "session_id": "s"}, timeout=timeout)


@contextlib.contextmanager
def replicas(url: str, tmp_path: Path, *names: str) -> Iterator[tuple[TcpProxy, list[Gateway]]]:
    """Gateways on `url` sharing one workspace: the first behind a proxy, the others
    direct; each checked at the end for never printing the password."""
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    started: list[Gateway] = []
    with proxy_for(url) as proxy:
        try:
            for n, name in enumerate(names):
                store = proxy.url(url) if n == 0 else url
                started.append(start_gateway_process(["--port", "0"], gateway_env(
                    tmp_path / f"home-{name}", HOOKLINE_TAPE_STORE=store), workspace))
            yield proxy, started
        finally:
            for gateway in started:
                gateway.end()
            for gateway in started:
                assert password_of(url) not in "\n".join(gateway.stdout + gateway.stderr)


def tool_turn(gateway: Gateway, ran: Path) -> tuple[threading.Thread, dict[str, Response]]:
    """A turn running a shell command that appends to `ran` and then takes 4 s; its reply
    lands in the dict once the thread ends."""
    command = json.dumps({"command": f"echo once >> {ran}; sleep 4"})
    reply: dict[str, Response] = {}

    def turn() -> None:
        reply["r"] = ask(gateway, f"/tool shell {command}")

    thread = threading.Thread(target=turn)
    thread.start()
    return thread, reply


def test_a_replica_losing_its_lock_mid_tool_runs_the_tool_once_and_never_interleaves(
    postgres_stores: StoreFactory, tmp_path: Path,
) -> None:
    url = postgres_stores.url() + "&hookline_grace=1"
    with replicas(url, tmp_path, "a", "b") as (proxy, (cut_off, peer)):
        ran = tmp_path / "workspace" / "ran"  # where a sandboxed command may write
        thread, reply = tool_turn(cut_off, ran)
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
        wait_until(lambda: any(status(e) == "interrupted" for e in tape(url)), timeout=30)
        assert ask(peer, "after").status == 200
        kinds = [[(kind, p.get("role") or p.get("name")) for kind, p, _ in block]
                 for block in runs(url)]
        assert kinds == [[("message", "user"), ("tool_call", None), ("tool_result", None),
                          ("event", "run")],
                         [("message", "user"), ("message", "assistant"), ("event", "run")]]
        assert status(runs(url)[0][-1]) == "interrupted"
        assert ran.read_text() == "once\n"
        assert rows(url, "SELECT count(*) FROM hookline_journal_runs") == [(0,)]


def test_a_partitioned_replica_fails_its_turn_is_recovered_by_its_peer_and_comes_back(
    postgres_stores: StoreFactory, tmp_path: Path,
) -> None:
    """The proxy in front of replica A stops forwarding (connections stay open, as in a
    network partition) while A's turn runs a shell command, for longer than the grace."""
    url = postgres_stores.url() + "&hookline_grace=1"
    with replicas(url, tmp_path, "a", "b") as (proxy, (a, b)):
        assert ask(a, "before").status == 200
        ran = tmp_path / "workspace" / "ran"
        thread, reply = tool_turn(a, ran)
        wait_until(ran.exists)
        proxy.pause()
        assert [ask(b, f"during-{n}").status for n in range(2)] == [200, 200]
        # The server ends A's lock session once no heartbeat came for the grace, so B
        # recovers A's run while the partition lasts.
        wait_until(lambda: any(status(e) == "interrupted" for e in tape(url)), timeout=20)
        thread.join(60)
        # Its tool had run: no 503 inviting the message again, which would run it again.
        assert reply["r"].status == 500, reply["r"].body
        assert "retry-after" not in reply["r"].headers
        assert b"lost its lock on the database" in reply["r"].body, reply["r"].body
        assert b"A tool of this turn had run" in reply["r"].body
        assert ask(b, "during-2").status == 200
        proxy.resume()
        after = ask(a, "after")  # A retakes its lock within a heartbeat; the turn waits
        assert after.status == 200, after.body
        blocks = runs(url)
        assert [prompt(block) for block in blocks if status(block[-1]) == "ok"] == [
            "before", "during-0", "during-1", "during-2", "after"]
        (recovered,) = [block for block in blocks if status(block[-1]) == "interrupted"]
        assert prompt(recovered).startswith("/tool shell")
        assert [kind for kind, _, _ in recovered] == ["message", "tool_call", "tool_result",
                                                      "event"]
        # Nothing else of A's run: its tool's result never reached the tape, only the
        # unknown outcome the recovery recorded for it.
        assert [e[1]["results"][0]["outcome"] for block in blocks for e in block
                if e[0] == "tool_result"] == ["unknown"]
        assert ran.read_text() == "once\n"
        wait_until(lambda: rows(url, "SELECT count(*) FROM hookline_journal_runs") == [(0,)])


@pytest.mark.parametrize("pattern", [b"hookline_journal", b"o_tape"],
                         ids=["journal-write", "commit"])
def test_a_write_whose_reply_is_lost_leaves_one_copy_and_answers_200(
    postgres_stores: StoreFactory, tmp_path: Path, pattern: bytes,
) -> None:
    """The connection is cut right after the server's reply to the turn's journal write
    (its prompt, `hookline_journal`) or to its commit (`hookline_apply`, whose result has
    the column `o_tape`): the write committed, its answer never came."""
    url = postgres_stores.url()
    with replicas(url, tmp_path, "a") as (proxy, (gateway,)):
        assert ask(gateway, "before").status == 200
        proxy.cut_after(pattern)
        reply = ask(gateway, "hello")
        assert proxy.cuts == 1
        assert reply.status == 200, reply.body
        assert '"hello"' in reply.json()["content"]
        assert [(prompt(block), [e[0] for e in block], status(block[-1]))
                for block in runs(url)] == [
            ("before", ["message", "message", "event"], "ok"),
            ("hello", ["message", "message", "event"], "ok")]
        assert rows(url, "SELECT count(*) FROM hookline_journal_runs") == [(0,)]


def test_after_an_outage_longer_than_the_grace_the_first_turn_is_answered_200(
    postgres_stores: StoreFactory, tmp_path: Path,
) -> None:
    """The database is unreachable for 8 s (connections closed, new ones refused; grace 1
    s), turns failing with 503 meanwhile. The first turn sent after its return is answered
    200, within 5 s: its wait for a connection (the pool connects on demand) and for the
    lock (which the heartbeat loop retakes within a heartbeat) is 5 s at most each, and
    takes about a second."""
    url = postgres_stores.url() + "&hookline_grace=1"
    with replicas(url, tmp_path, "a") as (proxy, (gateway,)):
        assert ask(gateway, "before").status == 200
        proxy.refuse = True
        proxy.drop()
        began = time.monotonic()
        during = ask(gateway, "during")
        assert during.status == 503, during.body
        assert "tape store" in during.json()["error"]
        assert call(gateway.url, "GET", "/v1/health").status == 503
        time.sleep(max(0.0, began + 8 - time.monotonic()))
        proxy.refuse = False
        back = time.monotonic()
        after = ask(gateway, "after")
        answered = time.monotonic() - back
        assert after.status == 200, after.body
        assert answered <= 5.0, answered
        # Health is cached for a second: its answer follows.
        wait_until(lambda: call(gateway.url, "GET", "/v1/health").status == 200, timeout=10)
        # The failed turn recorded nothing (its context could not be read).
        assert [(prompt(block), status(block[-1])) for block in runs(url)] == [
            ("before", "ok"), ("after", "ok")]
        assert rows(url, "SELECT count(*) FROM hookline_journal_runs") == [(0,)]


def test_a_black_holed_database_answers_each_turn_503_within_the_turn_deadline(
    postgres_stores: StoreFactory, tmp_path: Path,
) -> None:
    """The proxy forwards nothing while connections stay open: every store call of a turn
    would wait for its own bound; the turn's store deadline (3 s here) ends the turn
    instead, with 503 and the reason."""
    url = postgres_stores.url()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with proxy_for(url) as proxy:
        gateway = start_gateway_process(["--port", "0"], gateway_env(
            tmp_path / "home", HOOKLINE_TAPE_STORE=proxy.url(url),
            HOOKLINE_STORE_TURN_DEADLINE="3"), workspace)
        try:
            assert ask(gateway, "before").status == 200
            proxy.pause()
            took = []
            for n in range(3):
                started = time.monotonic()
                answer = ask(gateway, f"during-{n}")
                took.append(time.monotonic() - started)
                assert answer.status == 503, answer.body
                assert answer.headers.get("retry-after")
                assert b"did not answer within 3 s during this turn" in answer.body, answer.body
            print("black-holed turns answered after", [f"{t:.2f} s" for t in took])
            assert max(took) < 3 + 5, took  # a hang check; the figure is printed above
            proxy.resume()
            assert wait_until(lambda: ask(gateway, "after").status == 200, timeout=30)
        finally:
            gateway.end()


def test_a_key_the_store_cannot_look_up_is_503_with_retry_after_and_the_retry_runs(
    postgres_stores: StoreFactory, tmp_path: Path,
) -> None:
    """The database out of reach while a keyed request looks its key up: nothing ran, so
    the answer says to send it again (JSON, `Retry-After`), never a bare 500."""
    url = postgres_stores.url()
    with replicas(url, tmp_path, "a") as (proxy, (gateway,)):
        assert ask(gateway, "warm").status == 200
        proxy.refuse = True
        proxy.drop()
        body = {"content": "keyed", "session_id": "s"}
        refused = call(gateway.url, "POST", "/v1/messages", body,
                       headers={"Idempotency-Key": "k-1"}, timeout=90)
        assert refused.status == 503, refused.body
        assert "retry-after" in refused.headers and "send it again" in refused.json()["error"]
        proxy.refuse = False
        for _attempt in range(10):  # as a client obeying Retry-After would
            again = call(gateway.url, "POST", "/v1/messages", body,
                         headers={"Idempotency-Key": "k-1"}, timeout=90)
            if again.status != 503:
                break
            time.sleep(1)
        assert again.status == 200, again.body
