"""Tool results belong to their call: the model context pairs each result with the call it
answers by position and id together, whatever ids the model chose.

A result answers the nearest preceding call with its id that has no result yet, so ids
need be unique only within one model response; when a response repeats an id, its
results with that id answer those calls in call order (the agent runs a response's calls
one after another, in order). Every call here has its own serial number in its arguments
and its output, so a result attached to the wrong call shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hookline.builtins.models.republic_client import to_republic_messages
from hookline.builtins.tape.context import messages_from_entries
from hookline.kernel.messages import as_model_messages
from hookline.kernel.tape import TapeEntry

# Few ids, so that they repeat across responses, within the window and within a response.
IDS = st.sampled_from(["call_1", "call_1", "", "call_2", "x"])


@dataclass
class Session:
    """A tape as the agent writes it, and which calls ran (by serial)."""

    entries: list[TapeEntry] = field(default_factory=list)
    executed: dict[int, int] = field(default_factory=dict)
    """serial of a call that ran -> index of its tool_result entry"""
    call_entry: dict[int, int] = field(default_factory=dict)
    """serial of every call -> index of its tool_call entry"""

    def add(self, kind: str, payload: dict[str, Any]) -> int:
        self.entries.append(TapeEntry(len(self.entries) + 1, kind, payload))
        return len(self.entries) - 1


def call(call_id: str, serial: int) -> dict[str, Any]:
    return {"id": call_id, "name": "shell", "arguments": json.dumps({"n": serial})}


def result(call_id: str, serial: int) -> dict[str, Any]:
    return {"call_id": call_id, "name": "shell", "output": f"out {serial}", "is_error": False,
            "outcome": "ran"}


@st.composite
def sessions(draw: st.DrawFn) -> Session:
    """Turns of steps: each step one response of calls, then results for those that ran.

    Which calls ran is arbitrary, except that among a response's calls sharing an id the
    ones that ran come first (calls run in order; a run stopped midway leaves the rest
    without results). Results of different ids come in any order, one or several per
    entry, with other entries between them.
    """
    session = Session()
    serial = 0
    for _ in range(draw(st.integers(1, 10))):
        session.add("message", {"role": "user", "content": "again"})
        for _ in range(draw(st.integers(0, 3))):
            ids = draw(st.lists(IDS, min_size=1, max_size=4))
            serials = list(range(serial, serial + len(ids)))
            serial += len(ids)
            calls = [call(i, s) for i, s in zip(ids, serials, strict=True)]
            payload: dict[str, Any] = {"calls": calls}
            if draw(st.booleans()):
                payload["content"] = "Running it."
            index = session.add("tool_call", payload)
            for number in serials:
                session.call_entry[number] = index
            ran = draw(st.lists(st.booleans(), min_size=len(ids), max_size=len(ids)))
            groups: dict[str, list[int]] = {}
            for call_id, number in zip(ids, serials, strict=True):
                groups.setdefault(call_id, []).append(number)
            done = []
            for call_id, members in groups.items():
                count = sum(ran[serials.index(number)] for number in members)
                done += [(call_id, number) for number in members[:count]]
            order = draw(st.permutations(done))
            # Calls sharing an id keep their order among the results.
            for call_id, members in groups.items():
                slots = [k for k, (other, _) in enumerate(order) if other == call_id]
                kept = [number for number in members if (call_id, number) in done]
                for slot, number in zip(slots, kept, strict=True):
                    order[slot] = (call_id, number)
            while order:
                size = draw(st.integers(1, len(order)))
                batch, order = order[:size], order[size:]
                index = session.add("tool_result", {"results": [result(*r) for r in batch]})
                for _, number in batch:
                    session.executed[number] = index
                if draw(st.booleans()):
                    session.add("event", {"name": "tool.note", "data": {}})
        session.add("message", {"role": "assistant", "content": "Done."})
        session.add("event", {"name": "run", "data": {"status": "ok"}})
    return session


def serial_of(call_dict: dict[str, Any]) -> int:
    return int(json.loads(call_dict["arguments"])["n"])


def visible(session: Session, start: int) -> list[int]:
    """Serials of the calls whose call entry and result entry both lie in `entries[start:]`."""
    return sorted(number for number, where in session.executed.items()
                  if where >= start and session.call_entry[number] >= start)


def check_pairs(messages: list[dict[str, Any]]) -> list[int]:
    """Every assistant message's calls are followed by one tool message each, in order,
    holding that call's own output; returns the serials of the calls shown."""
    shown = []
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            continue
        calls = message.get("tool_calls", [])
        answers = messages[index + 1 : index + 1 + len(calls)]
        assert [answer["role"] for answer in answers] == ["tool"] * len(calls), messages
        for made, answer in zip(calls, answers, strict=True):
            assert answer["tool_call"] == made
            assert answer["content"] == f"out {serial_of(made)}", "a result on the wrong call"
            shown.append(serial_of(made))
    tool_messages = sum(message["role"] == "tool" for message in messages)
    assert tool_messages == len(shown), "a tool message outside its call's block"
    return sorted(shown)


@settings(max_examples=400, deadline=None)
@given(sessions(), st.data())
def test_every_call_that_ran_appears_once_with_its_own_result(
    session: Session, data: st.DataObject
) -> None:
    """Whatever ids the model chose, and wherever the window starts."""
    start = data.draw(st.integers(0, len(session.entries)), label="window start")
    messages = messages_from_entries(session.entries[start:])
    assert check_pairs(messages) == visible(session, start)


@settings(max_examples=200, deadline=None)
@given(sessions())
def test_the_provider_request_keeps_each_result_on_its_call(session: Session) -> None:
    """republic's messages (what a provider's request is made of) pair the same way."""
    messages = messages_from_entries(session.entries)
    converted = to_republic_messages(as_model_messages(messages))
    announced = [c for message in converted for c in message.tool_calls]
    answered = [message.tool_call for message in converted if message.role == "tool"]
    assert sorted(serial_of(vars(c)) for c in announced) == visible(session, 0)
    assert len(answered) == len(announced)
    for message in converted:
        if message.role == "tool":
            assert message.tool_call is not None
            (part,) = message.parts
            assert part.text == f"out {serial_of(vars(message.tool_call))}"
    # Each answered call is the very call object its assistant message announced.
    assert sorted(map(id, answered)) == sorted(map(id, announced))


# -- the cases one by one ---------------------------------------------------------------------


def entries_of(*items: tuple[str, dict[str, Any]]) -> list[TapeEntry]:
    return [TapeEntry(number, kind, payload) for number, (kind, payload) in enumerate(items, 1)]


def turn(call_id: str, serial: int, *, ran: bool = True) -> list[tuple[str, dict[str, Any]]]:
    items = [("message", {"role": "user", "content": f"turn {serial}"}),
             ("tool_call", {"calls": [call(call_id, serial)]})]
    if ran:
        items += [("tool_result", {"results": [result(call_id, serial)]}),
                  ("message", {"role": "assistant", "content": f"done {serial}"})]
    return items


def shown(messages: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    """(id, serial, output) of every call shown, in order."""
    pairs = []
    for index, message in enumerate(messages):
        for offset, made in enumerate(message.get("tool_calls", []), start=1):
            pairs.append((made["id"], serial_of(made), messages[index + offset]["content"]))
    return pairs


def test_the_same_id_every_turn() -> None:
    entries = entries_of(*turn("call_1", 1), *turn("call_1", 2), *turn("call_1", 3))
    messages = messages_from_entries(entries)
    assert shown(messages) == [("call_1", 1, "out 1"), ("call_1", 2, "out 2"),
                               ("call_1", 3, "out 3")]
    assert [m["content"] for m in messages if m["role"] == "user"] == [
        "turn 1", "turn 2", "turn 3"]


def test_empty_ids_pair_by_position() -> None:
    entries = entries_of(*turn("", 1), *turn("", 2))
    assert shown(messages_from_entries(entries)) == [("", 1, "out 1"), ("", 2, "out 2")]


def test_an_id_repeated_within_one_response_pairs_in_call_order() -> None:
    entries = entries_of(
        ("tool_call", {"calls": [call("a", 1), call("b", 2), call("a", 3)]}),
        ("tool_result", {"results": [result("a", 1)]}),
        ("tool_result", {"results": [result("b", 2)]}),
        ("tool_result", {"results": [result("a", 3)]}),
    )
    assert shown(messages_from_entries(entries)) == [
        ("a", 1, "out 1"), ("b", 2, "out 2"), ("a", 3, "out 3")]


def test_a_call_left_without_result_goes_and_its_id_is_free_for_the_next_one() -> None:
    """A run stopped before the call's result (a killed process) leaves the call out,
    as before; the next turn's call with the same id gets its own result."""
    entries = entries_of(*turn("call_1", 1, ran=False), *turn("call_1", 2))
    messages = messages_from_entries(entries)
    assert shown(messages) == [("call_1", 2, "out 2")]
    assert messages[0] == {"role": "user", "content": "turn 1"}


def test_a_result_whose_call_the_window_cut_answers_nothing_later() -> None:
    """The window starts between an old call and its result: that result must not be
    given to a later call that reuses the id."""
    entries = entries_of(*turn("call_1", 1), *turn("call_1", 2))[2:]
    assert entries[0].kind == "tool_result"
    assert shown(messages_from_entries(entries)) == [("call_1", 2, "out 2")]
