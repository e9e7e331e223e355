"""The session Tape: records, context, sidecars, reset, archive, forks and merging."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from republic import Message

from hookline.builtins.store import InMemoryTapeStore, SQLiteTapeStore, as_async_store
from hookline.builtins.store.asyncstore import AsyncStoreAdapter
from hookline.builtins.tape.tape import (
    BOOTSTRAP_ANCHOR,
    AnchorInfo,
    Tape,
    messages_from_entries,
    session_tape_name,
    should_merge_back,
)
from hookline.kernel.streaming import ErrorKind, HooklineError
from hookline.kernel.tape import TapeContext, TapeEntry, TapeQuery

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class Sidecar:
    name: str
    label: str = ""


class RecordingStore:
    """An async store over memory that logs operations and fails on request."""

    def __init__(self) -> None:
        self.inner = as_async_store(InMemoryTapeStore())
        self.log: list[tuple[str, str]] = []
        self.fail: set[tuple[str, str]] = set()

    def _check(self, op: str, tape: str) -> None:
        if (op, tape) in self.fail:
            raise OSError(f"{op} failed on {tape}")

    async def list_tapes(self) -> list[str]:
        return await self.inner.list_tapes()

    async def reset(self, tape: str) -> None:
        self._check("reset", tape)
        self.log.append(("reset", tape))
        await self.inner.reset(tape)

    async def fetch_all(self, query: TapeQuery) -> list[TapeEntry]:
        self._check("fetch", query.tape)
        return list(await self.inner.fetch_all(query))

    async def append(self, tape: str, entry: TapeEntry) -> TapeEntry:
        self._check("append", tape)
        self.log.append(("append", tape))
        return await self.inner.append(tape, entry)


@pytest.fixture(params=["memory", "sqlite"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    if request.param == "memory":
        yield InMemoryTapeStore()
    else:
        with SQLiteTapeStore(tmp_path / "tapes.db") as store:
            yield store


def kinds(entries: list[TapeEntry]) -> list[str]:
    return [entry.kind for entry in entries]


def events(entries: list[TapeEntry], name: str) -> list[TapeEntry]:
    return [e for e in entries if e.kind == "event" and e.payload["name"] == name]


# -- names and construction -----------------------------------------------------------------


async def test_session_tape_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    name = session_tape_name("cli:42", workspace)
    assert re.fullmatch(r"[0-9a-f]{16}__[0-9a-f]{16}", name)
    ws_hash = hashlib.md5(str(workspace.resolve()).encode()).hexdigest()[:16]
    assert name == f"{ws_hash}__{hashlib.md5(b'cli:42').hexdigest()[:16]}"
    monkeypatch.chdir(workspace)
    assert session_tape_name("cli:42", ".") == name  # resolved path
    assert session_tape_name("cli:43", workspace) != name
    assert name.count("__") == 1
    assert should_merge_back("cli:42") and not should_merge_back("temp/abc")


async def test_construction_and_views() -> None:
    store = InMemoryTapeStore()
    with pytest.raises(ValueError):
        Tape(store, "")
    with pytest.raises(TypeError):
        Tape(store, "t", sidecars=[object()])  # type: ignore[list-item]
    first, dup = Sidecar("spill", "first"), Sidecar("spill", "second")
    tape = Tape(store, "t", sidecars=[first, Sidecar("notes"), dup])
    assert isinstance(tape.store, AsyncStoreAdapter) and tape.store.store is store
    assert [s.name for s in tape.sidecars] == ["spill", "notes"]
    assert tape.get_sidecar("spill") is first and tape.get_sidecar("nope") is None
    assert tape.context == TapeContext()
    other = tape.scoped("u")
    assert (other.name, other.store, other.sidecars) == ("u", tape.store, tape.sidecars)
    context = TapeContext(anchor=None)
    assert tape.with_context(context).context is context
    assert tape.session_tape("s", ".").name == session_tape_name("s", ".")
    query = tape.query()
    assert query.tape == "t" and query.store is tape.store


async def test_append_entries_and_bound_queries(any_store: object) -> None:
    tape = Tape(any_store, "main")  # type: ignore[arg-type]
    first = await tape.append("message", {"role": "user", "content": "hi"}, run_id="r1")
    second = await tape.append_event("run", {"status": "ok"}, run_id="r1")
    assert (first.id, second.id) == (1, 2)
    assert first.meta == {"run_id": "r1"}
    assert second.payload == {"name": "run", "data": {"status": "ok"}}
    assert await tape.entries() == [first, second]
    assert await tape.query().kinds("event").all() == [second]
    assert await tape.entries(tape.query().query("HI")) == [first]
    with pytest.raises(ValueError):
        await tape.entries(TapeQuery("other"))
    with pytest.raises(HooklineError):
        await tape.append_event("", {})


async def test_handoff_and_bootstrap_anchor() -> None:
    tape = Tape(InMemoryTapeStore(), "main")
    boot = await tape.ensure_bootstrap_anchor()
    assert boot is not None
    assert boot.payload == {"name": BOOTSTRAP_ANCHOR, "state": {"owner": "human"}}
    assert await tape.ensure_bootstrap_anchor() is None
    anchor = await tape.handoff("phase/2", {"summary": "did X"}, run_id="r")
    entries = await tape.entries()
    assert kinds(entries) == ["anchor", "anchor", "event"]
    assert anchor == entries[1] and anchor.payload == {
        "name": "phase/2",
        "state": {"summary": "did X"},
    }
    assert entries[2].payload == {
        "name": "handoff",
        "data": {"name": "phase/2", "state": {"summary": "did X"}},
    }
    assert entries[2].meta == {"run_id": "r"}
    with pytest.raises(HooklineError) as caught:
        await tape.handoff(" ")
    assert caught.value.kind is ErrorKind.invalid_input


async def test_info_anchors_and_search() -> None:
    tape = Tape(InMemoryTapeStore(), "main")
    empty = await tape.info()
    assert (empty.entries, empty.anchors, empty.last_anchor, empty.entries_since_last_anchor) == (
        0,
        0,
        None,
        0,
    )
    assert empty.last_token_usage is None and empty.cache_hit_rate is None
    await tape.ensure_bootstrap_anchor()
    await tape.append("message", {"role": "user", "content": "Find the needle"})
    usage = {"input_tokens": 200, "output_tokens": 10, "cached_tokens": 50}
    await tape.append_event("run", {"status": "ok", "usage": usage})
    await tape.append_event("run", {"status": "ok"})  # no usage: the older one still counts
    await tape.handoff("phase/2")
    await tape.append("message", {"role": "assistant", "content": "needle found"})
    info = await tape.info()
    assert info.name == "main"
    assert (info.entries, info.anchors, info.last_anchor, info.entries_since_last_anchor) == (
        7,
        2,
        "phase/2",
        2,
    )
    assert info.last_token_usage == usage and info.cache_hit_rate == 0.25
    assert info.as_dict()["last_anchor"] == "phase/2"

    anchors = await tape.anchors()
    assert [a.name for a in anchors] == [BOOTSTRAP_ANCHOR, "phase/2"]
    assert isinstance(anchors[0], AnchorInfo) and anchors[0].state == {"owner": "human"}
    assert [a.name for a in await tape.anchors(limit=1)] == ["phase/2"]
    assert await tape.anchors(limit=0) == []

    found = await tape.search("NEEDLE")
    assert [e.id for e in found] == [2, 7]
    assert [e.id for e in await tape.search("needle", limit=1)] == [7]  # most recent
    for bad in [("", 5), ("x", 0), ("x", True), ("x", "3")]:
        with pytest.raises(HooklineError) as caught:
            await tape.search(*bad)  # type: ignore[arg-type]
        assert caught.value.kind is ErrorKind.invalid_input


async def test_info_accepts_prompt_tokens() -> None:
    tape = Tape(InMemoryTapeStore(), "main")
    await tape.append_event("run", {"usage": {"prompt_tokens": 10, "cached_tokens": 0}})
    assert (await tape.info()).cache_hit_rate == 0.0


# -- model context ------------------------------------------------------------------------


async def build_conversation(tape: Tape) -> None:
    await tape.ensure_bootstrap_anchor()
    await tape.append("message", {"role": "user", "content": "old question"})
    await tape.handoff("phase/2", {"summary": "User wants a poem."})
    await tape.append("message", {"role": "user", "content": "write it"})
    await tape.append(
        "tool_call",
        {
            "content": "Let me check.",
            "calls": [
                {"id": "c1", "name": "fs.read", "arguments": '{"path": "a"}'},
                {"id": "c2", "name": "fs.read", "arguments": {"path": "b"}},
            ],
        },
    )
    await tape.append_event("tool.started", {"id": "c1"})
    await tape.append("message", {"role": "user", "content": "steer"}, context=False)
    await tape.append(
        "tool_result",
        {
            "results": [
                {"call_id": "c1", "name": "fs.read", "output": "roses", "is_error": False},
                {"call_id": "c9", "name": "ghost", "output": "orphan", "is_error": False},
            ]
        },
    )
    await tape.append("tool_call", {"calls": [{"id": "c3", "name": "shell", "arguments": "{}"}]})
    await tape.append(
        "tool_result",
        {"results": [{"call_id": "c3", "name": "shell", "output": {"code": 1}, "is_error": True}]},
    )
    await tape.append("message", {"role": "assistant", "content": "Roses are red."})
    await tape.append("error", {"message": "not context"})


async def test_read_messages_default_conversion() -> None:
    tape = Tape(InMemoryTapeStore(), "main")
    await build_conversation(tape)
    messages = await tape.read_messages()
    assert messages == [
        {"role": "assistant", "content": "[handoff to phase/2] User wants a poem."},
        {"role": "user", "content": "write it"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [{"id": "c1", "name": "fs.read", "arguments": '{"path": "a"}'}],
        },
        {
            "role": "tool",
            "content": "roses",
            "tool_call": {"id": "c1", "name": "fs.read", "arguments": '{"path": "a"}'},
        },
        {"role": "assistant", "tool_calls": [{"id": "c3", "name": "shell", "arguments": "{}"}]},
        {
            "role": "tool",
            "content": '{"code": 1}',
            "tool_call": {"id": "c3", "name": "shell", "arguments": "{}"},
            "is_error": True,
        },
        {"role": "assistant", "content": "Roses are red."},
    ]
    # Every message is in republic's Message.to_dict form.
    parsed = [Message.from_dict(message) for message in messages]
    assert parsed[3].role == "tool" and parsed[3].tool_call is not None
    assert parsed[5].is_error


async def test_read_messages_whole_tape_and_named_anchor_contexts() -> None:
    store = InMemoryTapeStore()
    tape = Tape(store, "main")
    await build_conversation(tape)
    whole = await tape.with_context(TapeContext(anchor=None)).read_messages()
    assert whole[:4] == [
        {"role": "assistant", "content": "[anchor session/start]"},
        {"role": "user", "content": "old question"},
        {"role": "assistant", "content": "[anchor phase/2] User wants a poem."},
        {"role": "assistant", "content": "[handoff to phase/2] User wants a poem."},
    ]
    named = await tape.with_context(TapeContext(anchor=BOOTSTRAP_ANCHOR)).read_messages()
    assert named[0] == {"role": "user", "content": "old question"}
    # An anchor that does not exist (yet) means the whole tape.
    missing = await tape.with_context(TapeContext(anchor="later")).read_messages()
    assert missing == whole


async def test_read_messages_without_any_anchor_uses_the_whole_tape() -> None:
    tape = Tape(InMemoryTapeStore(), "main")
    await tape.append("message", {"role": "user", "content": "hi"})
    await tape.append("message", {"content": "no role: skipped"})
    assert await tape.read_messages() == [{"role": "user", "content": "hi"}]


async def test_read_messages_with_select() -> None:
    seen: list[tuple[list[int], TapeContext]] = []

    def pick(entries: list[TapeEntry], context: TapeContext) -> list[str]:
        seen.append(([e.id for e in entries], context))
        return [e.kind for e in entries]

    async def pick_async(entries: list[TapeEntry], context: TapeContext) -> tuple[str, ...]:
        return tuple(str(e.id) for e in entries)

    tape = Tape(InMemoryTapeStore(), "main", context=TapeContext(select=pick, state={"k": 1}))
    await tape.ensure_bootstrap_anchor()
    await tape.append("message", {"role": "user", "content": "a"})
    await tape.append_event("x", {}, context=False)
    await tape.append("system", {"content": "s"})
    assert await tape.read_messages() == ["message", "system"]
    assert seen[0][0] == [2, 4] and seen[0][1] is tape.context
    async_tape = tape.with_context(TapeContext(select=pick_async))
    assert await async_tape.read_messages() == ["2", "4"]


async def test_unanswered_calls_and_results_are_dropped() -> None:
    entries = [
        TapeEntry(1, "tool_result", {"results": [{"call_id": "early", "output": "x"}]}),
        TapeEntry(2, "tool_call", {"calls": [{"id": "early", "name": "a", "arguments": "{}"}]}),
        TapeEntry(3, "tool_call", {"calls": [{"id": "lonely", "name": "b", "arguments": "{}"}]}),
        TapeEntry(4, "message", {"role": "user", "content": "next"}),
    ]
    # A result answers only a call before it: one that comes first answers nothing, even
    # when a later call has its id (ids repeat, so it cannot be that call's). Both go, as
    # does the lonely call.
    assert messages_from_entries(entries) == [{"role": "user", "content": "next"}]
    entries.append(TapeEntry(5, "tool_result", {"results": [{"call_id": "early", "output": "y"}]}))
    assert messages_from_entries(entries) == [
        {"role": "assistant", "tool_calls": [{"id": "early", "name": "a", "arguments": "{}"}]},
        {
            "role": "tool",
            "content": "y",
            "tool_call": {"id": "early", "name": "a", "arguments": "{}"},
        },
        {"role": "user", "content": "next"},
    ]


# -- sidecars, reset, archive ---------------------------------------------------------------


async def test_sidecar_tapes() -> None:
    store = InMemoryTapeStore()
    tape = Tape(store, "ws__sess", sidecars=[Sidecar("spill")])
    assert tape.sidecar_tape_name("spill") == "ws__sess__sidecar__spill"
    with pytest.raises(KeyError):
        tape.sidecar_tape_name("nope")
    with pytest.raises(KeyError):
        tape.sidecar_tape("nope")
    spill = tape.sidecar_tape("spill")
    assert spill.name == "ws__sess__sidecar__spill" and spill.sidecars == ()
    assert spill.context.anchor is None
    await spill.append("event", {"blob": 1})
    await tape.append("message", {"role": "user", "content": "x"})
    assert await tape.store.list_tapes() == ["ws__sess"]
    assert [e.payload for e in await spill.entries()] == [{"blob": 1}]


async def test_reset_resets_sidecars_not_kept_and_records_events() -> None:
    store = InMemoryTapeStore()
    tape = Tape(store, "main", sidecars=[Sidecar("a"), Sidecar("b")])
    await tape.append("message", {"role": "user", "content": "old"})
    for name in ("a", "b"):
        await tape.sidecar_tape(name).append("event", {"n": 1})
    anchor = await tape.reset({"reason": "new topic"}, keep_sidecars=["b", "unknown"])
    assert anchor.payload == {
        "name": BOOTSTRAP_ANCHOR,
        "state": {"owner": "human", "reason": "new topic"},
    }
    entries = await tape.entries()
    assert entries[0] == anchor and anchor.id == 1
    resets = events(entries, "sidecar.reset")
    assert [e.payload["data"] for e in resets] == [
        {"sidecar": "a", "reason": "tape.reset", "status": "ok"}
    ]
    assert resets[0].meta == {"context": False}
    assert await tape.sidecar_tape("a").entries() == []
    assert len(await tape.sidecar_tape("b").entries()) == 1
    assert await tape.read_messages() == []  # the events are not context


async def test_reset_records_sidecar_failures() -> None:
    store = RecordingStore()
    tape = Tape(store, "main", sidecars=[Sidecar("bad"), Sidecar("good")])
    store.fail.add(("reset", "main__sidecar__bad"))
    await tape.reset()
    data = [e.payload["data"] for e in events(await tape.entries(), "sidecar.reset")]
    assert data[0]["sidecar"] == "bad" and data[0]["status"] == "error"
    assert "reset failed on main__sidecar__bad" in data[0]["error"]
    assert data[1] == {"sidecar": "good", "reason": "tape.reset", "status": "ok"}


async def test_reset_sidecar() -> None:
    store = RecordingStore()
    tape = Tape(store, "main", sidecars=[Sidecar("a")])
    await tape.sidecar_tape("a").append("event", {})
    assert await tape.reset_sidecar("a") == "ok"
    assert await tape.sidecar_tape("a").entries() == []
    store.fail.add(("reset", "main__sidecar__a"))
    assert await tape.reset_sidecar("a", reason="size") == (
        "a reset failed: reset failed on main__sidecar__a"
    )
    data = [e.payload["data"] for e in events(await tape.entries(), "sidecar.reset")]
    assert [(d["reason"], d["status"]) for d in data] == [("gc", "ok"), ("size", "error")]
    with pytest.raises(KeyError):
        await tape.reset_sidecar("zzz")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def test_archive_writes_backups_then_resets(tmp_path: Path) -> None:
    tape = Tape(InMemoryTapeStore(), "main", sidecars=[Sidecar("a")])
    await tape.append("message", {"role": "user", "content": "keep me ✓"})
    await tape.sidecar_tape("a").append("event", {"n": 1})
    before = await tape.entries()
    path = await tape.archive(tmp_path / "archive", state={"by": "test"})
    assert re.fullmatch(r"main\.jsonl\.\d{8}T\d{12}Z\.bak", path.name)
    assert read_jsonl(path) == [
        {"id": e.id, "kind": e.kind, "payload": e.payload, "meta": e.meta, "date": e.date}
        for e in before
    ]
    sidecar_files = sorted((tmp_path / "archive").glob("main__sidecar__a.jsonl.*.bak"))
    assert len(sidecar_files) == 1 and read_jsonl(sidecar_files[0])[0]["payload"] == {"n": 1}
    assert not list((tmp_path / "archive").glob(".*.tmp")), "no temporary file is left"

    entries = await tape.entries()
    assert entries[0].payload["state"] == {"owner": "human", "archive": str(path), "by": "test"}
    assert [e.payload["data"] for e in events(entries, "sidecar.archive")] == [
        {"sidecar": "a", "status": "ok", "path": str(sidecar_files[0])}
    ]
    assert [e.payload["data"]["status"] for e in events(entries, "sidecar.reset")] == ["ok"]
    assert await tape.sidecar_tape("a").entries() == []


async def test_archive_keeps_a_sidecar_whose_archive_failed(tmp_path: Path) -> None:
    store = RecordingStore()
    tape = Tape(store, "main", sidecars=[Sidecar("bad"), Sidecar("good")])
    for name in ("bad", "good"):
        await tape.sidecar_tape(name).append("event", {"n": name})
    store.fail.add(("fetch", "main__sidecar__bad"))
    await tape.archive(tmp_path)
    entries = await tape.entries()
    archived = [e.payload["data"] for e in events(entries, "sidecar.archive")]
    assert [(d["sidecar"], d["status"]) for d in archived] == [("bad", "error"), ("good", "ok")]
    assert "fetch failed" in archived[0]["error"]
    resets = [e.payload["data"] for e in events(entries, "sidecar.reset")]
    assert {"sidecar": "bad", "status": "skipped", "cause": "archive_failed"} in resets
    assert {"sidecar": "good", "reason": "tape.reset", "status": "ok"} in resets
    assert all(e.meta == {"context": False} for e in entries if e.kind == "event")
    store.fail.clear()
    assert len(await tape.sidecar_tape("bad").entries()) == 1  # kept
    assert await tape.sidecar_tape("good").entries() == []


async def test_archive_of_the_main_tape_failing_resets_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    tape = Tape(InMemoryTapeStore(), "main", sidecars=[Sidecar("a")])
    await tape.append("message", {"role": "user", "content": "precious"})
    with pytest.raises(OSError):
        await tape.archive(blocker / "sub")
    assert len(await tape.entries()) == 1


async def test_removing_a_sidecar_provider_keeps_its_data() -> None:
    store = InMemoryTapeStore()
    mounted = Tape(store, "main", sidecars=[Sidecar("spill")])
    await mounted.sidecar_tape("spill").append("event", {"kept": True})
    unmounted = Tape(store, "main")
    assert unmounted.get_sidecar("spill") is None
    with pytest.raises(KeyError):
        unmounted.sidecar_tape_name("spill")
    await unmounted.reset()
    async with unmounted.fork() as forked:
        await forked.append("message", {"role": "user", "content": "x"})
    assert [e.payload for e in store.fetch_all(TapeQuery("main__sidecar__spill"))] == [
        {"kept": True}
    ]


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
