"""What a tape recorded of a request, by key or id: the answer of a finished run,
`running` for a run still in a store's journal (a peer's), and nothing for a request
older than its time."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from hookline.builtins.store import InMemoryTapeStore
from hookline.builtins.store.entries import REQUEST_META
from hookline.builtins.tape.requests import recorded_answer
from hookline.builtins.tape.tape import Tape
from hookline.kernel.tape import TapeEntry

pytestmark = pytest.mark.anyio

MARK = {REQUEST_META: {"id": "r-1", "key": "k-1", "digest": "d-1"}}


class JournalingStore(InMemoryTapeStore):
    """A store showing one run of a peer still in its journal."""

    def __init__(self, journaled: list[dict[str, Any]]) -> None:
        super().__init__()
        self.journaled = journaled

    def journaled_meta(self, tape: str) -> list[dict[str, Any]]:
        return self.journaled


async def finished_run(tape: Tape) -> None:
    await tape.append("message", {"role": "user", "content": "deploy"}, **MARK)
    await tape.append("tool_call", {"calls": [], "content": "Calling a tool."})
    await tape.append("message", {"role": "assistant", "content": "Deployed."})
    await tape.append("event", {"name": "run", "data": {"status": "ok", "usage_by_model": {
        "m": {"input_tokens": 10, "output_tokens": 3, "cached_tokens": 0, "calls": 2}}}})


async def test_a_finished_run_answers_what_it_said() -> None:
    tape = Tape(InMemoryTapeStore(), "s")
    await finished_run(tape)
    found = await recorded_answer(tape, "s", "key", "k-1", max_age=60)
    digest, status, body = found or ("", 0, {})
    assert (digest, status, body["status"]) == ("d-1", 200, "ok")
    assert body["content"] == "Calling a tool.\n\nDeployed."
    assert body["usage"] == {"input_tokens": 10, "output_tokens": 3, "cached_tokens": 0}
    assert await recorded_answer(tape, "s", "key", "another key") is None
    by_id = await recorded_answer(tape, "s", "id", "r-1")
    assert by_id is not None and by_id[2]["content"].endswith("Deployed.")


async def test_a_message_steered_into_the_run_does_not_end_its_answer() -> None:
    """A message fed into the running turn (steering) is part of it: the retry of the
    turn's own request finds its run event past it, not `running` for ever."""
    tape = Tape(InMemoryTapeStore(), "s")
    await tape.append("message", {"role": "user", "content": "deploy"}, **MARK)
    await tape.append("message", {"role": "user", "content": "and tag it"}, steered=True)
    await tape.append("message", {"role": "assistant", "content": "Deployed, tagged."})
    await tape.append("event", {"name": "run", "data": {"status": "ok"}})
    found = await recorded_answer(tape, "s", "key", "k-1", max_age=60)
    assert found is not None and found[2]["status"] == "ok"
    assert found[2]["content"] == "Deployed, tagged."


async def test_a_key_older_than_its_time_is_new_again() -> None:
    store = InMemoryTapeStore()
    tape = Tape(store, "s")
    await finished_run(tape)
    old = [replace(entry, date="2020-01-01T00:00:00+00:00") if entry.meta else entry
           for entry in store.fetch_all(tape.query())]
    store.reset("s")
    for entry in old:
        store.append("s", TapeEntry(0, entry.kind, entry.payload, entry.meta, entry.date))
    assert await recorded_answer(tape, "s", "key", "k-1", max_age=86_400) is None
    assert await recorded_answer(tape, "s", "key", "k-1") is not None  # no limit given


async def test_a_run_in_a_peers_journal_is_running() -> None:
    tape = Tape(JournalingStore([{"run_id": "r"}, MARK]), "s")
    digest, status, body = await recorded_answer(tape, "s", "key", "k-1") or ("", 0, {})
    assert (digest, status, body["status"]) == ("d-1", 409, "running")
    assert await recorded_answer(tape, "s", "key", "k-2") is None
