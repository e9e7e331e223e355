"""The default conversion of tape entries into model messages (`Tape.read_messages`).

Every tool call that has a result in the selection appears once, followed by its own
result; a result is paired with its call by position and id together (`pairing`), so a
model that reuses ids from one response to the next, or sends empty ones, still gets
each of its calls back with the output of that call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from itertools import chain
from typing import Any

from hookline.kernel.messages import ModelMessage, as_model_messages
from hookline.kernel.tape import TapeEntry

from ..models.pairing import OpenCalls

__all__ = ["RESUMES", "STEERED", "ContextMessages", "answered_calls", "messages_from_entries",
           "starts_turn"]

RESUMES = "resumes"
"""Meta of a user message a compaction wrote after its anchor so that the context resumes
the turn (the turn's own message again, or a note to go on): not a turn of its own."""
STEERED = "steered"
"""Meta of a user message fed into a turn while it ran (steering): part of that turn."""


def starts_turn(entry: TapeEntry) -> bool:
    """Whether the entry is a user message that starts a turn (what `--last` counts)."""
    return (entry.kind == "message" and entry.payload.get("role") == "user"
            and not entry.meta.get(RESUMES) and not entry.meta.get(STEERED))


def messages_from_entries(entries: Iterable[TapeEntry]) -> list[dict[str, Any]]:
    """Message dicts in republic's `Message.to_dict` form (`republic.Message.from_dict`
    accepts each of them):

    - `message`: its payload (`role`, `content`, ...), when it has a role;
    - `tool_call`: an assistant message with `tool_calls` (`id`, `name`, `arguments`),
      keeping only the calls answered in the selection (`answered_calls`), immediately
      followed by one `tool` message per answered call, in call order (`tool_call`,
      `content` = the output, `is_error` when set). Unanswered calls and results without
      their call are left out, since providers reject either;
    - `anchor`: a short assistant note `[anchor <name>]` (with the state's `summary`);
    - `event` named `handoff`: a short assistant note carrying the handoff's summary (or
      state), which is how a summary survives into the context after the anchor;
    - everything else (`system`, `error`, other events) is not model context.
    """
    return ContextMessages().messages(list(entries))


class ContextMessages:
    """`messages_from_entries` for a selection that grows at its end and may lose entries
    at its start, converting each entry once.

    A context read is the same entries as the last one plus what was added since, less
    the oldest ones once the window is full, so `messages(entries)` keeps what it
    converted of the entries it saw last time (the same objects, or equal ones, in the
    same order), converts only the new ones, and starts over otherwise. Pairing runs left
    to right, so a new result changes only the call it answers: that `tool_call` entry
    alone is converted again; and an entry leaving the window changes nothing after it
    (a result whose call left pairs with nothing, as it would from scratch). With
    `hide_excluded`, entries whose meta has `context: False` are left out, as if not in
    `entries`. `messages` returns copies the caller may change; with `shared` it returns
    the converted messages themselves, for a caller that only reads them (the agent loop,
    which makes its own messages of them at once).
    """

    __slots__ = ("_answers", "_base", "_entries", "_flat", "_flat_upto", "_fresh", "_hide",
                 "_models", "_rendered", "_waiting")

    def __init__(self, *, hide_excluded: bool = False) -> None:
        self._hide = hide_excluded
        self._start_over()

    def _start_over(self) -> None:
        self._base = 0  # the index, in pairing's numbering, of `_entries[0]`
        self._entries: list[TapeEntry] = []
        self._rendered: list[list[dict[str, Any]]] = []
        self._models: list[list[ModelMessage] | None] = []  # see model_messages
        self._fresh = 0  # how many of `_models` are `_FRESH`
        self._flat: list[ModelMessage] = []  # the messages of the first `_flat_upto` entries
        self._flat_upto = 0
        self._waiting: OpenCalls[tuple[int, int]] = OpenCalls()
        self._answers: dict[tuple[int, int], dict[str, Any]] = {}

    def __len__(self) -> int:
        """The entries it holds (those of its last read)."""
        return len(self._entries)

    def messages(self, entries: list[TapeEntry], *, shared: bool = False) -> list[dict[str, Any]]:
        self._update(entries)
        flat = chain.from_iterable(self._rendered)
        return list(flat) if shared else [_json_copy(message) for message in flat]

    def model_messages(self, entries: list[TapeEntry]) -> list[ModelMessage]:
        """`messages(entries)` as ModelMessages, kept with their entries and shared from one
        read to the next: read-only (see `_shareable`), so a read costs what was added.
        The few that cannot be made read-only (content blocks, call metadata) are made
        anew at each read."""
        self._update(entries)
        models = self._models
        for at in range(self._flat_upto, len(models)):
            if models[at] is None:
                converted = as_model_messages(self._rendered[at])
                if all(_shareable(message) for message in converted):
                    models[at] = converted
                else:
                    models[at] = _FRESH
                    self._fresh += 1
        if self._fresh:
            return [message for at, kept in enumerate(models) for message in (
                as_model_messages(self._rendered[at]) if kept is _FRESH or kept is None
                else kept)]
        # Every entry's messages are kept: those of the entries before `_flat_upto` are
        # already in one flat list, so only what was added since is flattened.
        self._flat.extend(chain.from_iterable(_kept(models[self._flat_upto:])))
        self._flat_upto = len(models)
        return list(self._flat)

    def _unflatten_from(self, at: int) -> None:
        """The messages of the entry at `at` change: the flat list stops before them."""
        if at < self._flat_upto:
            del self._flat[len(self._flat) - _count(self._models[at:self._flat_upto]):]
            self._flat_upto = at

    def _update(self, entries: list[TapeEntry]) -> None:
        if entries and self._entries and entries[0] is not self._entries[0]:
            self._drop_before(entries[0])
        seen = len(self._entries)
        # List equality compares the same objects by identity (the run's own entries, and
        # a store's shared ones) and others by value (entries read afresh).
        if len(entries) < seen or entries[:seen] != self._entries:
            self._start_over()
        for index in range(len(self._entries), len(entries)):
            self._add(entries[index])

    def _drop_before(self, first: TapeEntry) -> None:
        """Forget the entries before `first` when it is one of those seen (the window
        slid); the caller starts over when the rest does not match."""
        kept = self._entries
        start = next((n for n in range(1, len(kept)) if kept[n] is first), None)
        if start is None:
            return
        if start <= self._flat_upto:
            del self._flat[:_count(self._models[:start])]
            self._flat_upto -= start
        else:
            self._unflatten_from(0)
        del kept[:start]
        del self._rendered[:start]
        self._fresh -= sum(1 for models in self._models[:start] if models is _FRESH)
        del self._models[:start]
        self._base += start
        self._waiting.forget_before(self._base)
        self._answers = {slot: result for slot, result in self._answers.items()
                         if slot[0] >= self._base}

    def _add(self, entry: TapeEntry) -> None:
        index = self._base + len(self._entries)
        self._entries.append(entry)
        self._models.append(None)
        if self._hide and entry.meta.get("context") is False:
            self._rendered.append([])
            return
        if entry.kind == "tool_call":
            for position, call in enumerate(_dict_items(entry.payload.get("calls"))):
                call_id = call.get("id")
                if isinstance(call_id, str):
                    self._waiting.add(index, call_id, (index, position))
        self._rendered.append(_render(index, entry, self._answers))
        if entry.kind != "tool_result":
            return
        answered: set[int] = set()
        for result in _dict_items(entry.payload.get("results")):
            call_id = result.get("call_id")
            slot = self._waiting.answer(call_id) if isinstance(call_id, str) else None
            if slot is not None:
                self._answers[slot] = result
                answered.add(slot[0])
        for call_index in answered:
            at = call_index - self._base
            self._rendered[at] = _render(call_index, self._entries[at], self._answers)
            self._unflatten_from(at)
            if self._models[at] is _FRESH:
                self._fresh -= 1
            self._models[at] = None


CUT_SHORT: dict[Any, str] = {
    "cancelled": "[turn interrupted: the user cancelled it before it finished]",
    "interrupted": "[turn interrupted: hookline stopped before it finished]",
    "error": "[turn failed: an error ended it before it finished]",
}
"""The note a run cut short leaves in the context (after what it recorded), so the next
request tells the model its last answer is incomplete, or missing: a message a client
sends again after an error (a 429 retried) then reads as a second try, not as a twin."""

_FRESH: list[ModelMessage] = []
"""In `ContextMessages._models` (by identity): an entry whose ModelMessages are made at
each read."""


class _ReadOnlyList(list):  # type: ignore[type-arg]
    """The `tool_calls` of a shared ModelMessage: a list to read, which refuses changes
    (a hook changing a shared message would change every later read of the context).
    Copies (`list(...)`, `copy`, `dataclasses.replace` of the message) are plain lists."""

    def _refuse(self, *args: object, **kwargs: object) -> Any:
        raise TypeError(
            "This ModelMessage is shared by the context reads of a run: build a changed "
            "one instead (dataclasses.replace(message, tool_calls=[...])).")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (list, (list(self),))


def _kept(models: list[list[ModelMessage] | None]) -> list[list[ModelMessage]]:
    """Models known to be all converted (none is None), typed so."""
    return models  # type: ignore[return-value]


def _count(models: list[list[ModelMessage] | None]) -> int:
    """How many messages converted models hold together."""
    return sum(len(kept) for kept in _kept(models))


def _shareable(message: ModelMessage) -> bool:
    """Make `message` read-only where it can be (its `tool_calls` list); False when it
    holds what cannot be (content blocks, a call's metadata dict)."""
    if message.content.__class__ is not str:
        return False
    if message.tool_calls:
        if any(call.metadata for call in message.tool_calls):
            return False
        object.__setattr__(message, "tool_calls", _ReadOnlyList(message.tool_calls))
    return True


def _render(
    index: int, entry: TapeEntry, answers: dict[tuple[int, int], dict[str, Any]]
) -> list[dict[str, Any]]:
    """The messages of one entry (at `index` of the selection), given the answers so far."""
    payload = entry.payload
    if entry.kind == "message":
        return [payload] if isinstance(payload.get("role"), str) else []
    if entry.kind == "tool_call":
        pairs = [(_call_dict(call), answers[index, position])
                 for position, call in enumerate(_dict_items(payload.get("calls")))
                 if (index, position) in answers]
        content = payload.get("content")
        if not pairs:
            if isinstance(content, str) and content:
                return [{"role": "assistant", "content": content}]
            return []
        message: dict[str, Any] = {"role": "assistant",
                                   "tool_calls": [call for call, _ in pairs]}
        if isinstance(content, str) and content:
            message["content"] = content
        return [message, *(_tool_message(call, result) for call, result in pairs)]
    if entry.kind == "anchor":
        note = _note(f"[anchor {payload.get('name')}]", payload.get("state"))
        return [{"role": "assistant", "content": note}]
    if entry.kind == "event" and payload.get("name") == "run":
        ended = payload.get("data")
        cut = CUT_SHORT.get(ended.get("status")) if isinstance(ended, dict) else None
        return [{"role": "assistant", "content": cut}] if cut else []
    if entry.kind == "event" and payload.get("name") == "handoff":
        raw = payload.get("data")
        data = raw if isinstance(raw, dict) else {}
        note = _note(f"[handoff to {data.get('name')}]", data.get("state"))
        return [{"role": "assistant", "content": note}]
    return []


def answered_calls(entries: Sequence[TapeEntry]) -> dict[tuple[int, int], dict[str, Any]]:
    """The result of each answered call, keyed by (index of its `tool_call` entry in
    `entries`, index of the call among that entry's calls).

    A result answers the nearest preceding call with its `call_id` that has no result
    yet: of the latest `tool_call` entry before it holding such a call, the first. Ids
    are strings (empty ones included) and need be unique only within one entry; a result
    with no such call before it (its call was cut by the window, or never recorded), and
    a call or result whose id is not a string, answer nothing.
    """
    waiting: OpenCalls[tuple[int, int]] = OpenCalls()
    answers: dict[tuple[int, int], dict[str, Any]] = {}
    for index, entry in enumerate(entries):
        if entry.kind == "tool_call":
            for position, call in enumerate(_dict_items(entry.payload.get("calls"))):
                call_id = call.get("id")
                if isinstance(call_id, str):
                    waiting.add(index, call_id, (index, position))
        elif entry.kind == "tool_result":
            for result in _dict_items(entry.payload.get("results")):
                call_id = result.get("call_id")
                slot = waiting.answer(call_id) if isinstance(call_id, str) else None
                if slot is not None:
                    answers[slot] = result
    return answers


def _json_copy(value: Any) -> Any:
    """A deep copy of JSON-shaped data (what tape payloads are), much cheaper than deepcopy."""
    if isinstance(value, dict):
        return {key: _json_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_copy(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_json_copy(item) for item in value)
    return value


def _dict_items(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _call_dict(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call.get("arguments", "{}")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    data: dict[str, Any] = {
        "id": call["id"],
        "name": str(call.get("name", "")),
        "arguments": arguments,
    }
    if isinstance(call.get("metadata"), dict) and call["metadata"]:
        data["metadata"] = dict(call["metadata"])
    return data


def _tool_message(call: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    output = result.get("output", "")
    content = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    message: dict[str, Any] = {"role": "tool", "content": content, "tool_call": dict(call)}
    if result.get("is_error"):
        message["is_error"] = True
    return message


def _note(head: str, state: Any) -> str:
    if not isinstance(state, dict):
        return head
    summary = state.get("summary")
    if isinstance(summary, str) and summary:
        return f"{head} {summary}"
    rest = {key: value for key, value in state.items() if key != "owner"}
    return f"{head} {json.dumps(rest, ensure_ascii=False)}" if rest else head
