"""``HookRuntime``: dispatch primitives over the registry's precomputed plans.

Ordinary dispatch propagates an implementation's exception unchanged and stops. The
``notify`` primitives are for observers: each implementation is isolated, so an
observer's exception is logged and the next one runs.

A hook name no spec declares is dispatched like a hook without implementations (the
reference's behaviour: nothing happens, None or ``[]`` comes back). A strict runtime
(``HookRuntime(registry, strict=True)``) raises ``UnknownHookError`` for it instead, with
the closest declared names, so a misspelled dispatch site fails where it is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .errors import UnknownHookError, get_logger
from .impl import HookImpl
from .plan import is_awaitable, usable_sync
from .registry import Registry
from .report import HookReport, build_report
from .trace import DispatchTrace


class HookRuntime:
    """Calls hook implementations in execution order, passing each only what it declares."""

    def __init__(self, registry: Registry, *, strict: bool = False) -> None:
        self.registry = registry
        self._plans = registry.plans  # the same dict, updated in place by the registry
        self.strict = strict
        if strict:
            # Checking instances in place of the primitives: a runtime that is not strict
            # pays nothing for the check.
            for primitive in _PRIMITIVES:
                setattr(self, primitive, self._checked(getattr(self, primitive)))

    def _checked(self, primitive: Callable[..., Any]) -> Callable[..., Any]:
        specs = self.registry.specs

        def checked(hook_name: str, /, *args: Any, **kwargs: Any) -> Any:
            if hook_name not in specs:
                raise UnknownHookError(hook_name, list(specs))
            return primitive(hook_name, *args, **kwargs)

        checked.__name__ = checked.__qualname__ = primitive.__name__
        checked.__doc__ = primitive.__doc__
        return checked

    # The async primitives return the plan's coroutine instead of wrapping it in another
    # one: awaiting them is the same, and each dispatch saves a coroutine frame.

    def call_first(self, hook_name: str, /, **kwargs: Any) -> Awaitable[Any]:
        """First non-None result in execution order; awaitable results are awaited."""
        plan = self._plans.get(hook_name)
        return _nothing() if plan is None else plan.first(kwargs)

    def call_many(self, hook_name: str, /, **kwargs: Any) -> Awaitable[list[Any]]:
        """Every result in execution order, None included; awaitables are awaited."""
        plan = self._plans.get(hook_name)
        return _no_results() if plan is None else plan.many(kwargs)

    def call_first_sync(self, hook_name: str, /, **kwargs: Any) -> Any:
        """Like ``call_first`` without awaiting: awaitable results are skipped with a warning."""
        plan = self._plans.get(hook_name)
        return None if plan is None else plan.first_sync(kwargs)

    def call_many_sync(self, hook_name: str, /, **kwargs: Any) -> list[Any]:
        """Like ``call_many`` without awaiting: awaitable results are skipped with a warning."""
        plan = self._plans.get(hook_name)
        return [] if plan is None else plan.many_sync(kwargs)

    # Slow paths: each value paired with the implementation that returned it, for call
    # sites that must name the plugin in an error. Not for per-call hot paths (but
    # call_first_each, compiled). They call through the registry's tracer while one is
    # set, so a trace sees them too.

    async def call_each(self, hook_name: str, /, **kwargs: Any) -> list[tuple[HookImpl, Any]]:
        """``(implementation, awaited value)`` for every implementation, in execution order."""
        pairs: list[tuple[HookImpl, Any]] = []
        for impl in self.registry.hook_impls(hook_name):
            value = impl.call(kwargs, self.registry.tracer)
            if is_awaitable(value):
                value = await value
            pairs.append((impl, value))
        return pairs

    def call_each_sync(self, hook_name: str, /, **kwargs: Any) -> list[tuple[HookImpl, Any]]:
        """Sync ``call_each``: awaitable values are skipped with a warning."""
        tracer = self.registry.tracer
        return [(impl, value) for impl in self.registry.hook_impls(hook_name)
                if usable_sync(hook_name, impl.plugin_name, value := impl.call(kwargs, tracer))]

    def call_first_each(
        self, hook_name: str, /, **kwargs: Any
    ) -> Awaitable[tuple[HookImpl | None, Any]]:
        """``call_first`` with the implementation that answered (None, None when none did).
        Compiled like ``call_first`` (the plan's ``first_each``): turns call it."""
        plan = self._plans.get(hook_name)
        return _no_answer() if plan is None else plan.first_each(kwargs)

    def call_first_each_sync(
        self, hook_name: str, /, **kwargs: Any
    ) -> tuple[HookImpl | None, Any]:
        """``call_first_sync`` with the implementation that answered."""
        for impl in self.registry.hook_impls(hook_name):
            value = impl.call(kwargs, self.registry.tracer)
            if value is not None and usable_sync(hook_name, impl.plugin_name, value):
                return impl, value
        return None, None

    async def notify(self, hook_name: str, context: str = "", /, **kwargs: Any) -> None:
        """Call every implementation, each isolated: an ``Exception`` it raises (or its
        awaitable raises) is logged as ``hook.<hook>_failed <context> adapter=<plugin>``
        with its traceback, and the next one runs. Values are ignored; BaseExceptions such
        as cancellation propagate."""
        for impl in self.registry.hook_impls(hook_name):
            try:
                value = impl.call(kwargs, self.registry.tracer)
                if is_awaitable(value):
                    await value
            except Exception:
                _observer_failed(hook_name, context, impl)

    def notify_sync(self, hook_name: str, context: str = "", /, **kwargs: Any) -> None:
        """Sync ``notify``: awaitable results are skipped with a warning."""
        for impl in self.registry.hook_impls(hook_name):
            try:
                value = impl.call(kwargs, self.registry.tracer)
            except Exception:
                _observer_failed(hook_name, context, impl)
                continue
            usable_sync(hook_name, impl.plugin_name, value)

    def hook_report(self) -> HookReport:
        """Every hook with its implementations in execution and stored order."""
        return build_report(self.registry)

    @contextmanager
    def tracing(self, trace: DispatchTrace | None = None) -> Iterator[DispatchTrace]:
        """Record every dispatch while the block runs; plans are swapped back afterwards."""
        previous = self.registry.tracer
        trace = trace if trace is not None else DispatchTrace()
        self.registry.set_tracer(trace)
        try:
            yield trace
        finally:
            self.registry.set_tracer(previous)


_PRIMITIVES = ("call_first", "call_many", "call_first_sync", "call_many_sync", "call_each",
               "call_each_sync", "call_first_each", "call_first_each_sync", "notify",
               "notify_sync")
"""The dispatch primitives a strict runtime checks the hook name of."""


def _observer_failed(hook_name: str, context: str, impl: HookImpl) -> None:
    # Isolated by design (the next observer runs): a warning with the traceback, as the
    # reference logs a failing on_error observer.
    get_logger("runtime").warning(
        "hook.%s_failed %sadapter=%s", hook_name, f"{context} " if context else "",
        impl.plugin_name, exc_info=True,
    )


async def _nothing() -> None:
    return None


async def _no_results() -> list[Any]:
    return []


async def _no_answer() -> tuple[None, None]:
    return None, None
