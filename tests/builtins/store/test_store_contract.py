"""One contract suite for every builtin tape store (in-memory, SQLite and PostgreSQL), sync
and async. The PostgreSQL store is asynchronous: it runs here behind
`postgres_support.BlockingStore`, on a real server (see tests/postgres_support.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from hookline.builtins.store import (
    AsyncStoreAdapter,
    InMemoryTapeStore,
    SQLiteTapeStore,
    append_batch,
    as_async_store,
)
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import (
    AsyncBatchTapeStore,
    AsyncTapeStore,
    BatchTapeStore,
    TapeEntry,
    TapeQuery,
    TapeStore,
    apply_query,
)

StoreFactory = Callable[[], TapeStore]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory of fresh stores of one kind (SQLite: a new file per call; PostgreSQL: a
    new schema per call)."""
    made: list[SQLiteTapeStore] = []
    postgres = request.getfixturevalue("postgres_stores") if request.param == "postgres" else None

    def factory() -> TapeStore:
        if request.param == "memory":
            return InMemoryTapeStore()
        if postgres is not None:
            return postgres.blocking()
        store = SQLiteTapeStore(tmp_path / "nested" / f"tapes-{len(made)}.db")
        made.append(store)
        return store

    yield factory
    for store in made:
        store.close()


@pytest.fixture
def store(make_store: StoreFactory) -> TapeStore:
    return make_store()


def stamp(day: int, hour: int = 0, minute: int = 0) -> str:
    return datetime(2025, 3, day, hour, minute, tzinfo=UTC).isoformat()


def new(kind: str, day: int = 1, hour: int = 0, meta: dict | None = None, **payload) -> TapeEntry:
    return TapeEntry(0, kind, dict(payload), meta or {}, stamp(day, hour))


# A tape exercising every query feature: repeated anchor names, kinds, days, text in meta.
SAMPLE = [
    new("anchor", 1, name="session/start", state={"owner": "human"}),
    new("message", 1, 1, role="user", content="Hello World"),
    new("anchor", 1, 2, name="phase"),
    new("message", 2, role="assistant", content="first phase answer"),
    new("tool_call", 2, 3, calls=[{"id": "c1", "name": "fs.read", "arguments": "{}"}]),
    new("anchor", 2, 4, name="checkpoint"),
    new("message", 3, role="user", content="second ÜBER"),
    new("anchor", 3, 1, name="phase"),
    new("tool_result", 3, 2, meta={"run_id": "run-XYZ"}, results=[{"call_id": "c1"}]),
    new("event", 4, meta={"context": False}, name="sidecar.reset", data={}),
    new("message", 4, 5, role="user", content="über alles"),
]


def fill(store: TapeStore, tape: str = "main") -> list[TapeEntry]:
    return [store.append(tape, item) for item in SAMPLE]


def ids(entries) -> list[int]:
    return [item.id for item in entries]


def q(tape: str = "main") -> TapeQuery:
    return TapeQuery(tape)


QUERIES: dict[str, TapeQuery] = {
    "all": q(),
    "text": q().query("hello world"),
    "text-meta": q().query("run-xyz"),
    "text-unicode-casefold": q().query("über"),
    "text-none": q().query("absent"),
    "after-anchor": q().after_anchor("phase"),
    "after-anchor-first": q().after_anchor("session/start"),
    "last-anchor": q().last_anchor(),
    "between": q().between_anchors("session/start", "phase"),
    "between-spanning-anchor": q().between_anchors("session/start", "checkpoint"),
    "between-missing-end": q().between_anchors("phase", "checkpoint"),
    "after-missing-anchor": q().after_anchor("nope"),
    "dates": q().between_dates("2025-03-02", "2025-03-03"),
    "dates-datetime": q().between_dates(
        datetime(2025, 3, 1, 1, tzinfo=UTC), datetime(2025, 3, 2, 3, tzinfo=UTC)
    ),
    "dates-date": q().between_dates(date(2025, 3, 4), date(2025, 3, 4)),
    "kinds": q().kinds("message"),
    "kinds-many": q().kinds("anchor", "event"),
    "kinds-limit": q().kinds("message", "tool_call").limit(2),
    "limit": q().limit(3),
    "limit-zero": q().limit(0),
    "limit-beyond": q().limit(100),
    "after-anchor-kinds-limit": q().after_anchor("session/start").kinds("message").limit(2),
    "last-anchor-text": q().last_anchor().query("über"),
    "dates-kinds-text-limit": q()
    .between_dates("2025-03-01", "2025-03-04")
    .kinds("message")
    .query("e")
    .limit(3),
    "tail": q().tail(3),
    "tail-zero": q().tail(0),
    "tail-beyond": q().tail(100),
    "tail-kinds": q().kinds("message", "anchor").tail(3),
    "tail-limit": q().tail(5).limit(2),
    "tail-text": q().query("über").tail(1),
    "tail-dates": q().between_dates("2025-03-01", "2025-03-02").tail(2),
    "last-anchor-tail": q().last_anchor().tail(2),
    "last-anchor-tail-beyond": q().last_anchor().tail(50),
    "last-anchor-tail-kinds": q().last_anchor().kinds("message").tail(1),
    "after-anchor-tail": q().after_anchor("session/start").tail(4),
    "after-anchor-tail-kinds": q().after_anchor("phase").kinds("anchor", "event").tail(1),
    "after-anchor-tail-limit": q().after_anchor("session/start").tail(6).limit(2),
    "after-missing-anchor-tail": q().after_anchor("nope").tail(2),
    "between-tail": q().between_anchors("session/start", "checkpoint").tail(2),
}


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_query_feature_matches_the_reference(store: TapeStore, name: str) -> None:
    stored = fill(store)
    query = QUERIES[name]
    expected = outcome(lambda: apply_query(stored, query))
    assert outcome(lambda: store.fetch_all(query)) == expected
    assert outcome(lambda: store.fetch_all(query)) == expected  # stable


def outcome(run: Callable[[], object]) -> tuple:
    """Entries, or the error kind and message: stores must match the reference in both."""
    try:
        return ("ok", list(run()))  # type: ignore[call-overload]
    except HooklineError as exc:
        return ("error", exc.kind, exc.message)


def test_query_results_spot_checks(store: TapeStore) -> None:
    fill(store)
    assert ids(store.fetch_all(q().query("hello world"))) == [2]
    assert ids(store.fetch_all(q().after_anchor("phase"))) == [9, 10, 11]
    assert ids(store.fetch_all(q().last_anchor())) == [9, 10, 11]
    assert ids(store.fetch_all(q().between_anchors("session/start", "phase"))) == [2]
    assert ids(store.fetch_all(q().between_dates("2025-03-04", "2025-03-04"))) == [10, 11]
    assert ids(store.fetch_all(q().kinds("message").limit(2))) == [2, 4]
    assert ids(store.fetch_all(q().query("ÜBER"))) == [7, 11]


@pytest.mark.parametrize(
    ("query", "kind"),
    [
        (q().after_anchor("nope"), ErrorKind.not_found),
        (q().between_anchors("nope", "phase"), ErrorKind.not_found),
        (q().between_anchors("checkpoint", "session/start"), ErrorKind.not_found),
        (q().between_dates("2025-03-04", "2025-03-01"), ErrorKind.invalid_input),
        (q().between_dates("not a date", "2025-03-01"), ErrorKind.invalid_input),
    ],
)
def test_query_errors(store: TapeStore, query: TapeQuery, kind: ErrorKind) -> None:
    fill(store)
    with pytest.raises(HooklineError) as caught:
        store.fetch_all(query)
    assert caught.value.kind is kind


def test_last_anchor_without_anchors_is_not_found(store: TapeStore) -> None:
    store.append("main", new("message", role="user", content="x"))
    with pytest.raises(HooklineError) as caught:
        store.fetch_all(q().last_anchor())
    assert caught.value.kind is ErrorKind.not_found
    # An unknown tape is simply empty.
    assert list(store.fetch_all(q("unknown"))) == []


def test_append_assigns_ids_per_tape_and_returns_the_stored_entry(store: TapeStore) -> None:
    sent = TapeEntry.new("message", {"role": "user", "content": "hi ✓"}, run_id="r1")
    first = store.append("a", sent)
    assert isinstance(first, TapeEntry)
    assert (first.id, first.kind, first.payload, first.meta, first.date) == (
        1,
        "message",
        {"role": "user", "content": "hi ✓"},
        {"run_id": "r1"},
        sent.date,
    )
    assert store.append("a", replace_id(sent, 99)).id == 2  # the incoming id is ignored
    assert store.append("b", sent).id == 1
    assert store.append("a", sent).id == 3
    assert ids(store.fetch_all(q("a"))) == [1, 2, 3]
    assert next(iter(store.fetch_all(q("a")))) == first


def replace_id(entry: TapeEntry, new_id: int) -> TapeEntry:
    return TapeEntry(new_id, entry.kind, entry.payload, entry.meta, entry.date)


def test_payloads_round_trip_through_json(store: TapeStore) -> None:
    payload = {"nested": {"list": [1, 2.5, None, True, "ü"], "empty": {}}, "tuple": (1, 2)}
    stored = store.append("main", TapeEntry.new("event", payload))
    expected = {"nested": {"list": [1, 2.5, None, True, "ü"], "empty": {}}, "tuple": [1, 2]}
    assert stored.payload == expected
    assert next(iter(store.fetch_all(q()))).payload == expected


def test_a_lone_surrogate_is_stored_as_a_replacement_character(store: TapeStore) -> None:
    """Half a UTF-16 pair (valid JSON, sent by a model or a tool) is no character UTF-8 can
    hold: stored as U+FFFD, in every store alike, rather than failing the append."""
    stored = store.append("main", TapeEntry.new("anchor", {"name": "a\udcff", "ok": "\U0001f600"},
                                                note="b\ud800"))
    fetched = next(iter(store.fetch_all(q())))
    for entry in (stored, fetched):
        assert entry.payload == {"name": "a\ufffd", "ok": "\U0001f600"}
        assert entry.meta == {"note": "b\ufffd"}
    store.append("main", TapeEntry.new("event", {"after": True}))
    after = list(store.fetch_all(q().after_anchor("a\ufffd")))
    assert [entry.payload for entry in after] == [{"after": True}]


def test_stored_entries_are_isolated_from_callers(store: TapeStore) -> None:
    payload = {"items": [1]}
    store.append("main", TapeEntry.new("event", payload))
    payload["items"].append(2)
    fetched = next(iter(store.fetch_all(q())))
    fetched.payload["items"].append(3)
    assert next(iter(store.fetch_all(q()))).payload == {"items": [1]}


def test_unserialisable_payload_is_rejected_and_nothing_is_stored(store: TapeStore) -> None:
    with pytest.raises(HooklineError) as caught:
        store.append("main", TapeEntry.new("event", {"bad": object()}))
    assert caught.value.kind is ErrorKind.invalid_input
    with pytest.raises(HooklineError):
        store.append("main", TapeEntry.new("event", {}, bad={1, 2}))
    assert list(store.fetch_all(q())) == []
    assert store.append("main", TapeEntry.new("event", {})).id == 1


@pytest.mark.parametrize("tape", ["", None, 3])
def test_bad_tape_names_are_rejected(store: TapeStore, tape: object) -> None:
    with pytest.raises(HooklineError) as caught:
        store.append(tape, TapeEntry.new("event", {}))  # type: ignore[arg-type]
    assert caught.value.kind is ErrorKind.invalid_input


def test_bad_entries_are_rejected(store: TapeStore) -> None:
    for bad in ({"kind": "x"}, TapeEntry(0, "", {}), TapeEntry(0, "event", [])):  # type: ignore[arg-type]
        with pytest.raises(HooklineError):
            store.append("main", bad)  # type: ignore[arg-type]


def test_reset_clears_one_tape_and_restarts_ids(store: TapeStore) -> None:
    fill(store, "a")
    fill(store, "b")
    store.reset("a")
    assert list(store.fetch_all(q("a"))) == []
    assert len(list(store.fetch_all(q("b")))) == len(SAMPLE)
    assert store.append("a", new("event")).id == 1
    store.reset("never-written")  # no error


def test_list_tapes_is_sorted_hides_sidecars_and_empty_tapes(store: TapeStore) -> None:
    assert store.list_tapes() == []
    for tape in ["zeta", "ws__sess", "ws__sess__sidecar__spill", "alpha", "gone"]:
        store.append(tape, new("event"))
    store.reset("gone")
    assert store.list_tapes() == ["alpha", "ws__sess", "zeta"]
    # Sidecar tapes stay readable by name.
    assert ids(store.fetch_all(q("ws__sess__sidecar__spill"))) == [1]


def test_list_all_tapes_includes_sidecar_tapes(store: TapeStore) -> None:
    for tape in ("b", "a__sidecar__x", "c"):
        store.append(tape, new("event"))
    store.reset("c")
    assert store.list_all_tapes() == ["a__sidecar__x", "b"]  # type: ignore[attr-defined]


def test_tape_names_with_like_wildcards_are_literal(store: TapeStore) -> None:
    store.append("a_b", new("event"))
    store.append("a%b", new("event"))
    store.append("axb", new("event"))
    assert store.list_tapes() == ["a%b", "a_b", "axb"]
    assert ids(store.fetch_all(q("a_b"))) == [1]


def test_query_all_runs_on_the_bound_store(store: TapeStore) -> None:
    fill(store)
    assert ids(TapeQuery("main", store=store).kinds("anchor").all()) == [1, 3, 6, 8]


def in_threads(work: Callable[[int], None], count: int) -> None:
    """Run `work(0)` ... `work(count - 1)` in threads at once and wait for all of them."""
    pool = [threading.Thread(target=work, args=(n,)) for n in range(count)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()


def test_concurrent_appends_from_threads_keep_ids_gapless(store: TapeStore) -> None:
    per_thread, threads = 40, 6

    def work(worker: int) -> None:
        for n in range(per_thread):
            store.append("busy", TapeEntry.new("event", {"worker": worker, "n": n}))

    in_threads(work, threads)
    entries = list(store.fetch_all(q("busy")))
    assert ids(entries) == list(range(1, per_thread * threads + 1))
    for worker in range(threads):
        ns = [e.payload["n"] for e in entries if e.payload["worker"] == worker]
        assert ns == list(range(per_thread))


# -- the same stores through the async protocol -------------------------------------------


@pytest.mark.anyio
async def test_async_adapter_meets_the_contract(store: TapeStore) -> None:
    adapted = as_async_store(store)
    assert isinstance(adapted, AsyncTapeStore)
    stored = [await adapted.append("main", item) for item in SAMPLE]
    assert ids(stored) == list(range(1, len(SAMPLE) + 1))
    for query in QUERIES.values():
        try:
            got = ("ok", list(await adapted.fetch_all(query)))
        except HooklineError as exc:
            got = ("error", exc.kind, exc.message)
        assert got == outcome(lambda query=query: apply_query(stored, query))
    assert await TapeQuery("main", store=adapted).kinds("anchor").all() == [
        item for item in stored if item.kind == "anchor"
    ]
    await adapted.append("main__sidecar__x", new("event"))
    assert await adapted.list_tapes() == ["main"]
    await adapted.reset("main")
    assert list(await adapted.fetch_all(q())) == []
    with pytest.raises(HooklineError) as caught:
        await adapted.fetch_all(q("main__sidecar__x").after_anchor("nope"))
    assert caught.value.kind is ErrorKind.not_found


# -- atomic batches (BatchTapeStore.append_many) -------------------------------------------

ANCHOR = TapeEntry.new("anchor", {"name": "session/start", "state": {"owner": "human"}})


def kinds(entries) -> list[str]:
    return [item.kind for item in entries]


def test_builtin_stores_are_batch_stores(store: TapeStore) -> None:
    assert isinstance(store, BatchTapeStore)
    assert isinstance(as_async_store(store), AsyncBatchTapeStore)


def test_append_many_appends_contiguously_and_returns_the_stored_entries(
    store: BatchTapeStore,
) -> None:
    store.append("t", new("event"))
    batch = [new("message", role="user", content="a"), new("event", meta={"k": 1}, x=(1, 2))]
    stored = store.append_many("t", batch)
    assert ids(stored) == [2, 3]
    assert stored[1].payload == {"x": [1, 2]} and stored[1].meta == {"k": 1}
    assert list(store.fetch_all(q("t"))) == [next(iter(store.fetch_all(q("t")))), *stored]
    assert store.append_many("t", []) == []
    assert store.append_many("other", batch)[0].id == 1  # ids are per tape


def test_append_many_writes_the_bootstrap_anchor_only_on_a_tape_without_one(
    store: BatchTapeStore,
) -> None:
    first = store.append_many("t", [new("event")], bootstrap=ANCHOR)
    assert kinds(first) == ["anchor", "event"] and ids(first) == [1, 2]
    assert kinds(store.append_many("t", [new("event")], bootstrap=ANCHOR)) == ["event"]
    assert store.append_many("t", [], bootstrap=ANCHOR) == []
    # Any anchor counts, wherever it is on the tape.
    store.append_many("u", [new("event"), new("anchor", name="phase")])
    assert store.append_many("u", [], bootstrap=ANCHOR) == []
    assert kinds(store.fetch_all(q("t"))) == ["anchor", "event", "event"]


def test_append_many_is_all_or_nothing(store: BatchTapeStore) -> None:
    store.append("t", new("event"))
    with pytest.raises(HooklineError) as caught:
        store.append_many("t", [new("event"), TapeEntry.new("event", {"bad": object()})])
    assert caught.value.kind is ErrorKind.invalid_input
    with pytest.raises(HooklineError, match="must be an anchor"):
        store.append_many("t", [new("event")], bootstrap=new("event"))
    with pytest.raises(HooklineError, match="sequence"):
        store.append_many("t", new("event"))  # type: ignore[arg-type]
    with pytest.raises(HooklineError):
        store.append_many("", [new("event")])
    assert ids(store.fetch_all(q("t"))) == [1]
    assert ids(store.append_many("t", [new("event")])) == [2]


def test_concurrent_batches_never_interleave_and_one_bootstrap_anchor_wins(
    store: BatchTapeStore,
) -> None:
    """Threads racing on a new tape, each batch led by a conditional anchor."""
    workers, batches, size = 6, 12, 4
    start = threading.Barrier(workers)

    def work(worker: int) -> None:
        start.wait()
        for n in range(batches):
            entries = [TapeEntry.new("event", {"w": worker, "n": n, "k": k}) for k in range(size)]
            store.append_many("busy", entries, bootstrap=ANCHOR)

    in_threads(work, workers)
    entries = list(store.fetch_all(q("busy")))
    assert kinds(entries).count("anchor") == 1 and entries[0].kind == "anchor"
    assert ids(entries) == list(range(1, workers * batches * size + 2))
    events = entries[1:]
    for offset in range(0, len(events), size):  # each batch is one contiguous block
        block = events[offset : offset + size]
        assert {(e.payload["w"], e.payload["n"]) for e in block} == {
            (block[0].payload["w"], block[0].payload["n"])
        }
        assert [e.payload["k"] for e in block] == list(range(size))


@pytest.mark.anyio
async def test_append_many_through_the_async_adapter(store: BatchTapeStore) -> None:
    adapted = as_async_store(store)
    stored = await adapted.append_many("t", [new("event"), new("event")], bootstrap=ANCHOR)
    assert kinds(stored) == ["anchor", "event", "event"]
    assert kinds(await append_batch(adapted, "t", [new("event")], ANCHOR)) == ["event"]
    assert ids(await adapted.fetch_all(q("t"))) == [1, 2, 3, 4]


class AppendOnlyStore:
    """A reference store: the four methods and nothing else."""

    def __init__(self) -> None:
        self.inner = InMemoryTapeStore()
        self.appends = 0

    def list_tapes(self) -> list[str]:
        return self.inner.list_tapes()

    def reset(self, tape: str) -> None:
        self.inner.reset(tape)

    def fetch_all(self, query: TapeQuery) -> list[TapeEntry]:
        return self.inner.fetch_all(query)

    def append(self, tape: str, entry: TapeEntry) -> None:
        self.appends += 1
        self.inner.append(tape, entry)


@pytest.mark.anyio
async def test_append_only_stores_fall_back_to_one_append_per_entry() -> None:
    plain = AppendOnlyStore()
    assert not isinstance(plain, BatchTapeStore)
    adapted = as_async_store(plain)
    assert isinstance(adapted, AsyncStoreAdapter)
    first = await append_batch(adapted, "t", [new("event")], ANCHOR)
    assert kinds(first) == ["anchor", "event"] and plain.appends == 2
    assert kinds(await append_batch(adapted, "t", [new("event")], ANCHOR)) == ["event"]
    # The adapter's own append_many takes the same fallback.
    assert kinds(await adapted.append_many("t", [new("event")], bootstrap=ANCHOR)) == ["event"]
    assert kinds(plain.fetch_all(q("t"))) == ["anchor", "event", "event", "event"]
