"""Which plugin answered which hook, and what `on_error` was told: assertions for tests.

Both are built on the kernel's own machinery, so they see what the framework really did:
`HookTrace` reads the dispatch trace (`runtime.tracing()`, docs/dispatch.md#tracing) and
`capture_errors` registers an ordinary `on_error` observer.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hookline.kernel import DispatchTrace, Framework, Registry, TraceRecord, hookimpl

__all__ = ["ErrorCapture", "ErrorReport", "HookTrace", "capture_errors", "trace_hooks"]

_NO_ANSWER = repr(None)
_CAPTURE_PREFIX = "hookline.testing.errors-"
"""Names of `capture_errors` observers: left out of every `HookTrace`."""
_names = itertools.count(1)


class HookTrace:
    """The implementation calls of a dispatch trace, with questions a test asks of them.

    Every implementation call is recorded: the compiled plans', the slow paths'
    (`call_each`, `notify_error`) and the interception hooks' (see
    docs/dispatch-tracing.md). Values are short reprs, so "answered" means "returned
    something other than None".
    """

    def __init__(self, records: Sequence[TraceRecord] = (), registry: Registry | None = None
                 ) -> None:
        self.records: list[TraceRecord] = [
            record for record in records if not record.plugin.startswith(_CAPTURE_PREFIX)]
        self.registry = registry
        """Where the hook and plugin names a question gives are checked (None: not)."""

    def __iter__(self) -> Iterator[TraceRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return f"HookTrace({len(self.records)} calls)"

    def format(self) -> str:
        """One aligned line per call, as `DispatchTrace.format()`."""
        return "\n".join(record.format() for record in self.records) or "(no hook calls)"

    def for_hook(self, hook: str) -> list[TraceRecord]:
        self._check_name(hook, self.registry.hook_names() if self.registry else None, "hook")
        return [record for record in self.records if record.hook == hook]

    def _check_plugin(self, plugin: str) -> None:
        names = [name for name, _ in self.registry.list_name_plugin()] if self.registry else None
        self._check_name(plugin, names, "plugin")

    @staticmethod
    def _check_name(name: str, known: Sequence[str] | None, what: str) -> None:
        """A misspelt name must fail the assertion, not pass it for want of calls."""
        if known is None or name in known:
            return
        import difflib

        close = difflib.get_close_matches(name, list(known), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise AssertionError(f"no {what} is named {name!r} on this framework{hint}")

    def hooks(self) -> list[str]:
        """The hooks that ran, in the order they first ran."""
        return list(dict.fromkeys(record.hook for record in self.records))

    def calls(self, hook: str) -> list[str]:
        """The plugins whose implementation of `hook` ran, in call order (repeats kept:
        a hook dispatched twice lists its plugins twice)."""
        return [record.plugin for record in self.for_hook(hook)]

    def answers(self, hook: str) -> list[str]:
        """The plugins whose implementation of `hook` returned something other than None
        and did not raise, in call order."""
        return [record.plugin for record in self.for_hook(hook)
                if record.error is None and record.value != _NO_ANSWER]

    def answered_by(self, hook: str) -> str | None:
        """The plugin that answered `hook` (the first that returned a value), or None."""
        answers = self.answers(hook)
        return answers[0] if answers else None

    def value(self, hook: str, plugin: str) -> str | None:
        """The short repr of what `plugin` last returned for `hook`, or None if it did not
        run or raised."""
        self._check_plugin(plugin)
        for record in reversed(self.for_hook(hook)):
            if record.plugin == plugin and record.error is None:
                return record.value
        return None

    def assert_answered(self, hook: str, plugin: str) -> None:
        """Fail unless `plugin` is the first plugin that answered `hook`."""
        self._check_plugin(plugin)
        answered = self.answered_by(hook)
        if answered != plugin:
            raise AssertionError(
                f"hook {hook!r} was answered by {answered!r}, not {plugin!r}; calls: "
                f"{self._describe(hook)}")

    def assert_calls(self, hook: str, plugins: Sequence[str]) -> None:
        """Fail unless the implementations of `hook` ran for exactly `plugins`, in order."""
        calls = self.calls(hook)
        if calls != list(plugins):
            raise AssertionError(
                f"hook {hook!r} ran {calls!r}, expected {list(plugins)!r}; calls: "
                f"{self._describe(hook)}")

    def assert_not_called(self, hook: str, plugin: str | None = None) -> None:
        """Fail if `hook` ran at all (or, with `plugin`, if that plugin's implementation ran)."""
        if plugin is not None:
            self._check_plugin(plugin)
        calls = self.calls(hook)
        if (plugin is None and calls) or (plugin is not None and plugin in calls):
            who = "" if plugin is None else f" for plugin {plugin!r}"
            raise AssertionError(f"hook {hook!r} ran{who}: {self._describe(hook)}")

    def _describe(self, hook: str) -> str:
        records = self.for_hook(hook)
        if not records:
            ran = ", ".join(self.hooks()) or "none"
            return f"none (hooks that ran: {ran})"
        return "; ".join(
            f"{record.plugin} ({record.function}) "
            + (f"raised {record.error}" if record.error else f"-> {record.value}")
            for record in records)


@contextmanager
def trace_hooks(framework: Framework) -> Iterator[HookTrace]:
    """Record every plan dispatch on `framework` while the block runs.

    Inside another trace (an outer `runtime.tracing()` or `trace_hooks`) it adds no
    tracer of its own: the outer one keeps recording, and this block gets the calls
    made while it ran.
    """
    tracer = framework.registry.tracer
    result = HookTrace(registry=framework.registry)
    if isinstance(tracer, DispatchTrace):
        start = len(tracer.records)
        try:
            yield result
        finally:
            result.records[:] = HookTrace(tracer.records[start:]).records
        return
    if tracer is not None:  # someone else's tracer: leave it alone, record nothing
        yield result
        return
    with framework.runtime.tracing() as trace:
        try:
            yield result
        finally:
            result.records[:] = HookTrace(trace.records).records


@dataclass(frozen=True)
class ErrorReport:
    """One `on_error` call: where it failed, the exception and the envelope (or None)."""

    stage: str
    error: BaseException
    message: Any = None

    def __str__(self) -> str:
        return f"{self.stage}: {type(self.error).__name__}: {self.error}"


class ErrorCapture:
    """An `on_error` observer that keeps every report; a list of `ErrorReport`s."""

    def __init__(self) -> None:
        self.reports: list[ErrorReport] = []

    @hookimpl
    def on_error(self, stage: str, error: Exception, message: Any) -> None:
        self.reports.append(ErrorReport(stage, error, message))

    def __iter__(self) -> Iterator[ErrorReport]:
        return iter(self.reports)

    def __len__(self) -> int:
        return len(self.reports)

    def __getitem__(self, index: int) -> ErrorReport:
        return self.reports[index]

    def __repr__(self) -> str:
        return f"ErrorCapture({[str(report) for report in self.reports]!r})"

    def stages(self) -> list[str]:
        return [report.stage for report in self.reports]


@contextmanager
def capture_errors(framework: Framework) -> Iterator[ErrorCapture]:
    """Collect what `on_error` is told while the block runs.

    The observer is a plugin registered for the block only (under a
    `hookline.testing.errors-<n>` name) and unregistered afterwards. Every observer gets
    every report, so registering it changes nothing for the plugins under test.
    """
    capture = ErrorCapture()
    name = framework.registry.register(capture, name=f"{_CAPTURE_PREFIX}{next(_names)}")
    try:
        yield capture
    finally:
        framework.registry.unregister(name)
