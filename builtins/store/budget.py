"""The time a turn may spend waiting on its tape store, across all its calls.

Each store call is bounded on its own (a connection in 5 s, a statement in 10 s), but a
turn makes several, so during an outage a turn used to wait the sum before it failed.
Whoever runs a turn opens a `turn_store_budget`; the stores bound each call by what is
left of it and take what the call took (the PostgreSQL store its connections and
statements; the SQLite store the wait for its writer, whose write goes on). A call made
once it is spent fails at once with a temporary error (the gateway answers 503 with
`Retry-After`). Calls inside a call (a grouped write borrowing a connection) are not
counted twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from hookline.kernel.errors import ErrorKind, HooklineError

__all__ = ["StoreBudget", "store_call", "turn_store_budget"]


@dataclass
class StoreBudget:
    """Seconds of store waiting a turn has left, of `seconds`."""

    seconds: float
    left: float

    def spent(self) -> HooklineError:
        return HooklineError(
            ErrorKind.temporary,
            f"The tape store did not answer within {self.seconds:g} s during this turn "
            f"(store_turn_deadline); retry shortly.")


_BUDGET: ContextVar[StoreBudget | None] = ContextVar("hookline_store_budget", default=None)
_IN_CALL: ContextVar[bool] = ContextVar("hookline_store_in_call", default=False)


@contextmanager
def turn_store_budget(seconds: float | None) -> Iterator[StoreBudget | None]:
    """Bound the store calls made in this block (and the tasks it starts) to `seconds`
    in all; None leaves them unbounded."""
    budget = None if seconds is None else StoreBudget(seconds, seconds)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


@contextmanager
def store_call(until: float) -> Iterator[float]:
    """One store call: yields its deadline (monotonic), `until` or the end of the turn's
    budget when sooner, and takes the time it took from the budget. Raises the budget's
    error when it is spent, before the call or when the call failed for lack of time."""
    budget = _BUDGET.get()
    if budget is None or _IN_CALL.get():
        yield until
        return
    if budget.left <= 0:
        raise budget.spent()
    start = time.monotonic()
    token = _IN_CALL.set(True)
    try:
        yield min(until, start + budget.left)
    except HooklineError as exc:
        if budget.left - (time.monotonic() - start) <= 0:
            raise budget.spent() from exc
        raise
    finally:
        _IN_CALL.reset(token)
        budget.left -= time.monotonic() - start
