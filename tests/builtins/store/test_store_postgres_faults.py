"""The PostgreSQL tape store under network faults, made by a TCP proxy between the store
and a real server (tests/tcp_proxy.py): a reply lost after its write committed, a lock
connection lost while a run is in flight, an unreachable database, a black hole."""

from __future__ import annotations

import time
from typing import Any

import pytest
from postgres_support import BlockingStore, StoreFactory, wait_until
from tcp_proxy import proxy_for

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import TapeEntry, TapeQuery


def message(content: str) -> TapeEntry:
    return TapeEntry.new("message", {"role": "user", "content": content})


def sql(url: str, statement: str, *args: Any) -> list[tuple]:
    import psycopg

    with psycopg.connect(url.split("&hookline_")[0], autocommit=True) as conn:
        cursor = conn.execute(statement, args or None)
        return cursor.fetchall() if cursor.description else []


def contents(store: Any, tape: str = "t") -> list[Any]:
    return [(e.kind, e.payload.get("content") or e.payload.get("data", {}).get("status"))
            for e in store.fetch_all(TapeQuery(tape))]


def test_a_journal_write_whose_reply_is_lost_is_stored_once(
    postgres_stores: StoreFactory,
) -> None:
    url = postgres_stores.url()
    with proxy_for(url) as proxy:
        store = postgres_stores.blocking(proxy.url(url))
        proxy.cut_after(b"hookline_journal")  # the row description of its one result
        store.journal_write("run-1", "t", [("t", "append", message("hello"))])
        assert proxy.cuts == 1  # it committed, and its answer never came
        store.journal_write("run-1", "t", [("t", "append", message("again"))])
        store.journal_commit("run-1", [("t", "append", TapeEntry.new("event", {}))])
        assert contents(store) == [("message", "hello"), ("message", "again"), ("event", None)]


def test_a_commit_whose_reply_is_lost_reports_success_and_stores_the_run_once(
    postgres_stores: StoreFactory,
) -> None:
    url = postgres_stores.url()
    with proxy_for(url) as proxy:
        store = postgres_stores.blocking(proxy.url(url))
        store.journal_write("run-1", "t", [("t", "append", message("hello"))])
        proxy.cut_after(b"o_tape")  # the row description of hookline_apply's result
        stored = store.journal_commit("run-1", [("t", "append", message("reply"))])
        assert proxy.cuts == 1
        assert [(e.id, e.payload["content"]) for e in stored] == [(1, "hello"), (2, "reply")]
        assert contents(store) == [("message", "hello"), ("message", "reply")]
        assert store.pending_runs() == 0


def test_an_unknown_journal_write_that_stays_unknown_is_not_applied_twice(
    postgres_stores: StoreFactory,
) -> None:
    """The caller keeps ops whose write failed and sends them again with the commit (the
    tape fork does): the journal's copy of them is dropped, so they land once."""
    url = postgres_stores.url()
    with proxy_for(url) as proxy:
        store = postgres_stores.blocking(proxy.url(url), statement_timeout=1.0)
        proxy.cut_after(b"hookline_journal")
        proxy.refuse = True  # the repetition finds no connection either
        ops = [("t", "append", message("hello"))]
        with pytest.raises(HooklineError, match="unknown until the database answers"):
            store.journal_write("run-1", "t", ops)
        proxy.refuse = False
        store.store.statement_timeout = 10.0
        assert sql(url, "SELECT count(*) FROM hookline_journal") == [(1,)]  # it did commit
        store.journal_commit("run-1", [*ops, ("t", "append", TapeEntry.new("event", {}))])
        assert contents(store) == [("message", "hello"), ("event", None)]


def _owner_backend(url: str, owner: int) -> int:
    (pid,), = sql(url, "SELECT pid FROM pg_locks WHERE locktype = 'advisory' "
                       "AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = %s",
                  owner)
    return int(pid)


def test_a_run_whose_lock_was_lost_longer_than_the_grace_fails_and_is_recovered_once(
    postgres_stores: StoreFactory,
) -> None:
    """The lock connection's backend is terminated and no new connection can be made
    (the situation of a full max_connections): a peer recovers the run as interrupted,
    and the run's own store refuses its later writes and its commit, so nothing of it
    lands after the marker."""
    url = postgres_stores.url() + "&hookline_grace=1"
    with proxy_for(url) as proxy:
        live = postgres_stores.open(proxy.url(url))
        store = BlockingStore(postgres_stores.portal, live)
        peer = postgres_stores.blocking(url)
        store.journal_write("run-1", "t", [("t", "append", message("hello"))])
        proxy.refuse = True
        sql(url, "SELECT pg_terminate_backend(%s)", _owner_backend(url, live.owner))
        portal = postgres_stores.portal
        assert wait_until(lambda: portal.call(peer.store._sweep_runs), timeout=30) == ["t"]
        with pytest.raises(HooklineError) as caught:
            store.journal_write("run-1", "t", [("t", "append", message("late"))])
        assert caught.value.kind is ErrorKind.temporary
        assert "lost its lock on the database" in caught.value.message
        with pytest.raises(HooklineError):
            store.journal_commit("run-1", [("t", "append", message("reply"))])
        proxy.refuse = False
        assert contents(peer) == [("message", "hello"), ("event", "interrupted")]


def test_the_database_refuses_a_write_of_a_recovered_run_whatever_the_replica_believes(
    postgres_stores: StoreFactory,
) -> None:
    """The fence in the database itself: a store that still thinks it holds its lease
    (its lease's clock is pushed forward here) cannot write or commit a run that was
    recovered."""
    url = postgres_stores.url() + "&hookline_grace=1"
    live = postgres_stores.open(url)
    store = BlockingStore(postgres_stores.portal, live)
    peer = postgres_stores.blocking(url)
    store.journal_write("run-1", "t", [("t", "append", message("hello"))])
    sql(url, "SELECT pg_terminate_backend(%s)", _owner_backend(url, live.owner))
    portal = postgres_stores.portal
    assert wait_until(lambda: portal.call(peer.store._sweep_runs), timeout=30) == ["t"]
    live._lease_until = time.monotonic() + 3600  # as if the lock were still held
    for attempt in (lambda: store.journal_write("run-1", "t", [("t", "append", message("x"))]),
                    lambda: store.journal_commit("run-1", [("t", "append", message("y"))])):
        with pytest.raises(HooklineError) as caught:
            attempt()
        assert "recovered as interrupted" in caught.value.message
        assert caught.value.details.get("fenced") is True
    assert contents(peer) == [("message", "hello"), ("event", "interrupted")]


@pytest.mark.slow
def test_after_an_outage_the_first_call_succeeds(postgres_stores: StoreFactory) -> None:
    """The database is unreachable for 18 s, calls failing meanwhile; the first call after
    it is back succeeds (within its 5 s wait for a connection): the pool's reconnect
    back-off is capped (uncapped, its next attempt would come 16 s after the last)."""
    url = postgres_stores.url()
    with proxy_for(url) as proxy:
        store = postgres_stores.blocking(proxy.url(url))
        store.append("t", message("before"))
        proxy.refuse = True
        proxy.drop()
        failures = 0
        ends = time.monotonic() + 18
        while time.monotonic() < ends:
            with pytest.raises(HooklineError) as caught:
                store.append("t", message("during"))
            assert caught.value.kind is ErrorKind.temporary
            failures += 1
        proxy.refuse = False
        store.append("t", message("after"))
        assert failures >= 2
        assert contents(store) == [("message", "before"), ("message", "after")]


def test_a_black_holed_connection_fails_the_call_at_its_deadline(
    postgres_stores: StoreFactory,
) -> None:
    url = postgres_stores.url()
    with proxy_for(url) as proxy:
        store = postgres_stores.blocking(proxy.url(url), statement_timeout=2.0)
        store.append("t", message("before"))
        proxy.pause()
        with pytest.raises(HooklineError) as caught:
            store.fetch_all(TapeQuery("t"))
        assert caught.value.kind is ErrorKind.temporary
        assert "no answer within 2 s" in caught.value.message
        with pytest.raises(HooklineError) as caught:  # no new connection either
            store.append("t", message("not stored"))
        assert caught.value.kind is ErrorKind.temporary
        proxy.resume()
        store.append("t", message("after"))
        assert contents(store)[-1] == ("message", "after")


def test_health_checks_never_keep_a_replica_that_lost_its_lock_looking_alive(
    postgres_stores: StoreFactory,
) -> None:
    """The store's lock backend is terminated and no new connection can be made, while
    its pooled connection still works: health checks keep succeeding (the database takes
    writes), but they leave the heartbeat alone, so a peer recovers the run once the
    grace has passed."""
    url = postgres_stores.url() + "&hookline_grace=1"
    with proxy_for(url) as proxy:
        live = postgres_stores.open(proxy.url(url))
        store = BlockingStore(postgres_stores.portal, live)
        peer = postgres_stores.blocking(url)
        store.journal_write("run-1", "t", [("t", "append", message("hello"))])
        proxy.refuse = True
        sql(url, "SELECT pg_terminate_backend(%s)", _owner_backend(url, live.owner))
        (before,), = sql(url, "SELECT heartbeat FROM hookline_owners WHERE owner = %s",
                         live.owner)
        portal = postgres_stores.portal

        def probed_then_swept() -> list[str]:
            portal.call(live.check_writable)
            return portal.call(peer.store._sweep_runs)

        assert wait_until(probed_then_swept, timeout=30) == ["t"]
        assert sql(url, "SELECT heartbeat FROM hookline_owners WHERE owner = %s",
                   live.owner) in ([], [(before,)])
        proxy.refuse = False
        assert contents(peer) == [("message", "hello"), ("event", "interrupted")]


def test_the_health_check_is_a_real_write(postgres_stores: StoreFactory) -> None:
    live = postgres_stores.open(pool_max=1)

    async def read_only() -> None:
        async with live._connection() as conn:
            await conn.execute("SET default_transaction_read_only = on")

    postgres_stores.portal.call(live.check_writable)
    postgres_stores.portal.call(read_only)
    with pytest.raises(HooklineError) as caught:
        postgres_stores.portal.call(live.check_writable)
    assert caught.value.kind is ErrorKind.temporary
    assert "read-only transaction" in caught.value.message


def test_the_heartbeat_goes_on_while_the_sweep_waits_for_a_connection(
    postgres_stores: StoreFactory,
) -> None:
    """Every pooled connection is busy for 3 s, three times the grace: the sweep waits
    for one, the heartbeat does not (it has the lock's own connection), so the server
    never ends the lock's session for want of a heartbeat and the lease stays."""
    import anyio

    url = postgres_stores.url() + "&hookline_grace=1"
    live = postgres_stores.open(url, pool_max=1, sweep=0.2)
    owner, backend = live.owner, _owner_backend(url, live.owner)

    async def busy_pool_beside_maintenance() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(live.maintain)
            await anyio.sleep(0.5)
            async with live._connection() as conn:
                await conn.execute("SELECT pg_sleep(3)")
            await anyio.sleep(0.5)
            group.cancel_scope.cancel()

    postgres_stores.portal.call(busy_pool_beside_maintenance)
    assert live.owner == owner
    assert _owner_backend(url, owner) == backend


def test_the_health_check_ends_within_two_seconds_on_a_black_holed_connection(
    postgres_stores: StoreFactory,
) -> None:
    """The health check is shielded (a started write is never abandoned), so its own
    bound is what keeps `/v1/health` to its documented 2 s."""
    url = postgres_stores.url()
    with proxy_for(url) as proxy:
        live = postgres_stores.open(proxy.url(url))
        postgres_stores.portal.call(live.check_writable)
        proxy.pause()
        started = time.monotonic()
        with pytest.raises(HooklineError) as caught:
            postgres_stores.portal.call(live.check_writable)
        took = time.monotonic() - started
        proxy.resume()
    print(f"the health check failed after {took:.2f} s: {caught.value.message}")
    assert caught.value.kind is ErrorKind.temporary
    assert "within 2 s" in caught.value.message, caught.value.message


def keyed_message(key: str) -> TapeEntry:
    return TapeEntry.new("message", {"role": "user", "content": "run it once"},
                         request={"id": f"id-{key}", "key": key, "digest": "d"})


def test_a_key_whose_lock_was_lost_while_its_request_waited_is_not_run(
    postgres_stores: StoreFactory,
) -> None:
    """A replica claims a key for a request queued behind another turn; its lock's
    connection is cut (a backend ended, a restart), the key's lock with it; a retry on a
    peer claims the key, finds nothing recorded, and runs the request. The first replica's
    run of it must then not start, even once its lock connection is back."""
    url = postgres_stores.url()
    portal = postgres_stores.portal
    first, peer = postgres_stores.open(url), postgres_stores.open(url)
    assert portal.call(first.claim_request, "t", "k-1")
    assert portal.call(first.claim_request, "t", "k-2")
    assert not portal.call(peer.claim_request, "t", "k-1")
    backend = first._owner_conn.info.backend_pid
    assert sql(url, "SELECT pg_terminate_backend(%s)", backend) == [(True,)]
    assert wait_until(lambda: portal.call(peer.claim_request, "t", "k-1"))  # the gap
    portal.call(first._keep_alive)
    assert first._owner_conn.info.backend_pid != backend, "the lock's connection is back"
    with pytest.raises(HooklineError) as refused:
        portal.call(first.journal_write, "run-1", "t", [("t", "append", keyed_message("k-1"))])
    assert refused.value.kind is ErrorKind.temporary
    assert "another replica may have run it" in refused.value.message
    with pytest.raises(HooklineError, match="another replica may have run it"):
        portal.call(first.journal_commit, "run-2", [("t", "append", keyed_message("k-2"))])
    assert not sql(url, "SELECT run FROM hookline_journal_runs")
    assert portal.call(first.claim_request, "t", "k-3")  # claimed on the new connection
    portal.call(first.journal_write, "run-3", "t", [("t", "append", keyed_message("k-3"))])
    portal.call(first.journal_commit, "run-3", [])
    assert [e.meta["request"]["key"] for e in portal.call(first.fetch_all, TapeQuery("t"))
            ] == ["k-3"]
