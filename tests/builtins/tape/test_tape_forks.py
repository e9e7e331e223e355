"""Forks of the session Tape: buffered reads, merging back (also on errors and
cancellation), media redaction, and forks over a store with a run journal."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import anyio
import pytest
from tape_support import RecordingStore, Sidecar, kinds

from hookline.builtins.store import InMemoryTapeStore, SQLiteTapeStore, as_async_store
from hookline.builtins.tape.naming import session_tape_name, should_merge_back
from hookline.builtins.tape.tape import BOOTSTRAP_ANCHOR, Tape
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import TapeContext, TapeEntry, TapeQuery

pytestmark = pytest.mark.anyio


# -- forks ----------------------------------------------------------------------------------


async def test_fork_buffers_reads_through_and_merges_with_new_ids(any_store: object) -> None:
    tape = Tape(any_store, "main", sidecars=[Sidecar("a")])  # type: ignore[arg-type]
    await tape.ensure_bootstrap_anchor()
    await tape.append("message", {"role": "user", "content": "one"})
    async with tape.fork() as forked:
        assert forked.name == "main" and forked.sidecars == tape.sidecars
        added = await forked.append("message", {"role": "assistant", "content": "two"}, run_id="r")
        assert added.id == 3  # continues the parent's ids
        await forked.sidecar_tape("a").append("event", {"n": 1})
        assert len(await tape.entries()) == 2  # the parent does not see it yet
        assert await tape.sidecar_tape("a").entries() == []
        assert [e.id for e in await forked.entries()] == [1, 2, 3]
        assert [m["content"] for m in await forked.read_messages()] == ["one", "two"]
        # Concurrent parent writes during the run: the merge assigns the parent's ids.
        await tape.append_event("outside", {})
    entries = await tape.entries()
    assert [e.id for e in entries] == [1, 2, 3, 4]
    assert entries[3].payload == {"role": "assistant", "content": "two"}
    assert entries[3].meta == {"run_id": "r"}
    assert [e.payload for e in await tape.sidecar_tape("a").entries()] == [{"n": 1}]


async def test_fork_anchor_hides_earlier_entries_for_anchor_queries() -> None:
    tape = Tape(InMemoryTapeStore(), "main")
    await tape.ensure_bootstrap_anchor()
    await tape.append("message", {"role": "user", "content": "before"})
    await tape.handoff("mid")
    await tape.append("message", {"role": "user", "content": "parent tail"})
    async with tape.fork() as forked:
        # No anchor in the buffer: the parent's slice plus the buffer.
        await forked.append("message", {"role": "user", "content": "fork 1"})
        after = await forked.entries(forked.query().last_anchor().kinds("message"))
        assert [e.payload["content"] for e in after] == ["parent tail", "fork 1"]
        after_named = await forked.entries(forked.query().after_anchor(BOOTSTRAP_ANCHOR).limit(2))
        assert [e.payload.get("content") for e in after_named] == ["before", None]
        await forked.handoff("fork-phase")
        await forked.append("message", {"role": "user", "content": "fork 2"})
        tail = await forked.entries(forked.query().last_anchor())
        assert [e.kind for e in tail] == ["event", "message"]
        assert [m["content"] for m in await forked.read_messages()] == [
            "[handoff to fork-phase]",
            "fork 2",
        ]
        named = await forked.entries(forked.query().after_anchor("mid").kinds("message"))
        assert [e.payload["content"] for e in named] == ["parent tail", "fork 1", "fork 2"]
        between = await forked.entries(forked.query().between_anchors("mid", "fork-phase"))
        assert [e.payload.get("content") for e in between] == [None, "parent tail", "fork 1"]
        with pytest.raises(HooklineError) as caught:
            await forked.entries(forked.query().after_anchor("nowhere"))
        assert caught.value.kind is ErrorKind.not_found


async def test_reset_inside_a_fork_hides_the_parent_until_the_merge_resets_it() -> None:
    store = RecordingStore()
    tape = Tape(store, "main", sidecars=[Sidecar("a"), Sidecar("b")])
    await tape.append("message", {"role": "user", "content": "old"})
    await tape.sidecar_tape("a").append("event", {"old": True})
    await tape.sidecar_tape("b").append("event", {"old": True})
    async with tape.fork() as forked:
        await forked.reset(keep_sidecars=["b"])
        inside = await forked.entries()
        assert inside[0].id == 1 and inside[0].kind == "anchor"
        assert await forked.sidecar_tape("a").entries() == []
        assert len(await tape.entries()) == 1  # parent untouched so far
        assert await forked.store.list_tapes() == ["main"]
        store.log.clear()
    # Sidecars first (reset in the parent, then appended), then the main tape.
    assert store.log == [
        ("reset", "main__sidecar__a"),
        ("reset", "main"),
        *[("append", "main")] * 2,
    ]
    entries = await tape.entries()
    assert [e.kind for e in entries] == ["anchor", "event"]
    assert entries[0].payload["name"] == BOOTSTRAP_ANCHOR
    assert await tape.sidecar_tape("a").entries() == []
    assert len(await tape.sidecar_tape("b").entries()) == 1


async def test_merge_order_is_sidecars_then_main() -> None:
    store = RecordingStore()
    tape = Tape(store, "main", sidecars=[Sidecar("a"), Sidecar("b")])
    async with tape.fork() as forked:
        await forked.append("message", {"role": "user", "content": "m"})
        await forked.sidecar_tape("b").append("event", {})
        await forked.sidecar_tape("a").append("event", {})
        assert store.log == []
    assert store.log == [
        ("append", "main__sidecar__a"),
        ("append", "main__sidecar__b"),
        ("append", "main"),
    ]


async def test_merge_back_false_discards_everything() -> None:
    store = InMemoryTapeStore()
    tape = Tape(store, "main", sidecars=[Sidecar("a")])
    async with tape.fork(merge_back=should_merge_back("temp/x")) as forked:
        await forked.append("message", {"role": "user", "content": "gone"})
        await forked.sidecar_tape("a").append("event", {})
        await forked.reset()
    assert await tape.entries() == [] and await tape.sidecar_tape("a").entries() == []


async def test_fork_merges_on_error_and_reraises() -> None:
    tape = Tape(InMemoryTapeStore(), "main")
    with pytest.raises(RuntimeError, match="model exploded"):
        async with tape.fork() as forked:
            await forked.append("message", {"role": "user", "content": "question"})
            await forked.append("error", {"message": "model exploded"})
            raise RuntimeError("model exploded")
    assert kinds(await tape.entries()) == ["message", "error"]


async def test_fork_merges_when_cancelled() -> None:
    tape = Tape(InMemoryTapeStore(), "main", sidecars=[Sidecar("a")])
    with anyio.CancelScope() as scope:
        async with tape.fork() as forked:
            await forked.append("message", {"role": "user", "content": "question"})
            await forked.sidecar_tape("a").append("event", {})
            scope.cancel()
            await anyio.sleep(5)  # cancelled here
            await forked.append("message", {"role": "assistant", "content": "never"})
    assert scope.cancelled_caught
    # The merge ran shielded (every store call through the adapter is a checkpoint).
    assert [e.payload["content"] for e in await tape.entries()] == ["question"]
    assert len(await tape.sidecar_tape("a").entries()) == 1


async def test_failing_sidecar_merge_is_recorded_and_main_still_merges(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = RecordingStore()
    tape = Tape(store, "main", sidecars=[Sidecar("bad"), Sidecar("good")])
    async with tape.fork() as forked:
        await forked.append("message", {"role": "user", "content": "m"})
        await forked.sidecar_tape("bad").append("event", {})
        await forked.sidecar_tape("good").append("event", {})
        store.fail.add(("append", "main__sidecar__bad"))
        caplog.set_level(logging.WARNING, logger="hookline.builtins.tape.tape")
    entries = await tape.entries()
    assert kinds(entries) == ["message", "event"]
    merge = entries[1]
    assert merge.payload["name"] == "sidecar.merge" and merge.meta == {"context": False}
    assert merge.payload["data"]["sidecar"] == "bad" and merge.payload["data"]["status"] == "error"
    assert "append failed on main__sidecar__bad" in merge.payload["data"]["error"]
    assert len(await tape.sidecar_tape("good").entries()) == 1
    assert "tape.sidecar_merge_failed sidecar=bad" in caplog.text


async def test_main_merge_failure_after_an_error_keeps_the_original_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = RecordingStore()
    tape = Tape(store, "main")
    with pytest.raises(KeyError, match="original"):
        async with tape.fork() as forked:
            await forked.append("message", {"role": "user", "content": "m"})
            store.fail.add(("append", "main"))
            raise KeyError("original")
    assert "tape.fork_merge_failed" in caplog.text
    # After a clean exit the merge failure itself propagates.
    with pytest.raises(OSError, match="append failed on main"):
        async with tape.fork() as forked:
            await forked.append("message", {"role": "user", "content": "m"})


async def test_fork_redacts_media_and_passes_other_tapes_through() -> None:
    store = InMemoryTapeStore()
    tape = Tape(store, "main")
    content = [
        {"type": "text", "text": "look"},
        {"type": "image", "media_type": "image/png", "data": "aGk="},
        "plain",
        {"type": "audio", "media_type": "audio/wav", "url": "https://x/a.wav"},
    ]
    async with tape.fork() as forked:
        stored = await forked.append("message", {"role": "user", "content": content})
        assert stored.payload["content"] == [{"type": "text", "text": "look"}, "plain"]
        await forked.append("event", {"prompt": [{"type": "video", "media_type": "v"}], "x": 1})
        await forked.append("message", {"role": "user", "content": "text stays"})
        other = forked.scoped("other")
        await other.append("message", {"role": "user", "content": content})
        # Not buffered: already in the store.
        assert [e.payload["content"] for e in store.fetch_all(TapeQuery("other"))] == [
            [{"type": "text", "text": "look"}, "plain"]
        ]
    payloads = [e.payload for e in await tape.entries()]
    assert payloads == [
        {"role": "user", "content": [{"type": "text", "text": "look"}, "plain"]},
        {"prompt": [], "x": 1},
        {"role": "user", "content": "text stays"},
    ]
    assert content[1]["type"] == "image"  # the caller's payload is not modified
    # Outside a fork nothing is redacted.
    await tape.append("message", {"role": "user", "content": content})
    assert (await tape.entries())[-1].payload["content"] == content


async def test_fork_rejects_bad_payloads_at_append_and_is_closed_afterwards() -> None:
    tape = Tape(InMemoryTapeStore(), "main")
    async with tape.fork() as forked:
        with pytest.raises(HooklineError) as caught:
            await forked.append("event", {"bad": object()})
        assert caught.value.kind is ErrorKind.invalid_input
    with pytest.raises(HooklineError, match="closed"):
        await forked.append("event", {})
    with pytest.raises(HooklineError, match="closed"):
        await forked.entries()


async def test_concurrent_appends_in_a_fork_get_unique_ids() -> None:
    store = InMemoryTapeStore()
    tape = Tape(store, "main")
    await tape.append("event", {"seed": True})
    returned: list[int] = []
    async with tape.fork() as forked:

        async def add(n: int) -> None:
            returned.append((await forked.append("event", {"n": n})).id)

        async with anyio.create_task_group() as group:
            for n in range(20):
                group.start_soon(add, n)
        assert sorted(returned) == list(range(2, 22))
        assert [e.id for e in await forked.entries()] == list(range(1, 22))
    assert [e.id for e in await tape.entries()] == list(range(1, 22))


async def test_nested_forks_merge_outward() -> None:
    tape = Tape(InMemoryTapeStore(), "main", sidecars=[Sidecar("a")])
    async with tape.fork() as outer:
        await outer.append("message", {"role": "user", "content": "outer"})
        async with outer.fork() as inner:
            await inner.append("message", {"role": "user", "content": "inner"})
            await inner.sidecar_tape("a").append("event", {})
            assert [e.payload["content"] for e in await inner.entries()] == ["outer", "inner"]
        assert [e.payload["content"] for e in await outer.entries()] == ["outer", "inner"]
        assert await tape.entries() == []
    assert [e.payload["content"] for e in await tape.entries()] == ["outer", "inner"]
    assert len(await tape.sidecar_tape("a").entries()) == 1


async def test_fork_over_sqlite_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "home" / "tapes.db"
    with SQLiteTapeStore(path) as store:
        tape = Tape(store, session_tape_name("cli:1", tmp_path), sidecars=[Sidecar("spill")])
        await tape.ensure_bootstrap_anchor()
        async with tape.fork() as forked:
            await forked.append("message", {"role": "user", "content": "persist me"})
            await forked.sidecar_tape("spill").append("event", {"big": "x" * 1000})
    with SQLiteTapeStore(path) as store:
        tape = Tape(store, session_tape_name("cli:1", tmp_path), sidecars=[Sidecar("spill")])
        assert await tape.read_messages() == [{"role": "user", "content": "persist me"}]
        assert len(await tape.sidecar_tape("spill").entries()) == 1
        assert await tape.store.list_tapes() == [tape.name]
    assert os.path.exists(path)


# -- forks over a store with a run journal ---------------------------------------------------


async def test_a_fork_flushes_to_the_journal_and_commits_the_run_whole(tmp_path: Path) -> None:
    with SQLiteTapeStore(tmp_path / "tapes.db") as store:
        tape = Tape(store, "main", sidecars=[Sidecar("a")])
        async with tape.fork() as forked:
            assert await forked.ensure_bootstrap_anchor() is not None
            await forked.append("message", {"role": "user", "content": "question"})
            await forked.sidecar_tape("a").append("event", {"n": 1})
            await forked.flush()
            assert store.pending_runs() == 1
            assert await tape.entries() == [], "readers of the tape do not see the run yet"
            assert [e.payload.get("content") for e in await forked.entries()] == [
                None, "question"]
            await forked.append("message", {"role": "assistant", "content": "answer"})
            await forked.flush()
            await forked.flush()  # nothing new: no write
            await tape.append("event", {"outside": True})  # another writer meanwhile
        assert store.pending_runs() == 0
        entries = await tape.entries()
        # The other writer's entry came first (no anchor then), so the run's conditional
        # anchor was still written, right before the run, which is one block.
        assert kinds(entries) == ["event", "anchor", "message", "message"]
        assert [e.id for e in entries] == [1, 2, 3, 4]
        assert [e.payload for e in await tape.sidecar_tape("a").entries()] == [{"n": 1}]


async def test_forks_racing_on_a_new_tape_leave_one_bootstrap_anchor(any_store: object) -> None:
    tape = Tape(any_store, "main")  # type: ignore[arg-type]
    forks = [tape.fork() for _ in range(3)]
    opened = [await fork.__aenter__() for fork in forks]
    for n, forked in enumerate(opened):  # every fork saw a tape without an anchor
        assert await forked.ensure_bootstrap_anchor() is not None
        await forked.append("message", {"role": "user", "content": f"run {n}"})
    for fork in forks:
        await fork.__aexit__(None, None, None)
    entries = await tape.entries()
    assert kinds(entries) == ["anchor", "message", "message", "message"]
    assert await tape.ensure_bootstrap_anchor() is None


async def test_ensure_bootstrap_anchor_outside_a_fork_is_one_transaction(tmp_path: Path) -> None:
    with SQLiteTapeStore(tmp_path / "tapes.db") as store:
        tapes = [Tape(store, "main") for _ in range(8)]
        async with anyio.create_task_group() as group:
            for tape in tapes:
                group.start_soon(tape.ensure_bootstrap_anchor)
        assert kinds(await tapes[0].entries()) == ["anchor"]


async def test_temp_forks_never_journal(tmp_path: Path) -> None:
    with SQLiteTapeStore(tmp_path / "tapes.db") as store:
        tape = Tape(store, "main")
        async with tape.fork(merge_back=should_merge_back("temp/x")) as forked:
            await forked.append("message", {"role": "user", "content": "gone"})
            await forked.flush()
            assert store.pending_runs() == 0
        assert await tape.entries() == []


async def test_the_context_window_bounds_history_but_never_the_runs_own_entries(
    any_store: object,
) -> None:
    tape = Tape(any_store, "main", TapeContext(window=4))  # type: ignore[arg-type]
    await tape.ensure_bootstrap_anchor()
    for n in range(10):
        await tape.append("message", {"role": "user", "content": f"old {n}"})
    assert [m["content"] for m in await tape.read_messages()] == [f"old {n}" for n in range(6, 10)]
    async with tape.fork() as forked:
        for n in range(6):
            await forked.append("message", {"role": "user", "content": f"run {n}"})
        contents = [m["content"] for m in await forked.read_messages()]
        assert contents == [*(f"old {n}" for n in range(6, 10)), *(f"run {n}" for n in range(6))]
        # Queries through the fork keep their meaning: a tail is a tail of everything.
        assert [e.payload["content"] for e in await forked.entries(forked.query().tail(2))] == [
            "run 4", "run 5"]
    # Without the anchor rule's anchor, the window still applies to the whole tape.
    named = tape.with_context(TapeContext(anchor="missing", window=2))
    assert [m["content"] for m in await named.read_messages()] == ["run 4", "run 5"]


class FlakyStore:
    """An async memory store whose next appends fail on request."""

    def __init__(self) -> None:
        self.inner = as_async_store(InMemoryTapeStore())
        self.failures = 0

    async def list_tapes(self) -> list[str]:
        return await self.inner.list_tapes()

    async def reset(self, tape: str) -> None:
        await self.inner.reset(tape)

    async def fetch_all(self, query: TapeQuery) -> list[TapeEntry]:
        return list(await self.inner.fetch_all(query))

    async def append(self, tape: str, entry: TapeEntry) -> TapeEntry:
        if self.failures:
            self.failures -= 1
            raise OSError("disk full")
        return await self.inner.append(tape, entry)


@pytest.mark.anyio
async def test_a_failed_merge_keeps_what_was_not_written() -> None:
    """Merging used to empty the fork's buffer first: a failing append lost the rest."""
    store = FlakyStore()
    tape = Tape(store, "t")
    with pytest.raises(OSError, match="disk full"):
        async with tape.fork() as fork:
            for n in range(4):
                await fork.append("event", {"n": n})
            store.failures = 1
            forked_store = fork.store
    assert await tape.entries() == []
    await forked_store.merge("t")  # retry: everything buffered is still there
    assert [e.payload["n"] for e in await tape.entries()] == [0, 1, 2, 3]
