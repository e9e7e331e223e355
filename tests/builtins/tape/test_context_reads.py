"""A run's context read converts each entry once, and gives what a full conversion gives.

`ContextMessages` keeps the messages of the entries it converted and, on the next read,
converts only what was added; a fork's `read_messages` uses it. Each test here compares it
with a conversion from scratch (`messages_from_entries` on the same selection), step after
step, on real stores, including what changes earlier messages: a result that answers a call
recorded before it, an anchor written in the run, entries hidden from the context, a
selection that no longer starts with what was read before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookline.builtins.store import InMemoryTapeStore, SQLiteTapeStore
from hookline.builtins.tape.context import ContextMessages, messages_from_entries
from hookline.builtins.tape.tape import Tape
from hookline.kernel.messages import as_model_messages
from hookline.kernel.tape import TapeContext, TapeEntry

pytestmark = pytest.mark.anyio

IDS = st.sampled_from(["call_1", "call_1", "", "call_2"])


@st.composite
def entry_lists(draw: st.DrawFn) -> list[TapeEntry]:
    """Messages, calls, results answering any call id (earlier or not), anchors, hidden
    entries and other events, in any order."""
    entries: list[TapeEntry] = []
    for _ in range(draw(st.integers(0, 30))):
        kind = draw(st.sampled_from(["message", "tool_call", "tool_result", "anchor", "event"]))
        payload: dict[str, Any]
        if kind == "message":
            text = f"m{len(entries)}"
            payload = {"role": draw(st.sampled_from(["user", "assistant"])),
                       "content": draw(st.sampled_from([text, [{"type": "text", "text": text}]]))}
        elif kind == "tool_call":
            calls = [{"id": call_id, "name": "bash", "arguments": json.dumps({"n": len(entries)})}
                     for call_id in draw(st.lists(IDS, min_size=1, max_size=3))]
            if draw(st.integers(0, 9)) == 0:  # a provider's details: never shared
                calls[0]["metadata"] = {"signature": "s"}
            payload = {"calls": calls, "content": draw(st.sampled_from(["", "Running."]))}
        elif kind == "tool_result":
            payload = {"results": [{"call_id": call_id, "name": "bash",
                                    "output": f"out {len(entries)}", "is_error": False}
                                   for call_id in draw(st.lists(IDS, min_size=1, max_size=3))]}
        elif kind == "anchor":
            payload = {"name": "phase", "state": {"summary": f"s{len(entries)}"}}
        else:
            name = draw(st.sampled_from(["handoff", "run"]))
            payload = {"name": name, "data": {"name": "phase", "state": {"owner": "agent"}}}
        meta = {"context": False} if draw(st.integers(0, 5)) == 0 else {}
        entries.append(TapeEntry(len(entries) + 1, kind, payload, meta))
    return entries


def visible(entries: list[TapeEntry]) -> list[TapeEntry]:
    return [entry for entry in entries if entry.meta.get("context") is not False]


@settings(max_examples=300, deadline=None)
@given(entry_lists(), st.lists(st.integers(0, 30), max_size=8), st.integers(0, 3))
def test_growing_reads_match_a_conversion_from_scratch(
    entries: list[TapeEntry], cuts: list[int], dropped: int
) -> None:
    cache = ContextMessages(hide_excluded=True)
    for cut in sorted(cuts):
        assert cache.messages(entries[:cut]) == messages_from_entries(visible(entries[:cut]))
    # Equal entries read afresh (a parent store's copies) continue the same selection.
    copies = [replace(entry, payload=json.loads(json.dumps(entry.payload))) for entry in entries]
    assert cache.messages(copies) == messages_from_entries(visible(entries))
    # A selection that no longer starts the same way (a window that slid) is converted anew.
    assert cache.messages(entries[dropped:]) == messages_from_entries(visible(entries[dropped:]))
    shifted = entries[dropped + 1:] + entries[:dropped + 1]  # as long, other entries first
    assert cache.messages(shifted) == messages_from_entries(visible(shifted))
    assert cache.messages(entries[:1]) == messages_from_entries(visible(entries[:1]))


@settings(max_examples=300, deadline=None)
@given(entry_lists(), st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), max_size=12),
       st.booleans(), st.lists(st.booleans(), min_size=12, max_size=12))
def test_a_sliding_window_matches_a_conversion_from_scratch(
    entries: list[TapeEntry], moves: list[tuple[int, int]], afresh: bool, as_models: list[bool]
) -> None:
    """Turn after turn, the window gains entries at its end and loses the oldest at its
    start, as a session's context read does once the window is full."""
    cache = ContextMessages(hide_excluded=True)
    start = end = 0
    for dropped, added in moves:
        end = min(len(entries), end + added)
        start = min(end, start + dropped)
        window = entries[start:end]
        if afresh:  # the older entries as a store hands them out again, the rest equal
            window = window[:1] + [replace(entry, payload=json.loads(json.dumps(entry.payload)))
                                   for entry in window[1:]]
        expected = messages_from_entries(visible(window))
        if as_models.pop():  # the agent loop's read, its messages kept between reads
            assert cache.model_messages(window) == as_model_messages(expected)
        else:
            assert cache.messages(window) == expected


def test_kept_model_messages_refuse_changes_and_copy_into_plain_ones() -> None:
    import copy

    entries = [TapeEntry(1, "tool_call", {"calls": [{"id": "a", "name": "bash",
                                                     "arguments": "{}"}]}),
               TapeEntry(2, "tool_result", {"results": [{"call_id": "a", "output": "ok"}]})]
    cache = ContextMessages()
    call, result = cache.model_messages(entries)
    with pytest.raises(TypeError, match="shared by the context reads"):
        call.tool_calls.append(call.tool_calls[0])
    with pytest.raises(TypeError, match="shared by the context reads"):
        call.tool_calls[0] = call.tool_calls[0]
    changed = replace(call, tool_calls=[*call.tool_calls, call.tool_calls[0]])
    changed.tool_calls.pop()  # a copy is a plain list
    duplicate = copy.deepcopy(call)
    duplicate.tool_calls.clear()
    assert cache.model_messages(entries) == [call, result]
    assert cache.model_messages(entries)[0] is call  # the same object, read again
    assert len(call.tool_calls) == 1


def test_each_read_returns_copies_unless_shared() -> None:
    text = {"type": "text", "text": "hi"}
    entries = [TapeEntry(1, "message", {"role": "user", "content": [text]}),
               TapeEntry(2, "tool_call", {"calls": [{"id": "a", "name": "bash", "arguments": ""}]}),
               TapeEntry(3, "tool_result", {"results": [{"call_id": "a", "output": "ok"}]})]
    cache = ContextMessages()
    first = cache.messages(entries)
    first[0]["content"][0]["text"] = "changed"
    first[1]["tool_calls"].clear()
    first[2].clear()
    again = cache.messages(entries)
    assert again == messages_from_entries(entries)
    assert again[0]["content"][0]["text"] == "hi"
    assert text == {"type": "text", "text": "hi"}
    assert cache.messages(entries, shared=True) == again


def from_scratch(entries: list[TapeEntry], context: TapeContext) -> list[dict[str, Any]]:
    return messages_from_entries(entries)


async def test_a_runs_reads_match_a_full_conversion_step_after_step(any_store: object) -> None:
    """Cached (`read_messages`) against uncached (the same selection through `select`)."""
    tape = Tape(any_store, "main", TapeContext(window=6))  # type: ignore[arg-type]
    await tape.ensure_bootstrap_anchor()
    for n in range(8):
        await tape.append("message", {"role": "user", "content": f"old {n}"})
    # A call of an earlier run, answered only in this one.
    await tape.append("tool_call", {"calls": [{"id": "late", "name": "bash", "arguments": "{}"}]})
    async with tape.fork() as run:
        reference = run.with_context(replace(run.context, select=from_scratch))
        reads: list[list[dict[str, Any]]] = []

        async def check() -> None:
            cached = await run.read_messages()
            assert cached == await reference.read_messages()
            assert await run.read_messages(shared=True) == cached
            reads.append(cached)

        await check()
        await run.append("message", {"role": "user", "content": "run 0"})
        await check()
        await run.append("tool_call", {"calls": [
            {"id": "c", "name": "bash", "arguments": "{}"},
            {"id": "c", "name": "bash", "arguments": "{\"second\": true}"}]})
        await check()  # no result yet: the calls are not context
        await run.append("tool_result", {"results": [{"call_id": "c", "output": "first"}]})
        await check()
        await run.append_event("run", {"status": "ok"}, context=False)
        # Another writer of the session tape: its window slides, the parent's part changes.
        await tape.append("message", {"role": "user", "content": "from elsewhere"})
        await check()
        await run.append("tool_result", {"results": [{"call_id": "late", "output": "at last"},
                                                     {"call_id": "c", "output": "second"}]})
        await check()
        await run.handoff("phase 2", {"summary": "done with phase 1"})
        await check()  # the anchor in the run hides what came before it
        await run.append("message", {"role": "assistant", "content": "after the anchor"})
        await check()
        await run.flush()
        await check()
    assert reads[1][-1] == {"role": "user", "content": "run 0"}
    tool_messages = [m for m in reads[5] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["at last", "first", "second"]
    assert [m["content"] for m in reads[-1]] == [
        "[handoff to phase 2] done with phase 1", "after the anchor"]
    # Merged, the tape gives the same context to the next run as the last read did.
    assert await tape.read_messages() == reads[-1]


async def test_a_runs_reads_follow_a_reset_in_the_run(any_store: object) -> None:
    tape = Tape(any_store, "main", TapeContext(window=None))  # type: ignore[arg-type]
    await tape.append("message", {"role": "user", "content": "before"})
    async with tape.fork() as run:
        await run.append("message", {"role": "user", "content": "in the run"})
        assert [m["content"] for m in await run.read_messages()] == ["before", "in the run"]
        await run.reset()
        await run.append("message", {"role": "user", "content": "after the reset"})
        # The reset's new anchor starts the context: what came before it is gone.
        assert [m["content"] for m in await run.read_messages()] == ["after the reset"]


async def test_entries_read_through_a_fork_are_copies(any_store: object) -> None:
    tape = Tape(any_store, "main")  # type: ignore[arg-type]
    await tape.append("message", {"role": "user", "content": [{"type": "text", "text": "old"}]})
    async with tape.fork() as run:
        await run.append("message", {"role": "user", "content": [{"type": "text", "text": "new"}]})
        for entry in await run.entries():
            entry.payload["content"][0]["text"] = "changed"
            entry.meta["context"] = False
        texts = [entry.payload["content"][0]["text"] for entry in await run.entries()]
        assert texts == ["old", "new"]
        messages = await run.read_messages()
        messages[1]["content"][0]["text"] = "changed"
        assert [m["content"][0]["text"] for m in await run.read_messages()] == ["old", "new"]
    assert [e.payload["content"][0]["text"] for e in await tape.entries()] == ["old", "new"]


async def test_a_sessions_kept_context_outlives_its_run_and_those_kept_stay_bounded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hookline.builtins.tape import kept as kept_module

    monkeypatch.setattr(kept_module, "KEPT_ENTRIES", 25)
    with SQLiteTapeStore(tmp_path / "tapes.db") as store:
        converters = []
        for name in ("a", "a", "b", "c", "d"):  # no window: each reads its whole tape
            tape = Tape(store, name, TapeContext(anchor=None))
            for n in range(10):
                await tape.append("message", {"role": "user", "content": f"{name} {n}"})
            async with tape.fork() as run:
                assert len(await run.read_messages()) == len(await tape.entries())
                converters.append(run._store.kept_context(name).messages)  # type: ignore[attr-defined]
        assert converters[1] is converters[0]  # the second run of "a" went on from the first
        assert len(converters[1]) == 20
        kept = kept_module._kept[store]
        assert list(kept) == ["b", "c", "d"]  # "a" (20) went when "c" came: 30 > 25
        assert sum(map(len, kept.values())) <= 25 + 10  # the newest is counted next time


def counting(base: type) -> type:
    """`base` counting the whole reads made of it (`reads`) and the reads from one id on
    that a kept context makes (`since`)."""

    class Counting(base):  # type: ignore[misc, valid-type]
        reads = 0
        since = 0

        def fetch_all(self, query: Any) -> Any:
            type(self).reads += 1
            return super().fetch_all(query)

        async def fetch_since_async(self, tape: str, entry_id: int) -> Any:
            type(self).since += 1
            return await super().fetch_since_async(tape, entry_id)

    return Counting


@pytest.fixture(params=["memory", "sqlite"])
def counted(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield counting(InMemoryTapeStore)()
    else:
        with counting(SQLiteTapeStore)(tmp_path / "tapes.db") as sqlite_store:
            yield sqlite_store


async def test_a_run_on_an_anchored_tape_reads_the_store_whole_once_before_its_first_step(
        counted: Any) -> None:
    """The anchor check is the context read, kept: the first step reads only the row it
    ends with; the first append learns the tape's last id from it."""
    tape = Tape(counted, "main", TapeContext(window=3))
    await tape.ensure_bootstrap_anchor()
    for n in range(4):
        await tape.append("message", {"role": "user", "content": f"old {n}"})
    type(counted).reads = type(counted).since = 0
    async with tape.fork() as run:
        assert await run.ensure_bootstrap_anchor() is None
        messages = await run.read_model_messages()
        added = await run.append("message", {"role": "user", "content": "new"})
        assert (type(counted).reads, type(counted).since) == (1, 1)
        assert [m.text for m in messages] == ["old 1", "old 2", "old 3"]
        assert added.id == 6  # the anchor, four messages, then this
    assert [(e.id, e.payload.get("content")) for e in await tape.entries()][-2:] == [
        (5, "old 3"), (6, "new")]


async def test_a_write_before_the_first_step_is_read_from_the_run(counted: Any) -> None:
    tape = Tape(counted, "main", TapeContext(window=None))
    await tape.ensure_bootstrap_anchor()
    await tape.append("message", {"role": "user", "content": "old"})
    async with tape.fork() as run:
        assert await run.ensure_bootstrap_anchor() is None
        await run.append("message", {"role": "user", "content": "from a plugin"})
        type(counted).reads = type(counted).since = 0
        assert [m.text for m in await run.read_model_messages()] == ["old", "from a plugin"]
        assert (type(counted).reads, type(counted).since) == (0, 1)


async def test_a_run_on_a_tape_without_an_anchor_buffers_one_and_reads_it(
        counted: Any) -> None:
    tape = Tape(counted, "main", TapeContext(window=None))
    await tape.append("message", {"role": "user", "content": "before any anchor"})
    async with tape.fork() as run:
        anchor = await run.ensure_bootstrap_anchor()
        assert anchor is not None and anchor.id == 2
        assert [m.text for m in await run.read_model_messages()] == []  # after the anchor
    kinds = [(e.id, e.kind) for e in await tape.entries()]
    assert kinds == [(1, "message"), (2, "anchor")]
