"""Group commit on the PostgreSQL tape store (builtins/store/postgres/group.py), on a real
server: concurrent writes share one transaction, a refused member fails alone, and a group
whose connection is cut stores each run once.

A group is made for sure by holding, on a connection of the test's own, the advisory lock
of the tape the first write goes to: that write waits on the server while the others queue
behind it, and they all go as the next group once the lock is let go."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from postgres_support import StoreFactory
from tcp_proxy import proxy_for

from hookline.builtins.store.postgres.sql import NS_TAPE
from hookline.kernel.errors import HooklineError
from hookline.kernel.tape import TapeEntry, TapeQuery


def message(content: str) -> TapeEntry:
    return TapeEntry.new("message", {"role": "user", "content": content})


def contents(store: Any, tape: str) -> list[tuple[int, Any]]:
    return [(e.id, e.payload.get("content")) for e in store.fetch_all(TapeQuery(tape))]


async def behind_a_held_lock(store: Any, url: str,
                             writes: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Start a write to tape `blocker` while its lock is held elsewhere, queue `writes`
    behind it, let the lock go; what each write returned or raised."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(
            url.split("&hookline_")[0], autocommit=True) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s, hashtext('blocker'))", (NS_TAPE,))
        first = asyncio.ensure_future(store.append("blocker", message("first")))
        while store._groups._runner is None or store._groups._waiting:
            await asyncio.sleep(0.01)  # the first write has left the queue
        tasks = [asyncio.ensure_future(write()) for write in writes]
        while len(store._groups._waiting) < len(writes):
            await asyncio.sleep(0.01)
        await conn.execute("SELECT pg_advisory_unlock(%s, hashtext('blocker'))", (NS_TAPE,))
        await first
        return await asyncio.gather(*tasks, return_exceptions=True)


def test_concurrent_writes_go_as_one_group_and_each_is_stored_once(
    postgres_stores: StoreFactory,
) -> None:
    url = postgres_stores.url()
    blocking = postgres_stores.blocking(url)
    store = blocking.store
    for n in range(5):
        blocking.journal_write(f"run-{n}", f"s{n}", [(f"s{n}", "append", message("asked"))])

    def commit(n: int) -> Callable[[], Awaitable[Any]]:
        return lambda: store.journal_commit(f"run-{n}", [(f"s{n}", "append", message("reply"))])

    def append(n: int) -> Callable[[], Awaitable[Any]]:
        return lambda: store.append_many(f"a{n % 3}", [message(f"m{n}")])

    writes = [commit(n) for n in range(5)] + [append(n) for n in range(9)]
    results = postgres_stores.portal.call(behind_a_held_lock, store, url, writes)

    assert not [r for r in results if isinstance(r, BaseException)]
    assert store._groups.largest == len(writes)  # all of them in one transaction
    for n in range(5):
        assert contents(blocking, f"s{n}") == [(1, "asked"), (2, "reply")]
        assert [entry.id for entry in results[n]] == [1, 2]
    for tape in ("a0", "a1", "a2"):  # ids gapless, each message once
        stored = contents(blocking, tape)
        assert [entry_id for entry_id, _ in stored] == [1, 2, 3]
        assert sorted(text for _, text in stored) == sorted(
            f"m{n}" for n in range(9) if f"a{n % 3}" == tape)
    assert blocking.pending_runs() == 0


def test_a_member_the_server_refuses_fails_alone_and_the_rest_of_its_group_is_stored(
    postgres_stores: StoreFactory,
) -> None:
    from test_store_postgres_faults import sql

    url = postgres_stores.url()
    blocking = postgres_stores.blocking(url)
    store = blocking.store
    for run in ("run-ok", "run-lost"):
        blocking.journal_write(run, run, [(run, "append", message("asked"))])
    # Another owner took run-lost over (its lease is gone): its commit must be refused.
    sql(url, "UPDATE hookline_journal_runs SET owner = owner + 1 WHERE run = 'run-lost'")
    writes = [
        lambda: store.journal_commit("run-ok", [("run-ok", "append", message("reply"))]),
        lambda: store.journal_commit("run-lost", [("run-lost", "append", message("reply"))]),
        lambda: store.append_many("other", [message("kept")]),
    ]
    ok, lost, other = postgres_stores.portal.call(behind_a_held_lock, store, url, writes)

    assert store._groups.largest == 3
    assert isinstance(lost, HooklineError) and "refused the write" in str(lost)
    assert [entry.id for entry in ok] == [1, 2]
    assert contents(blocking, "run-ok") == [(1, "asked"), (2, "reply")]
    assert contents(blocking, "run-lost") == []  # nothing of the refused run
    assert [entry.id for entry in other] == [1]
    assert contents(blocking, "other") == [(1, "kept")]


def test_a_group_whose_connection_is_cut_stores_each_run_once(
    postgres_stores: StoreFactory,
) -> None:
    """The group committed and its answer was lost: whether it committed is unknown, so
    each run's commit is repeated, which reads back what the group stored."""
    url = postgres_stores.url()
    with proxy_for(url) as proxy:
        blocking = postgres_stores.blocking(proxy.url(url))
        store = blocking.store
        for n in range(4):
            blocking.journal_write(f"run-{n}", f"s{n}", [(f"s{n}", "append", message("asked"))])
        writes = [
            (lambda n=n: store.journal_commit(f"run-{n}", [(f"s{n}", "append",
                                                            message("reply"))]))
            for n in range(4)
        ]
        proxy.cut_after(b"COMMIT")  # the group's own COMMIT (a write alone has none)
        results = postgres_stores.portal.call(behind_a_held_lock, store, url, writes)

        assert proxy.cuts == 1 and store._groups.largest == 4
        assert not [r for r in results if isinstance(r, BaseException)]
        for n in range(4):
            assert [entry.id for entry in results[n]] == [1, 2]
            assert contents(blocking, f"s{n}") == [(1, "asked"), (2, "reply")]
        assert blocking.pending_runs() == 0


@pytest.mark.parametrize("size", [1, 3])
def test_a_queued_write_is_not_abandoned_when_its_caller_is_cancelled(
    postgres_stores: StoreFactory, size: int,
) -> None:
    """Cancelling the caller does not abandon a write waiting for the server: it is
    stored, and the caller goes on only after that."""
    import anyio

    url = postgres_stores.url()
    blocking = postgres_stores.blocking(url)
    store = blocking.store
    scopes: list[anyio.CancelScope] = []
    finished: list[int] = []

    async def write(n: int) -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await store.append_many("t", [message(f"m{n}")])
        finished.append(n)

    async def cancelled() -> None:
        with tape_lock_held(url, "t"):
            async with anyio.create_task_group() as group:
                for n in range(size):
                    group.start_soon(write, n)
                await anyio.sleep(0.3)
                for scope in scopes:
                    scope.cancel()
                await anyio.sleep(0.2)
                assert finished == []  # each still waits for its write
                group.start_soon(release)
        assert sorted(finished) == list(range(size))

    release_lock: list[Callable[[], None]] = []

    async def release() -> None:
        release_lock.pop()()

    @contextmanager
    def tape_lock_held(url: str, tape: str) -> Iterator[None]:
        import psycopg

        with psycopg.connect(url.split("&hookline_")[0], autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (NS_TAPE, tape))
            release_lock.append(lambda: conn.execute(
                "SELECT pg_advisory_unlock(%s, hashtext(%s))", (NS_TAPE, tape)))
            yield

    postgres_stores.portal.call(cancelled)
    assert sorted(text for _, text in contents(blocking, "t")) == [f"m{n}" for n in range(size)]


def test_a_write_to_a_closed_store_fails_with_a_config_error(
    postgres_stores: StoreFactory,
) -> None:
    blocking = postgres_stores.blocking()
    blocking.append_many("t", [message("kept")])
    blocking.close()
    with pytest.raises(HooklineError, match="is closed") as raised:
        blocking.append_many("t", [message("refused")])
    assert raised.value.kind.value == "config"
    with pytest.raises(HooklineError, match="is closed"):
        blocking.journal_write("run-1", "t", [("t", "append", message("refused"))])
