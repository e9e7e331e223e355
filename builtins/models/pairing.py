"""Which call a tool result answers, by position and id together.

Providers choose tool call ids; some reuse them from one response to the next (`call_1`
every time) or send none (`""`). Keyed by id alone, a conversation that repeats an id
pairs a result with the wrong call, or drops a call and its result. Here a result answers
the nearest preceding call with its id that has no result yet: of the latest group (one
model response) holding such a call, the first. So ids need be unique only within one
response, and a response that repeats an id has its results paired in call order.
"""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["OpenCalls"]

Call = TypeVar("Call")


class OpenCalls(Generic[Call]):
    """The calls seen so far that have no result yet, to pair results with as they come.

    `add(group, call_id, call)` in conversation order (`group` numbers the response, in
    increasing order); `answer(call_id)` takes and returns the call the next result with
    that id answers, or None when no call before it is waiting for one.
    """

    __slots__ = ("_open",)

    def __init__(self) -> None:
        self._open: dict[str, list[tuple[int, Call]]] = {}

    def add(self, group: int, call_id: str, call: Call) -> None:
        self._open.setdefault(call_id, []).append((group, call))

    def answer(self, call_id: str) -> Call | None:
        waiting = self._open.get(call_id)
        if not waiting:
            return None
        latest = waiting[-1][0]
        first = len(waiting) - 1
        while first > 0 and waiting[first - 1][0] == latest:
            first -= 1
        return waiting.pop(first)[1]

    def forget_before(self, group: int) -> None:
        """Drop the waiting calls of groups before `group` (no longer in the conversation)."""
        for call_id, waiting in list(self._open.items()):
            kept = [item for item in waiting if item[0] >= group]
            if kept:
                self._open[call_id] = kept
            else:
                del self._open[call_id]
