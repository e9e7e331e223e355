"""The per-session environment cache of a ``Framework``, bounded in size and idle time.

A long-running host (a gateway) sees sessions come and go; an environment cached for each
one forever grows without limit. The cache keeps at most ``max_size`` environments and
forgets those nobody asked for during ``idle_seconds``, least recently used first. A
session held by a running turn (``hold``) is never evicted: while every cached session is
held the cache may grow past its bound, and it shrinks back on the next eviction.

The cache only decides; it never awaits. Whoever evicts gets the evicted environments
back and closes them (the framework does, inside a ``running()`` scope).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

from ..environment import Environment

__all__ = [
    "DEFAULT_ENVIRONMENT_CACHE_SIZE",
    "DEFAULT_ENVIRONMENT_IDLE_SECONDS",
    "EnvironmentCache",
]

DEFAULT_ENVIRONMENT_CACHE_SIZE = 256
"""Most environments kept at once (sessions held by running turns may exceed it)."""

DEFAULT_ENVIRONMENT_IDLE_SECONDS = 900.0
"""An environment not requested for this long (15 minutes) is closed and forgotten."""

Evicted = list[tuple[str, Environment | None]]


class EnvironmentCache:
    """Session id -> environment (None included), least recently used first."""

    def __init__(self, max_size: int = DEFAULT_ENVIRONMENT_CACHE_SIZE,
                 idle_seconds: float = DEFAULT_ENVIRONMENT_IDLE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_size < 1:
            raise ValueError(f"max_size must be at least 1, got {max_size}")
        if idle_seconds <= 0:
            raise ValueError(f"idle_seconds must be positive, got {idle_seconds}")
        self.max_size = max_size
        self.idle_seconds = idle_seconds
        self.clock = clock
        self._entries: OrderedDict[str, tuple[Environment | None, float]] = OrderedDict()
        self._holders: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._entries

    def sessions(self) -> list[str]:
        """Cached session ids, least recently used first."""
        return list(self._entries)

    def get(self, session_id: str, default: Any = None) -> Any:
        """The cached environment (a use: it becomes the most recent, or, while the
        session is held, when its hold ends), else `default`."""
        entry = self._entries.get(session_id)
        if entry is None:
            return default
        if session_id not in self._holders:  # a held one is touched when let go
            self._touch(session_id, entry[0])
        return entry[0]

    def put(self, session_id: str, environment: Environment | None) -> Evicted:
        """Cache an environment; return what had to go to respect the bounds."""
        self._touch(session_id, environment)
        return self.evict()

    def hold(self, session_id: str) -> AbstractContextManager[None]:
        """Keep the session's environment (present or future) from eviction meanwhile
        (a context manager; a turn calls `take` and `let_go` itself, one object less)."""
        return _Hold(self, session_id)

    def take(self, session_id: str) -> None:
        """Hold the session's environment until a matching `let_go`."""
        holders = self._holders
        holders[session_id] = holders.get(session_id, 0) + 1

    def let_go(self, session_id: str) -> None:
        """End one `take`; the end of the last one is a use of the environment."""
        count = self._holders.pop(session_id) - 1
        if count:
            self._holders[session_id] = count
        entry = self._entries.get(session_id)
        if entry is not None:  # the end of a turn is a use: idle time starts now
            self._touch(session_id, entry[0])

    def held(self, session_id: str) -> bool:
        return session_id in self._holders

    def evict(self) -> Evicted:
        """Remove the idle environments, then the least recently used ones over the bound;
        held sessions stay. Returns the removed (session id, environment) pairs."""
        deadline = self.clock() - self.idle_seconds
        evicted: Evicted = []
        for session_id, (environment, last_used) in list(self._entries.items()):
            over = len(self._entries) > self.max_size
            if not over and last_used > deadline:
                break  # the rest are newer and within the bound
            if session_id in self._holders:
                continue
            del self._entries[session_id]
            evicted.append((session_id, environment))
        return evicted

    def drain(self) -> Evicted:
        """Remove and return everything (the end of a scope)."""
        evicted = [(session_id, entry[0]) for session_id, entry in self._entries.items()]
        self._entries.clear()
        return evicted

    def _touch(self, session_id: str, environment: Environment | None) -> None:
        self._entries[session_id] = (environment, self.clock())
        self._entries.move_to_end(session_id)


class _Hold(AbstractContextManager[None]):
    __slots__ = ("cache", "session_id")

    def __init__(self, cache: EnvironmentCache, session_id: str) -> None:
        self.cache = cache
        self.session_id = session_id

    def __enter__(self) -> None:
        self.cache.take(self.session_id)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cache.let_go(self.session_id)
