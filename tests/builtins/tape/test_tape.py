"""The session Tape: names, records, anchors and the model context it reads (sidecars, reset
and archive are in test_tape_sidecars.py, forks and merging in test_tape_forks.py)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from republic import Message
from tape_support import Sidecar, kinds

from hookline.builtins.store import InMemoryTapeStore
from hookline.builtins.store.asyncstore import AsyncStoreAdapter
from hookline.builtins.tape.context import messages_from_entries
from hookline.builtins.tape.naming import session_tape_name, should_merge_back
from hookline.builtins.tape.summary import AnchorInfo
from hookline.builtins.tape.tape import BOOTSTRAP_ANCHOR, Tape
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import TapeContext, TapeEntry, TapeQuery

pytestmark = pytest.mark.anyio


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
