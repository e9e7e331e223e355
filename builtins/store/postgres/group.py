"""Group commit for the PostgreSQL tape store: the writes waiting at one moment share one
round trip and one transaction.

Why: every write used to take a pooled connection of its own and a round trip and a
commit each; under many concurrent turns the client's cost of each statement (checkout,
deadline, sending, waking up for the answer) was a large part of a turn. Now one task per
store takes every write waiting when it becomes free (a group), and sends them pipelined
in one transaction that first locks every tape the group writes, in key order (as each
write's own function would, so groups and single writes never deadlock). A write is
acknowledged only after that COMMIT.

Failures: when the server refuses the group (one member's error rolls the whole
transaction back), nothing of it was applied and each member runs again alone, so each
fails or succeeds on its own. When the group's outcome is unknown (its connection failed),
every member gets that error; the store repeats the writes that are safe to repeat.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio

from hookline.kernel.errors import ErrorKind, HooklineError

from .sql import _LOCK_TAPES, NS_TAPE, Statement, execute

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["GROUP_LIMIT", "WriteGroups"]

T = TypeVar("T")

GROUP_LIMIT: Final = 64
"""Most writes sent together (bounds the latency of the first of a group)."""

Connection = Callable[[float], AbstractAsyncContextManager["AsyncConnection"]]


@dataclass
class _Member:
    statement: Statement[Any]
    until: float
    future: asyncio.Future[Any]


class WriteGroups:
    """The store's writes, grouped; see the module doc. `connection(until)` lends a pooled
    connection held until `until` (monotonic) at most; `outcome_unknown(exc)` says whether
    a failed write may have committed all the same."""

    def __init__(self, connection: Connection,
                 outcome_unknown: Callable[[BaseException], bool]) -> None:
        self._connection = connection
        self._outcome_unknown = outcome_unknown
        self._waiting: list[_Member] = []
        self._runner: asyncio.Task[None] | None = None
        self.groups = 0
        """Groups of more than one write sent so far: what tests and benchmarks read."""
        self.largest = 0
        """The most writes one group held."""

    async def write(self, statement: Statement[T], until: float) -> T:
        """Run `statement` in the next group, within `until`; like every store write, a
        cancelled caller still waits for its outcome (a write is never abandoned half-way),
        then sees the cancellation."""
        loop = asyncio.get_running_loop()
        member = _Member(statement, until, loop.create_future())
        self._waiting.append(member)
        if self._runner is None:
            self._runner = loop.create_task(self._drain())
        with anyio.CancelScope(shield=True):
            await asyncio.wait([member.future])
        result: T = member.future.result()
        return result

    async def _drain(self) -> None:
        group: list[_Member] = []
        try:
            while self._waiting:
                group = self._waiting[:GROUP_LIMIT]
                del self._waiting[:GROUP_LIMIT]
                await self._send(group)
        finally:
            self._runner = None
            stopped = HooklineError(  # reached with members left only when cancelled
                ErrorKind.temporary, "The tape store stopped writing (its event loop is "
                "ending); whether the write was stored is unknown.")
            for member in [*group, *self._waiting]:
                _settle(member, stopped, failed=True)
            self._waiting.clear()

    async def _send(self, group: list[_Member]) -> None:
        if len(group) == 1:
            await self._alone(group[0])
            return
        self.groups += 1
        self.largest = max(self.largest, len(group))
        tapes = list({tape for member in group for tape in member.statement.tapes})
        try:
            async with self._connection(min(member.until for member in group)) as conn:
                async with conn.pipeline(), conn.transaction():
                    if tapes:  # the statement locks them in key order
                        await conn.execute(_LOCK_TAPES, (NS_TAPE, tapes))
                    cursors = [await conn.execute(member.statement.sql,
                                                  member.statement.params)
                               for member in group]
                rows = [await cursor.fetchall() for cursor in cursors]
        except Exception as exc:
            if not isinstance(exc, HooklineError) or self._outcome_unknown(exc):
                for member in group:
                    _settle(member, exc, failed=True)
                return
            for member in group:  # refused, so nothing was applied: each on its own
                await self._alone(member)
            return
        for member, found in zip(group, rows, strict=True):
            try:
                _settle(member, member.statement.parse(found))
            except Exception as exc:
                _settle(member, exc, failed=True)

    async def _alone(self, member: _Member) -> None:
        try:
            async with self._connection(member.until) as conn:
                result = await execute(conn, member.statement)
        except Exception as exc:
            _settle(member, exc, failed=True)
        else:
            _settle(member, result)


def _settle(member: _Member, value: Any, *, failed: bool = False) -> None:
    if member.future.done():
        return
    if failed:
        member.future.set_exception(value)
    else:
        member.future.set_result(value)
