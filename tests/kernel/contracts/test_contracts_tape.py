"""TapeEntry, TapeQuery builders, apply_query reference semantics, stores and TapeContext."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import (
    ENTRY_KINDS,
    LAST_ANCHOR,
    AsyncBatchTapeStore,
    AsyncTapeStore,
    BatchTapeStore,
    TapeContext,
    TapeEntry,
    TapeQuery,
    TapeSidecar,
    TapeStore,
    apply_query,
    is_async_store,
)


def entry(
    entry_id: int, kind: str, day: int = 1, hour: int = 0, meta: dict | None = None, **payload
) -> TapeEntry:
    stamp = datetime(2025, 3, day, hour, tzinfo=UTC).isoformat()
    return TapeEntry(entry_id, kind, dict(payload), meta or {}, stamp)


TAPE = [
    entry(1, "anchor", 1, name="session/start"),
    entry(2, "message", 1, 1, role="user", content="Hello World"),
    entry(3, "anchor", 1, 2, name="phase"),
    entry(4, "message", 2, role="assistant", content="first phase answer"),
    entry(5, "tool_call", 2, 3, name="fs.read"),
    entry(6, "anchor", 2, 4, name="checkpoint"),
    entry(7, "message", 3, role="user", content="second"),
    entry(8, "anchor", 3, 1, name="phase"),
    entry(9, "tool_result", 3, 2, output="ok", meta={"run_id": "run-XYZ"}),
    entry(10, "event", 4, name="sidecar.reset", meta={"context": False}),
]


def ids(entries: Iterable[TapeEntry]) -> list[int]:
    return [item.id for item in entries]


def q() -> TapeQuery:
    return TapeQuery("main")


def test_tape_entry_new_and_kinds() -> None:
    made = TapeEntry.new("message", {"content": "hi"}, run_id="run-1", context=False)
    assert made.id == 0
    assert made.meta == {"run_id": "run-1", "context": False}
    moment = datetime.fromisoformat(made.date)
    assert moment.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - moment) < timedelta(minutes=1)
    assert ENTRY_KINDS == (
        "message",
        "system",
        "anchor",
        "tool_call",
        "tool_result",
        "error",
        "event",
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.id = 3  # type: ignore[misc]


def test_builders_return_new_queries() -> None:
    base = q()
    built = base.query("hi").kinds("message", "event").limit(3).between_dates("a", "b")
    assert base == TapeQuery("main")
    assert built.text_filter == "hi"
    assert built.kind_filter == ("message", "event")
    assert built.max_entries == 3
    assert built.date_range == ("a", "b")
    after = built.after_anchor("phase")
    assert after.anchor == "phase" and after.anchor_range is None
    between = after.between_anchors("a", "b")
    assert between.anchor is None and between.anchor_range == ("a", "b")
    assert between.last_anchor().anchor is LAST_ANCHOR
    assert between.last_anchor().anchor_range is None
    with pytest.raises(ValueError):
        base.limit(-1)


def test_no_filters_returns_everything_in_order() -> None:
    assert ids(apply_query(TAPE, q())) == list(range(1, 11))
    assert apply_query([], q()) == []


def test_after_anchor_uses_most_recent_anchor_of_that_name() -> None:
    assert ids(apply_query(TAPE, q().after_anchor("phase"))) == [9, 10]
    assert ids(apply_query(TAPE, q().after_anchor("session/start"))) == list(range(2, 11))


def test_last_anchor() -> None:
    assert ids(apply_query(TAPE, q().last_anchor())) == [9, 10]
    assert ids(apply_query(TAPE[:6], q().last_anchor())) == []


def test_between_anchors() -> None:
    assert ids(apply_query(TAPE, q().between_anchors("session/start", "checkpoint"))) == [
        2,
        3,
        4,
        5,
    ]
    # The start is the most recent anchor of that name; the end must follow it.
    with pytest.raises(HooklineError) as caught:
        apply_query(TAPE, q().between_anchors("phase", "checkpoint"))
    assert caught.value.kind is ErrorKind.not_found


@pytest.mark.parametrize(
    "query",
    [
        q().after_anchor("nope"),
        q().between_anchors("nope", "phase"),
        q().between_anchors("session/start", "nope"),
    ],
)
def test_missing_anchor_is_not_found(query: TapeQuery) -> None:
    with pytest.raises(HooklineError) as caught:
        apply_query(TAPE, query)
    assert caught.value.kind is ErrorKind.not_found
    assert "nope" in caught.value.message


def test_last_anchor_without_anchors_is_not_found() -> None:
    with pytest.raises(HooklineError) as caught:
        apply_query([entry(1, "message", content="x")], q().last_anchor())
    assert caught.value.kind is ErrorKind.not_found


def test_between_dates_is_inclusive() -> None:
    start = datetime(2025, 3, 1, 2, tzinfo=UTC).isoformat()
    end = datetime(2025, 3, 2, 3, tzinfo=UTC).isoformat()
    assert ids(apply_query(TAPE, q().between_dates(start, end))) == [3, 4, 5]
    # A bare end date covers that whole day; datetimes and dates work as bounds.
    assert ids(apply_query(TAPE, q().between_dates("2025-03-02", "2025-03-02"))) == [4, 5, 6]
    assert ids(apply_query(TAPE, q().between_dates(date(2025, 3, 3), date(2025, 3, 4)))) == [
        7,
        8,
        9,
        10,
    ]
    # Offsets are honoured: 2025-03-02T05:00+02:00 is 03:00 UTC.
    plus_two = timezone(timedelta(hours=2))
    aware = datetime(2025, 3, 2, 5, tzinfo=plus_two)
    assert ids(apply_query(TAPE, q().between_dates("2025-03-02", aware))) == [4, 5]


def test_between_dates_errors_are_invalid_input() -> None:
    with pytest.raises(HooklineError) as caught:
        apply_query(TAPE, q().between_dates("2025-03-03", "2025-03-01"))
    assert caught.value.kind is ErrorKind.invalid_input
    with pytest.raises(HooklineError) as caught:
        apply_query(TAPE, q().between_dates("yesterday", "2025-03-01"))
    assert caught.value.kind is ErrorKind.invalid_input


def test_kinds_text_and_limit() -> None:
    assert ids(apply_query(TAPE, q().kinds("message"))) == [2, 4, 7]
    assert ids(apply_query(TAPE, q().kinds("anchor", "event"))) == [1, 3, 6, 8, 10]
    assert ids(apply_query(TAPE, q().query("hello world"))) == [2]
    assert ids(apply_query(TAPE, q().query("FS.READ"))) == [5]
    assert ids(apply_query(TAPE, q().query("run-xyz"))) == [9]  # meta is searched too
    assert ids(apply_query(TAPE, q().query("tool_result"))) == []  # the kind is not
    assert ids(apply_query(TAPE, q().limit(2))) == [1, 2]
    assert apply_query(TAPE, q().limit(0)) == []


def test_tail_keeps_the_last_matches_before_the_limit() -> None:
    assert ids(apply_query(TAPE, q().tail(3))) == [8, 9, 10]
    assert ids(apply_query(TAPE, q().tail(100))) == list(range(1, 11))
    assert apply_query(TAPE, q().tail(0)) == []
    assert ids(apply_query(TAPE, q().kinds("message").tail(2))) == [4, 7]
    assert ids(apply_query(TAPE, q().last_anchor().tail(1))) == [10]
    assert ids(apply_query(TAPE, q().tail(4).limit(2))) == [7, 8]  # first 2 of the last 4
    assert q().tail(3).limit(1) == q().limit(1).tail(3)  # fields, not a pipeline
    with pytest.raises(ValueError):
        q().tail(-1)


def test_filters_combine() -> None:
    query = q().after_anchor("session/start").kinds("message").query("E").limit(2)
    assert ids(apply_query(TAPE, query)) == [2, 4]
    unicode_tape = [entry(1, "message", content="你好, Wörld")]
    assert ids(apply_query(unicode_tape, q().query("wÖrld"))) == [1]


class SyncStore:
    def __init__(self) -> None:
        self.tapes: dict[str, list[TapeEntry]] = {}

    def list_tapes(self) -> list[str]:
        return sorted(self.tapes)

    def reset(self, tape: str) -> None:
        self.tapes.pop(tape, None)

    def fetch_all(self, query: TapeQuery) -> Iterable[TapeEntry]:
        return apply_query(self.tapes.get(query.tape, []), query)

    def append(self, tape: str, entry: TapeEntry) -> None:
        entries = self.tapes.setdefault(tape, [])
        entries.append(dataclasses.replace(entry, id=len(entries) + 1))


class AsyncStore:
    def __init__(self) -> None:
        self.inner = SyncStore()

    async def list_tapes(self) -> list[str]:
        return self.inner.list_tapes()

    async def reset(self, tape: str) -> None:
        self.inner.reset(tape)

    async def fetch_all(self, query: TapeQuery) -> Iterable[TapeEntry]:
        return self.inner.fetch_all(query)

    async def append(self, tape: str, entry: TapeEntry) -> None:
        self.inner.append(tape, entry)


def test_sync_store_and_query_all() -> None:
    store = SyncStore()
    assert isinstance(store, TapeStore)
    assert not is_async_store(store)
    store.append("t", TapeEntry.new("anchor", {"name": "start"}))
    store.append("t", TapeEntry.new("message", {"content": "hi"}))
    query = TapeQuery("t", store).last_anchor()
    assert [(item.id, item.kind) for item in query.all()] == [(2, "message")]
    with pytest.raises(ValueError, match="no store"):
        TapeQuery("t").all()


@pytest.mark.anyio
async def test_async_store_and_query_all() -> None:
    store = AsyncStore()
    assert isinstance(store, AsyncTapeStore)
    assert is_async_store(store)
    await store.append("t", TapeEntry.new("message", {"content": "hi"}))
    entries = await TapeQuery("t", store).all()
    assert ids(entries) == [1]
    assert await store.list_tapes() == ["t"]


def test_batch_protocols_extend_the_reference_ones() -> None:
    class Batch(SyncStore):
        def append_many(self, tape, entries, *, bootstrap=None):  # type: ignore[no-untyped-def]
            return []

    class AsyncBatch(AsyncStore):
        async def append_many(self, tape, entries, *, bootstrap=None):  # type: ignore[no-untyped-def]
            return []

    assert isinstance(Batch(), BatchTapeStore) and isinstance(Batch(), TapeStore)
    assert isinstance(AsyncBatch(), AsyncBatchTapeStore)
    # A reference store (append only) is still a TapeStore, just not a batch one.
    assert isinstance(SyncStore(), TapeStore) and not isinstance(SyncStore(), BatchTapeStore)
    assert not isinstance(AsyncStore(), AsyncBatchTapeStore)


def test_is_async_store_edge_cases() -> None:
    class CallableAppend:
        async def __call__(self, tape: str, entry: TapeEntry) -> None:
            return None

    class Wrapper:
        append = CallableAppend()

    assert is_async_store(Wrapper())
    assert not is_async_store(object())


def test_tape_sidecar_protocol() -> None:
    class Spill:
        name = "spill"

    assert isinstance(Spill(), TapeSidecar)
    assert not isinstance(object(), TapeSidecar)


def test_tape_context_anchor_rule() -> None:
    default = TapeContext()
    assert default.anchor is LAST_ANCHOR
    assert default.state == {}
    assert default.build_query(q()).anchor is LAST_ANCHOR
    assert ids(apply_query(TAPE, default.build_query(q()))) == [9, 10]
    named = TapeContext(anchor="checkpoint")
    assert ids(apply_query(TAPE, named.build_query(q()))) == [7, 8, 9, 10]
    whole = TapeContext(anchor=None)
    assert whole.build_query(q()) == q()
    assert default.window is None
    windowed = TapeContext(window=3)
    assert windowed.build_query(q()) == q().last_anchor().tail(3)
    assert ids(apply_query(TAPE, TapeContext(anchor="checkpoint", window=2).build_query(q()))) == [
        9, 10]
    # A real anchor that happens to be spelled like the marker is still just a name.
    spelled = TapeContext(anchor=str(LAST_ANCHOR))
    assert spelled.build_query(q()).anchor is not LAST_ANCHOR


def test_last_anchor_marker_survives_copy_and_pickle() -> None:
    assert copy.deepcopy(LAST_ANCHOR) is LAST_ANCHOR
    assert pickle.loads(pickle.dumps(LAST_ANCHOR)) is LAST_ANCHOR
    assert pickle.loads(pickle.dumps(q().last_anchor())).anchor is LAST_ANCHOR
    assert isinstance(LAST_ANCHOR, str)
