"""Group commit and reader connections for `SQLiteTapeStore`.

Why: every durable write used to be a transaction and an fsync of its own, run in
whichever worker thread called, all of them (and every read) queued on one lock. Under
many concurrent turns the process spent more time handing that lock and the GIL between
threads than doing the turns' work. Now:

- `GroupWriter`: one thread per store owns the write connection. It takes every write
  waiting when it becomes free (a group), runs each inside a savepoint of one
  `BEGIN IMMEDIATE` transaction and commits once: one fsync with `synchronous=FULL` for
  the whole group. A caller's future resolves only after that COMMIT (and the file check
  after it), so a write is acknowledged only once it is durable.
- Failures: a write whose own statements raise is rolled back to its savepoint and fails
  alone, with its error; the others of its group commit. When the transaction as a whole
  fails (BEGIN, the file checks, COMMIT, or damage found by any member), nothing of the
  group is applied and every member fails with that error.
- `ReaderPool`: reads use WAL reader connections of their own (a few, opened on demand),
  so they never wait behind the writer or each other's lock.
- `wait`: awaiting a write's future on asyncio costs one wake-up of the event loop, not a
  worker thread blocked on it; other event loops (trio) wait in a worker thread.
"""

from __future__ import annotations

import asyncio
import math
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from hookline.kernel.errors import ErrorKind, HooklineError

from ..budget import store_call

__all__ = ["GROUP_LIMIT", "GroupWriter", "ReaderPool", "WriterStopped", "wait"]

T = TypeVar("T")

GROUP_LIMIT = 128
"""Most writes committed together (bounds the latency of the first of a group)."""

Work = Callable[[sqlite3.Connection], Any]
Transaction = Callable[[sqlite3.Connection], AbstractContextManager[None]]


@dataclass
class _Request:
    work: Work | None
    future: Future[Any]
    on_error: Callable[[BaseException], None] | None


_STOP = object()


class WriterStopped(RuntimeError):
    """The writer has been stopped (its store closed): no write is taken any more."""


class GroupWriter:
    """The one thread that writes through `conn`; see the module doc.

    `transaction(conn)` is the store's transaction (BEGIN IMMEDIATE to COMMIT with its
    checks); `before(conn)` runs ahead of each group outside it (the store ends failed
    runs there); `fatal(exc)` says whether a member's error must fail the whole group.
    """

    def __init__(self, conn: sqlite3.Connection, transaction: Transaction,
                 before: Callable[[sqlite3.Connection], None],
                 fatal: Callable[[BaseException], bool], name: str) -> None:
        self._conn = conn
        self._transaction = transaction
        self._before = before
        self._fatal = fatal
        self.translate: Callable[[BaseException], BaseException] = lambda exc: exc
        """What a failure becomes for its callers (the store's passing SQLite errors)."""
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = False
        self._name = name
        self.groups = 0
        """Groups committed (or attempted) so far: what tests and benchmarks read."""

    def submit(self, work: Work | None,
               on_error: Callable[[BaseException], None] | None = None) -> Future[Any]:
        """Queue `work(conn)` for the next group; its future holds what it returned.
        With `work` None, the future resolves once `before` has run (no transaction)."""
        future: Future[Any] = Future()
        with self._lock:  # so that no write is queued behind the stop
            if self._stopped:
                raise WriterStopped("the store is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name,
                                                daemon=True)
                self._thread.start()
            self._queue.put(_Request(work, future, on_error))
        return future

    def stop(self) -> None:
        """Finish the writes queued so far, then end the thread (idempotent)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            thread = self._thread
            if thread is not None:
                self._queue.put(_STOP)
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            group = [first]
            stop = False
            while len(group) < GROUP_LIMIT:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP:
                    stop = True
                    break
                group.append(more)
            self._commit(group)
            if stop:
                return

    def _commit(self, group: list[_Request]) -> None:
        self.groups += 1
        outcomes: list[tuple[bool, Any]] = [(True, None)] * len(group)
        try:
            self._before(self._conn)
            if any(request.work is not None for request in group):
                with self._transaction(self._conn):
                    for n, request in enumerate(group):
                        if request.work is not None:
                            outcomes[n] = self._member(request.work)
        except BaseException as exc:
            for request in group:
                _fail(request, exc, self.translate)
            if not isinstance(exc, Exception):
                raise
            return
        for request, (ok, value) in zip(group, outcomes, strict=True):
            if ok:
                request.future.set_result(value)
            else:
                _fail(request, value, self.translate)

    def _member(self, work: Work) -> tuple[bool, Any]:
        conn = self._conn
        conn.execute("SAVEPOINT member")
        try:
            value = work(conn)
        except Exception as exc:
            if self._fatal(exc):
                raise
            try:
                conn.execute("ROLLBACK TO member")
                conn.execute("RELEASE member")
            except sqlite3.Error:  # SQLite ended the whole transaction: the group fails
                raise exc from None
            return False, exc
        conn.execute("RELEASE member")
        return True, value


def _fail(request: _Request, exc: BaseException, translate: Callable[[BaseException],
          BaseException] = lambda exc: exc) -> None:
    exc = translate(exc)
    if request.on_error is not None:
        request.on_error(exc)
    if not request.future.done():
        request.future.set_exception(exc)


class ReaderPool:
    """Up to `size` read-only connections to one file, each used by one thread at a time."""

    def __init__(self, path: Path, busy_timeout: float, size: int = 16) -> None:
        self._path = path
        self._timeout = busy_timeout
        self._size = size
        self._idle: list[sqlite3.Connection] = []
        self._open = 0
        self._closed = False
        self._ready = threading.Condition()

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        conn = self._take()
        try:
            yield conn
        finally:
            with self._ready:
                if self._closed:
                    self._open -= 1
                    conn.close()
                else:
                    self._idle.append(conn)
                    self._ready.notify()

    def _take(self) -> sqlite3.Connection:
        with self._ready:
            while not self._idle and self._open >= self._size:
                self._ready.wait()
            if self._idle:
                return self._idle.pop()
            self._open += 1
        try:
            conn = sqlite3.connect(self._path, timeout=self._timeout, isolation_level=None,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            conn.execute("PRAGMA query_only = ON")
        except BaseException:
            with self._ready:
                self._open -= 1
                self._ready.notify()
            raise
        return conn

    def close(self) -> None:
        """Close the idle connections now and the busy ones when they are given back."""
        with self._ready:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
        for conn in idle:
            conn.close()


async def wait(future: Future[T]) -> T:
    """The future's result; like a worker-thread call, a cancelled caller still waits
    for the write to finish (it is never abandoned half-way), then sees the cancellation.
    Within a turn's store budget the caller stops waiting when the budget ends (the
    write goes on, and lands or fails on its own: its outcome is unknown to the caller)."""
    with store_call(math.inf) as until:
        left = None if until == math.inf else max(0.0, until - time.monotonic())
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            try:
                return await anyio.to_thread.run_sync(future.result, left)
            except FutureTimeout:
                raise _still_waiting() from None
        wrapped = asyncio.wrap_future(future)
        wrapped.add_done_callback(_retrieved)  # the result is read from `future` below
        with anyio.CancelScope(shield=True):
            await asyncio.wait([wrapped], timeout=left)
        if not future.done():
            raise _still_waiting()
        return future.result()


def _retrieved(wrapped: asyncio.Future[Any]) -> None:
    """Mark the asyncio copy's failure as seen, so that asyncio does not log it again
    ("Future exception was never retrieved") once the caller has raised it already."""
    if not wrapped.cancelled():
        wrapped.exception()


def _still_waiting() -> HooklineError:
    return HooklineError(ErrorKind.temporary, "The write is still waiting for the tape store; "
                                              "whether it is stored is unknown.")
