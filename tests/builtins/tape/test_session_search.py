"""Searching, titling and the last turns of sessions on the store protocol alone
(`hookline.builtins.tape.sessions`): one tape at a time, only matches read back, and the same
answers from a reference-style store that assigns no ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hookline.builtins.store.memory import InMemoryTapeStore
from hookline.builtins.tape.context import messages_from_entries
from hookline.builtins.tape.naming import session_tape_name
from hookline.builtins.tape.sessions import (
    TITLE_EVENT,
    last_turns,
    list_sessions,
    rename_session,
    search_sessions,
)
from hookline.builtins.tape.tape import BOOTSTRAP_ANCHOR
from hookline.kernel.tape import TapeEntry, TapeQuery, apply_query

pytestmark = pytest.mark.anyio


class Recording(InMemoryTapeStore):
    """The memory store, noting every query and how many entries each one returned."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[TapeQuery, int]] = []

    def fetch_all(self, query: TapeQuery) -> list[TapeEntry]:
        found = super().fetch_all(query)
        self.reads.append((query, len(found)))
        return found


class Reference:
    """A store as the reference protocol allows one: append returns None, ids stay 0."""

    def __init__(self) -> None:
        self.tapes: dict[str, list[TapeEntry]] = {}

    def list_tapes(self) -> list[str]:
        return sorted(name for name, entries in self.tapes.items() if entries)

    def reset(self, tape: str) -> None:
        self.tapes.pop(tape, None)

    def fetch_all(self, query: TapeQuery) -> list[TapeEntry]:
        return apply_query(self.tapes.get(query.tape, []), query)

    def append(self, tape: str, entry: TapeEntry) -> None:
        self.tapes.setdefault(tape, []).append(entry)


def session(store: Any, workspace: Path, session_id: str, *said: str) -> str:
    """A tape like a run writes it: the start anchor, then per message a user message,
    the assistant's reply and the run's event."""
    tape = session_tape_name(session_id, workspace)
    store.append(tape, TapeEntry.new("anchor", {"name": BOOTSTRAP_ANCHOR}, session={
        "id": session_id, "workspace": str(workspace.resolve())}))
    for text in said:
        store.append(tape, TapeEntry.new("message", {"role": "user", "content": text}))
        store.append(tape, TapeEntry.new("message", {"role": "assistant",
                                                     "content": f"noted: {len(text)}"}))
        store.append(tape, TapeEntry.new("event", {"name": "run", "data": {"status": "ok"}}))
    return tape


async def test_a_search_reads_one_tape_at_a_time_and_only_its_matches(
        tmp_path: Path) -> None:
    store = Recording()
    for index in range(30):
        session(store, tmp_path, f"s{index}", *[f"message {n} of s{index}" for n in range(20)])
    session(store, tmp_path, "wanted", "nothing here", "the Rare word", "more")
    store.reads.clear()

    (found,) = await search_sessions(store, "rare WORD")
    assert (found.session.session_id, found.role, found.line) == ("wanted", "user",
                                                                   "the Rare word")
    searched = [(query, count) for query, count in store.reads if query.text_filter]
    assert len(searched) == 31 and {query.tape for query, _ in searched} == set(
        store.list_tapes()), "each tape asked once, for its matches"
    assert all(query.kind_filter == ("message", "tool_call") for query, _ in searched)
    assert sum(count for _, count in searched) == 1, "only the matching entry came back"
    assert all(query.text_filter or query.tape == found.session.tape
               for query, _ in store.reads), "only the matching session was summarised"


async def test_a_text_json_would_escape_is_searched_without_the_store_filter(
        tmp_path: Path) -> None:
    store = Recording()
    session(store, tmp_path, "quoted", 'a "quoted" path\\to\\file')
    (found,) = await search_sessions(store, '"QUOTED" path\\to')
    assert found.line == 'a "quoted" path\\to\\file'
    assert not any(query.text_filter for query, _ in store.reads)


async def test_a_title_is_an_event_that_is_no_model_context(tmp_path: Path) -> None:
    store = InMemoryTapeStore()
    tape = session(store, tmp_path, "alpha", "first words")
    context_before = messages_from_entries(store.fetch_all(TapeQuery(tape)))
    assert await rename_session(store, tape, " New\ttitle ") == "New title"
    last = store.fetch_all(TapeQuery(tape).tail(1))[0]
    assert (last.kind, last.payload, last.meta) == (
        "event", {"name": TITLE_EVENT, "data": {"title": "New title"}}, {"context": False})
    assert messages_from_entries(store.fetch_all(TapeQuery(tape))) == context_before
    (summary,) = await list_sessions(store)
    assert summary.title == "New title"
    with pytest.raises(ValueError, match="cannot be empty"):
        await rename_session(store, tape, "\x1b\x07 \n")


@pytest.mark.parametrize("make", [InMemoryTapeStore, Reference])
async def test_the_last_turns_are_the_same_with_ids_or_without(make: Any,
                                                              tmp_path: Path) -> None:
    store = make()
    tape = session(store, tmp_path, "counted", "one", "two", "three")
    entries, turns = await last_turns(store, tape, 2)
    assert turns == 3
    assert [entry.payload.get("content") for entry in entries if entry.kind == "message"] == [
        "two", "noted: 3", "three", "noted: 5"]
    assert entries[-1].kind == "event"
    everything, _ = await last_turns(store, tape, 3)
    assert everything[0].kind == "anchor" and len(everything) == 10
    with pytest.raises(ValueError, match="positive number of turns, got 0"):
        await last_turns(store, tape, 0)


async def test_a_reference_store_lists_titles_and_finds_matches(tmp_path: Path) -> None:
    store = Reference()
    tape = session(store, tmp_path, "plain", "hello there", "general kenobi")
    await rename_session(store, tape, "Greetings")
    (summary,) = await list_sessions(store)
    assert (summary.title, summary.turns) == ("Greetings", 2)
    (found,) = await search_sessions(store, "KENOBI")
    assert (found.session.title, found.line) == ("Greetings", "general kenobi")
