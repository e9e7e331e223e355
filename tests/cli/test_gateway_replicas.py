"""Several `hookline gateway` replicas on one PostgreSQL tape store.

Real console-script gateways on loopback, each with its own home but the same workspace,
token and database (a fresh schema per test, tests/postgres_support.py): turns of one
session alternate or race between replicas; one replica is SIGKILLed mid-turn while the
other keeps serving; the database is restarted under load. The offline model answers;
`/tool tape_info {}` makes a turn report how many entries its context saw.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from gateway_support import Gateway, call, gateway_env, post, start_gateway_process
from postgres_support import (
    Cluster,
    StoreFactory,
    find_binaries,
    password_of,
    start_cluster,
    unavailable,
    wait_until,
)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="signals are POSIX")

Start = Callable[..., Gateway]


def rows(url: str, statement: str, *args: Any) -> list[tuple]:
    import psycopg

    with psycopg.connect(url.split("&hookline_")[0], autocommit=True) as conn:
        return conn.execute(statement, args or None).fetchall()


def tape_rows(url: str) -> dict[str, list[tuple[int, str, dict, dict]]]:
    """Every tape: (id, kind, payload, meta) in id order."""
    tapes: dict[str, list[tuple[int, str, dict, dict]]] = {}
    for tape, entry_id, kind, payload, meta in rows(
            url, "SELECT tape, id, kind, payload, meta FROM hookline_entries ORDER BY tape, id"):
        tapes.setdefault(tape, []).append((entry_id, kind, json.loads(payload), json.loads(meta)))
    return tapes


@contextlib.contextmanager
def gateways(url: str, tmp_path: Path) -> Iterator[Start]:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    started: list[Gateway] = []

    def start(name: str, **extra: str) -> Gateway:
        env = gateway_env(tmp_path / f"home-{name}", HOOKLINE_TAPE_STORE=url, **extra)
        started.append(start_gateway_process(["--port", "0"], env, workspace))
        return started[-1]

    try:
        yield start
    finally:
        for gateway in started:
            gateway.end()
        for gateway in started:  # nothing a replica printed shows the password
            assert password_of(url) not in "\n".join(gateway.stdout + gateway.stderr)


@pytest.fixture
def replicas(postgres_stores: StoreFactory, tmp_path: Path) -> Iterator[tuple[str, Start]]:
    url = postgres_stores.url() + "&hookline_grace=1"
    with gateways(url, tmp_path) as start:
        yield url, start


def ask(gateway: Gateway, content: str, session: str, timeout: float = 60.0) -> Any:
    return post(gateway.url, {"content": content, "session_id": session}, timeout=timeout)


def seen_entries(reply: Any) -> int:
    match = re.search(r'"entries": (\d+)', reply.json()["content"])
    assert match, reply.json()
    return int(match.group(1))


def test_a_sessions_turns_alternate_between_replicas_and_each_sees_all_before_it(
    replicas: tuple[str, Start],
) -> None:
    url, start = replicas
    pair = [start("a"), start("b")]
    counts = []
    for turn in range(6):
        reply = ask(pair[turn % 2], "/tool tape_info {}", "shared")
        assert reply.status == 200, reply.body
        counts.append(seen_entries(reply))
    steps = {later - earlier for earlier, later in itertools.pairwise(counts)}
    assert len(steps) == 1 and steps.pop() > 0, counts  # every turn saw every earlier one
    (tape,) = [rows_ for name, rows_ in tape_rows(url).items() if "__sidecar__" not in name]
    assert [entry[1] for entry in tape].count("anchor") == 1


def test_concurrent_turns_on_two_replicas_never_interleave_and_none_is_lost(
    replicas: tuple[str, Start],
) -> None:
    url, start = replicas
    pair = [start("a"), start("b")]
    jobs = [(n, f"s{n % 3}") for n in range(36)]

    def send(job: tuple[int, str]) -> tuple[int, str, int]:
        n, session = job
        reply = ask(pair[n % 2], f"message-{n}", session)
        return n, session, reply.status

    with ThreadPoolExecutor(12) as pool:
        results = list(pool.map(send, jobs))
    assert {status for _, _, status in results} == {200}
    tapes = tape_rows(url)
    assert len(tapes) == 3
    seen: list[str] = []
    for entries in tapes.values():
        assert [entry[0] for entry in entries] == list(range(1, len(entries) + 1))
        assert entries[0][1] == "anchor" and [e[1] for e in entries].count("anchor") == 1
        body = entries[1:]
        assert len(body) == 12 * 3  # per turn: the prompt, the reply, the run event
        for offset in range(0, len(body), 3):  # each run is one contiguous block
            block = body[offset:offset + 3]
            assert [e[1] for e in block] == ["message", "message", "event"]
            assert len({e[3]["run_id"] for e in block}) == 1
            seen.append(block[0][2]["content"])
    assert sorted(seen) == sorted(f"message-{n}" for n, _ in jobs)


def test_sigkill_of_a_replica_mid_turn(replicas: tuple[str, Start], tmp_path: Path) -> None:
    """The survivor keeps answering the same session, every acknowledged reply is stored,
    and the killed run shows up on the tape as interrupted."""
    url, start = replicas
    doomed, survivor = start("doomed"), start("survivor")
    acknowledged = []
    for n, gateway in enumerate([doomed, survivor, doomed]):
        assert ask(gateway, f"before-{n}", "s").status == 200
        acknowledged.append(f"before-{n}")
    marker = tmp_path / "workspace" / "tool-started"  # where a sandboxed command writes
    command = json.dumps({"command": f"touch {marker}; sleep 20"})
    killed: dict[str, Any] = {}

    def doomed_turn() -> None:
        try:
            killed["reply"] = ask(doomed, f"/tool shell {command}", "s")
        except Exception as exc:  # the connection dies with the process
            killed["error"] = exc

    thread = threading.Thread(target=doomed_turn)
    thread.start()
    wait_until(marker.exists)
    doomed.proc.send_signal(signal.SIGKILL)
    doomed.proc.wait()
    thread.join()
    assert "error" in killed
    for n in range(3):  # the survivor answers the same session at once
        assert ask(survivor, f"after-{n}", "s").status == 200
        acknowledged.append(f"after-{n}")

    def interrupted() -> list[tuple]:
        (tape,) = tape_rows(url).values()
        return [e for e in tape if e[1] == "event" and e[2].get("name") == "run"
                and e[2]["data"]["status"] == "interrupted"]

    (marker_entry,) = wait_until(interrupted, timeout=60)
    (tape,) = tape_rows(url).values()
    prompts = [e[2]["content"] for e in tape if e[1] == "message" and e[2]["role"] == "user"]
    assert [p for p in prompts if not p.startswith("/tool")] == acknowledged
    # What the killed run recorded before it died sits right before its marker, with the
    # unknown outcome of the call it was running.
    before = tape[[e[0] for e in tape].index(marker_entry[0]) - 3:][:3]
    assert before[0][2].get("content", "").startswith("/tool shell")
    assert before[1][1] == "tool_call"
    assert before[2][1] == "tool_result" and before[2][2]["results"][0]["outcome"] == "unknown"
    assert rows(url, "SELECT count(*) FROM hookline_journal_runs") == [(0,)]


@pytest.fixture
def own_cluster() -> Iterator[Cluster]:
    """A private server this test may stop and start."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed")
    if find_binaries() is None:
        unavailable("no PostgreSQL binaries to run a server the test can restart")
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.remove()


@pytest.mark.slow
def test_a_database_restart_under_load(own_cluster: Cluster, tmp_path: Path) -> None:
    """Requests fail cleanly (503 with the store's reason) while the database is down and
    succeed again once it is back; nothing acknowledged is lost."""
    url = own_cluster.url
    with gateways(url, tmp_path) as start:
        pair = [start("a"), start("b")]
        results: list[tuple[str, int, dict]] = []
        stop = threading.Event()
        lock = threading.Lock()

        def load(worker: int) -> None:
            n = 0
            while not stop.is_set():
                content = f"w{worker}-{n}"
                reply = ask(pair[(worker + n) % 2], content, f"s{worker % 3}")
                with lock:
                    results.append((content, reply.status, reply.json()))
                n += 1

        def count(status: int) -> int:
            with lock:
                return sum(1 for _, got, _ in results if got == status)

        workers = [threading.Thread(target=load, args=(n,)) for n in range(6)]
        for worker in workers:
            worker.start()
        try:
            wait_until(lambda: count(200) >= 20)
            own_cluster.stop("fast")
            wait_until(lambda: count(503) >= 3, timeout=60)
            health = call(pair[0].url, "GET", "/v1/health")
            assert health.status == 503 and "tape store" in health.json()["reason"]
            own_cluster.start()
            served = count(200)
            wait_until(lambda: count(200) >= served + 20, timeout=60)
        finally:
            stop.set()
            for worker in workers:
                worker.join()
        # Health answers from a check at most a second old, and a check made while the
        # load held every pooled connection may have failed: the next one passes.
        wait_until(lambda: call(pair[1].url, "GET", "/v1/health").status == 200, timeout=15)
        for content, status, body in results:
            assert status in (200, 500, 503), (content, status, body)
            if status != 200:
                assert body.get("error"), body
            if status == 503:  # the store's reason when health had one by then
                assert "tape store" in body.get("reason", "tape store"), body
                assert password_of(url) not in json.dumps(body)
        stored = {e[2].get("content") for entries in tape_rows(url).values() for e in entries
                  if e[1] == "message"}
        lost = [content for content, status, _ in results if status == 200
                and content not in stored]
        assert lost == []


def keyed(gateway: Gateway, body: dict[str, Any], key: str) -> Any:
    return call(gateway.url, "POST", "/v1/messages", body, headers={"Idempotency-Key": key},
                timeout=90)


def user_prompts(url: str) -> list[str]:
    (tape,) = tape_rows(url).values()
    return [e[2]["content"] for e in tape if e[1] == "message" and e[2]["role"] == "user"]


def test_a_keyed_retry_on_the_other_replica_waits_for_the_run_and_never_runs_it_again(
    replicas: tuple[str, Start], tmp_path: Path,
) -> None:
    """The first attempt is still running on one replica: the retry sent to the other
    waits for it and answers what it came to; the command ran once."""
    url, start = replicas
    first_replica, second_replica = start("a"), start("b")
    ran = tmp_path / "workspace" / "ran"
    body = {"content": "/tool shell " + json.dumps({"command": f"echo once >> {ran}; sleep 3"}),
            "session_id": "live"}
    answers: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: answers.update(
        first=keyed(first_replica, body, "live-1")))
    thread.start()
    wait_until(ran.exists)
    retry = keyed(second_replica, body, "live-1")
    thread.join(60)
    assert retry.status == answers["first"].status == 200, retry.body
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.json()["content"] == answers["first"].json()["content"]
    assert ran.read_text() == "once\n"
    assert user_prompts(url) == [body["content"]]


def test_requests_with_one_key_sent_at_once_to_one_replica_run_once(
    replicas: tuple[str, Start], tmp_path: Path,
) -> None:
    """A replica's advisory lock lets each of its own requests pass: the key is claimed in
    the process first, so the others wait for the one that runs and replay its answer."""
    url, start = replicas
    replica = start("a")
    ran = tmp_path / "workspace" / "ran-at-once"
    body = {"content": "/tool shell " + json.dumps({"command": f"echo once >> {ran}"}),
            "session_id": "at-once"}
    answers: list[Any] = []
    threads = [threading.Thread(target=lambda: answers.append(keyed(replica, body, "once-1")))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert [answer.status for answer in answers] == [200] * 4
    assert sum(answer.headers.get("idempotent-replayed") == "true" for answer in answers) == 3
    assert ran.read_text() == "once\n"
    assert user_prompts(url) == [body["content"]]


def test_a_keyed_retry_on_the_other_replica_during_the_grace_gets_the_recovered_run(
    replicas: tuple[str, Start], tmp_path: Path,
) -> None:
    """The replica running a keyed, streamed turn's tool is SIGKILLed; the client retries on the
    other one at once, before the grace is over: the retry waits until the dead run is
    recovered and answers `interrupted`, the command ran once, the message is once on
    the tape."""
    url, start = replicas
    doomed, survivor = start("doomed"), start("survivor")
    ran, started = tmp_path / "workspace" / "ran", tmp_path / "workspace" / "started"
    command = f"echo once >> {ran}; touch {started}; sleep 30"
    body = {"content": "/tool shell " + json.dumps({"command": command}), "session_id": "k",
            "stream": True}
    cut: list[BaseException] = []

    def first_attempt() -> None:
        try:
            keyed(doomed, body, "deploy-1")
        except Exception as exc:  # the connection dies with the process
            cut.append(exc)

    thread = threading.Thread(target=first_attempt)
    thread.start()
    wait_until(started.exists)
    doomed.proc.send_signal(signal.SIGKILL)
    doomed.proc.wait()
    thread.join(30)
    assert cut, "the first attempt's connection was cut with the replica"
    assert rows(url, "SELECT count(*) FROM hookline_journal_runs") == [(1,)], "not yet recovered"
    retry = keyed(survivor, body, "deploy-1")
    assert retry.status == 200, retry.body
    assert b'"status": "interrupted"' in retry.body.split(b"event: done\n")[1], retry.body
    assert retry.headers["idempotent-replayed"] == "true"
    assert ran.read_text() == "once\n", "the command ran once"
    assert user_prompts(url) == [body["content"]]


def busy_session(replica: Gateway, workspace: Path, session: str, seconds: int
                 ) -> threading.Thread:
    """A turn of `session` on `replica` that runs a command for `seconds`, started in a
    thread once the command runs: later messages of the session queue behind it."""
    busy = "/tool shell " + json.dumps(
        {"command": f"touch {workspace / 'busy'}; sleep {seconds}"})
    thread = threading.Thread(target=lambda: ask(replica, busy, session))
    thread.start()
    wait_until((workspace / "busy").exists)
    return thread


def queued_behind_a_busy_turn(replica: Gateway, workspace: Path, session: str, key: str
                              ) -> tuple[dict[str, Any], list[threading.Thread], dict[str, Any]]:
    """A keyed request (a command that appends `once` to the workspace's `ran`) sent to
    `replica` while `session` is busy there: on return it waits in the session's queue,
    nothing of it stored yet. Its body, the threads to join, and where the first
    attempt's answer lands (`first`)."""
    body = {"content": "/tool shell " + json.dumps(
        {"command": f"echo once >> {workspace / 'ran'}"}), "session_id": session}
    answers: dict[str, Any] = {}
    threads = [busy_session(replica, workspace, session, 4),
               threading.Thread(target=lambda: answers.update(first=keyed(replica, body, key)))]
    threads[1].start()
    time.sleep(0.5)  # queued behind the busy turn
    return body, threads, answers


def test_a_keyed_request_queued_on_one_replica_is_not_run_by_a_retry_on_the_other(
    replicas: tuple[str, Start], tmp_path: Path,
) -> None:
    """The session is busy on the first replica, so the keyed request waits there in the
    session's queue (nothing of it is stored yet); the retry sent to the other replica
    finds the key claimed and waits too, then answers what the first one came to."""
    url, start = replicas
    first_replica, second_replica = start("a"), start("b")
    workspace = tmp_path / "workspace"
    body, threads, answers = queued_behind_a_busy_turn(first_replica, workspace, "q",
                                                       "queued-1")
    retry = keyed(second_replica, body, "queued-1")
    for thread in threads:
        thread.join(60)
    assert answers["first"].status == retry.status == 200, retry.body
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.json()["content"] == answers["first"].json()["content"]
    assert (workspace / "ran").read_text() == "once\n"
    assert user_prompts(url).count(body["content"]) == 1


def test_a_keyed_request_queued_past_its_timeout_is_still_not_run_by_a_retry_elsewhere(
    replicas: tuple[str, Start], tmp_path: Path,
) -> None:
    """The first attempt answers 504 while it waits in the queue, and stays queued: its
    key stays claimed until it has run, so a retry on the other replica, long after,
    waits for it instead of running it a second time."""
    url, start = replicas
    first_replica, second_replica = start("a", HOOKLINE_HTTP_TIMEOUT="2"), start("b")
    workspace = tmp_path / "workspace"
    body = {"content": "/tool shell " + json.dumps(
        {"command": f"echo once >> {workspace / 'ran'}"}), "session_id": "late"}
    threads = [busy_session(first_replica, workspace, "late", 8)]
    first = keyed(first_replica, body, "late-1")
    assert first.status == 504, first.body
    time.sleep(3)  # past twice the first replica's timeout
    retry = keyed(second_replica, body, "late-1")
    threads[0].join(60)
    assert retry.status == 200 and retry.headers["idempotent-replayed"] == "true", retry.body
    wait_until((workspace / "ran").exists)
    assert (workspace / "ran").read_text() == "once\n"
    assert user_prompts(url).count(body["content"]) == 1


def end_lock_connection(url: str, replica: Gateway) -> None:
    """End the database session that holds `replica`'s owner lock (an administrator's
    pg_terminate_backend, a pooler, a blip): its advisory locks go with it."""
    (owner,) = rows(url, "SELECT owner FROM hookline_owners WHERE pid = %s", replica.proc.pid)[0]
    (backend,) = rows(url, "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND "
                      "objsubid = 1 AND classid = %s AND objid = %s",
                      owner >> 32, owner & 0xFFFFFFFF)[0]
    assert rows(url, "SELECT pg_terminate_backend(%s)", backend) == [(True,)]


def test_a_queued_keyed_request_whose_replica_lost_its_lock_is_run_once(
    replicas: tuple[str, Start], tmp_path: Path,
) -> None:
    """The keyed request waits in the first replica's queue when that replica's lock
    connection ends: a retry on the other replica finds the key free and runs it, and
    the first replica, its lock back, must not run it again (its client is told to send
    it again, which replays what ran)."""
    url, start = replicas
    first_replica, second_replica = start("a"), start("b")
    workspace = tmp_path / "workspace"
    body, threads, answers = queued_behind_a_busy_turn(first_replica, workspace, "cut", "cut-1")
    end_lock_connection(url, first_replica)
    retry = keyed(second_replica, body, "cut-1")
    for thread in threads:
        thread.join(60)
    assert retry.status == 200, retry.body
    assert (workspace / "ran").read_text() == "once\n"
    assert answers["first"].status >= 500, answers["first"].body
    said = answers["first"].json()["error"]
    assert "another replica may have run it" in said and "Send it again with the same key" in said
    assert ".." not in said and "fix the tape store" not in said, said
    again = keyed(first_replica, body, "cut-1")
    assert again.status == 200 and again.headers["idempotent-replayed"] == "true", again.body
    assert (workspace / "ran").read_text() == "once\n"
    assert user_prompts(url).count(body["content"]) == 1
