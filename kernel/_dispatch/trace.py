"""Opt-in dispatch tracing: which implementation ran, what it returned, how long it took.

Enabling a trace rebuilds the plans with each implementation wrapped by a recorder, so
the untraced path carries no check at all.
"""

from __future__ import annotations

import functools
import reprlib
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from .impl import HookImpl

_summary = reprlib.Repr()
_summary.maxstring = 60
_summary.maxother = 60


class TraceRecord(NamedTuple):
    """One implementation call seen by a trace."""

    hook: str
    plugin: str
    function: str
    value: str
    """Short repr of the returned value (``-`` when it raised)."""
    error: str | None
    """``Type: message`` of the exception it raised, or None."""
    duration_ms: float

    def format(self) -> str:
        outcome = f"raised {self.error}" if self.error else f"-> {self.value}"
        return (
            f"{self.hook:<22} {self.plugin:<16} {self.function:<32} "
            f"{self.duration_ms:8.3f} ms {outcome}"
        )


class DispatchTrace:
    """Collects ``TraceRecord``s in call order."""

    def __init__(self) -> None:
        self.records: list[TraceRecord] = []

    def __iter__(self) -> Iterator[TraceRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def clear(self) -> None:
        self.records.clear()

    def for_hook(self, hook: str) -> list[TraceRecord]:
        return [record for record in self.records if record.hook == hook]

    def format(self) -> str:
        return "\n".join(record.format() for record in self.records)

    def _record(
        self, impl: HookImpl, value: Any, error: BaseException | None, start: float
    ) -> None:
        self.records.append(
            TraceRecord(
                hook=impl.hook_name,
                plugin=impl.plugin_name,
                function=impl.function_name,
                value="-" if error is not None else _summary.repr(value),
                error=None if error is None else f"{type(error).__name__}: {error}",
                duration_ms=(time.perf_counter() - start) * 1000.0,
            )
        )

    def wrap(self, impl: HookImpl) -> Callable[..., Any]:
        """A recorder around ``impl.function`` with the same sync/async nature."""
        function = impl.function
        if impl.is_async:

            @functools.wraps(function)
            async def traced_async(**kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    value = await function(**kwargs)
                except BaseException as exc:
                    self._record(impl, None, exc, start)
                    raise
                self._record(impl, value, None, start)
                return value

            return traced_async

        @functools.wraps(function)
        def traced(**kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                value = function(**kwargs)
            except BaseException as exc:
                self._record(impl, None, exc, start)
                raise
            self._record(impl, value, None, start)
            return value

        return traced
