"""A span per hook dispatch: the kernel's `DispatchObserver`, set as the registry's tracer.

Setting it rebuilds every plan with each implementation wrapped (to learn which one
answered or raised) and each compiled caller wrapped in a span; taking it off rebuilds
the plain plans, so without telemetry dispatch carries no check at all. Calls that take
the kernel's slow paths (`call_each`, `notify`, the interception hooks) get a span per
implementation call instead.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from hookline.kernel._dispatch import HookImpl

from .metrics import Metrics

HOOK_SPAN = "hookline.hook"
"""Span name prefix: `hookline.hook <hook name>`."""


class _Dispatch:
    """What the implementation wrappers tell the dispatch span that encloses them."""

    __slots__ = ("failed", "hook", "last")

    def __init__(self, hook: str) -> None:
        self.hook = hook
        self.last: HookImpl | None = None
        self.failed: HookImpl | None = None


_current: contextvars.ContextVar[_Dispatch | None] = contextvars.ContextVar(
    "hookline_telemetry_dispatch", default=None)
_counted: contextvars.ContextVar[BaseException | None] = contextvars.ContextVar(
    "hookline_telemetry_counted", default=None)
"""The last failure counted: an exception passing out through the enclosing dispatches
is recorded on each of their spans but counted once, for the hook where it was raised."""


class SpanObserver:
    """Spans for dispatches on `tracer`; failures also counted in `metrics`."""

    def __init__(self, tracer: trace.Tracer, metrics: Metrics) -> None:
        self.tracer = tracer
        self.metrics = metrics

    # -- the whole dispatch (compiled plans) -----------------------------------------

    def wrap_dispatch(self, hook_name: str, kind: str, impls: tuple[HookImpl, ...],
                      caller: Callable[..., Any]) -> Callable[..., Any]:
        attributes = {
            "hookline.hook.name": hook_name,
            "hookline.hook.kind": kind,
            "hookline.hook.implementations": [impl.plugin_name for impl in impls],
        }
        name = f"{HOOK_SPAN} {hook_name}"
        answers = kind in ("first", "first_sync")
        start = self.tracer.start_as_current_span

        if kind in ("first", "many", "first_each"):  # first_each: (impl, value) or (None, None)

            async def traced_async(kwargs: dict[str, Any]) -> Any:
                record = _Dispatch(hook_name)
                with start(name, attributes=attributes, record_exception=False,
                           set_status_on_exception=False) as span:
                    token = _current.set(record)
                    try:
                        value = await caller(kwargs)
                    except BaseException as exc:
                        self._failed(span, record, exc)
                        raise
                    finally:
                        _current.reset(token)
                    if answers:
                        _answered(span, record, value)
                    elif kind == "first_each" and value[0] is not None:
                        _answered_alone(span, value[0], value[1])
                    return value

            return traced_async

        def traced(kwargs: dict[str, Any]) -> Any:
            record = _Dispatch(hook_name)
            with start(name, attributes=attributes, record_exception=False,
                       set_status_on_exception=False) as span:
                token = _current.set(record)
                try:
                    value = caller(kwargs)
                except BaseException as exc:
                    self._failed(span, record, exc)
                    raise
                finally:
                    _current.reset(token)
                if answers:
                    _answered(span, record, value)
                return value

        return traced

    # -- one implementation ----------------------------------------------------------

    def wrap(self, impl: HookImpl) -> Callable[..., Any]:
        """Inside a dispatch span: note the call there. Alone (a slow path): its own span."""
        function = impl.function
        if impl.is_async:

            @functools.wraps(function)
            async def wrapped_async(**kwargs: Any) -> Any:
                record = _current.get()
                if record is not None and record.hook == impl.hook_name:
                    record.last = impl
                    try:
                        return await function(**kwargs)
                    except BaseException:
                        record.failed = impl
                        raise
                with self._alone(impl) as span:
                    try:
                        value = await function(**kwargs)
                    except BaseException as exc:
                        self._impl_failed(span, impl, exc)
                        raise
                    _answered_alone(span, impl, value)
                    return value

            return wrapped_async

        @functools.wraps(function)
        def wrapped(**kwargs: Any) -> Any:
            record = _current.get()
            if record is not None and record.hook == impl.hook_name:
                record.last = impl
                try:
                    return function(**kwargs)
                except BaseException:
                    record.failed = impl
                    raise
            with self._alone(impl) as span:
                try:
                    value = function(**kwargs)
                except BaseException as exc:
                    self._impl_failed(span, impl, exc)
                    raise
                _answered_alone(span, impl, value)
                return value

        return wrapped

    def _alone(self, impl: HookImpl) -> Any:
        attributes = {
            "hookline.hook.name": impl.hook_name,
            "hookline.hook.kind": "each",
            "hookline.hook.implementations": [impl.plugin_name],
        }
        return self.tracer.start_as_current_span(
            f"{HOOK_SPAN} {impl.hook_name}", attributes=attributes, record_exception=False,
            set_status_on_exception=False)

    # -- failures --------------------------------------------------------------------

    def _failed(self, span: trace.Span, record: _Dispatch, error: BaseException) -> None:
        culprit = record.failed or record.last
        if culprit is None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, _describe(error)))
            return
        self._impl_failed(span, culprit, error)

    def _impl_failed(self, span: trace.Span, impl: HookImpl, error: BaseException) -> None:
        span.set_attribute("hookline.hook.failed_plugin", impl.plugin_name)
        span.set_attribute("hookline.hook.failed_function", impl.function_name)
        span.record_exception(error, attributes={"hookline.plugin": impl.plugin_name})
        span.set_status(Status(StatusCode.ERROR, _describe(error)))
        if isinstance(error, Exception) and _counted.get() is not error:
            _counted.set(error)  # cancellation is no plugin's failure, and counted once
            self.metrics.hook_failure(impl.plugin_name, impl.hook_name)


def _answered(span: trace.Span, record: _Dispatch, value: Any) -> None:
    if value is not None and record.last is not None:
        span.set_attribute("hookline.hook.answered_by", record.last.plugin_name)


def _answered_alone(span: trace.Span, impl: HookImpl, value: Any) -> None:
    if value is not None:
        span.set_attribute("hookline.hook.answered_by", impl.plugin_name)


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"
