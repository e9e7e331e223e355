"""Execution plans: a hook's implementations in order, compiled into direct callers.

A plan is built when plugins change. Its four callers (``first``, ``many``,
``first_sync``, ``many_sync``: the dispatch kinds) are generated on first use as
straight-line Python: one direct keyword call per implementation with only the arguments
that implementation declares. A call therefore does no sorting, no signature inspection
and no per-argument filtering, which keeps dispatch close to a hand-written loop. The
generated source is kept on the plan (``plan.source(kind)``) so it can be read when
debugging.
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from .errors import get_logger, missing_argument
from .impl import HookImpl, Tracer
from .specs import DISPATCH_KINDS, DispatchKind

# Results of these types are never awaitable; checking the class first skips the test.
_PLAIN = frozenset({type(None), str, int, float, bool, bytes, dict, list, tuple, set})

_ITERABLE_COROUTINE = 0x100
"""``inspect.CO_ITERABLE_COROUTINE``: a generator-based coroutine (``types.coroutine``)."""

CallerKind = DispatchKind | Literal["first_each"]
_CALLERS: tuple[CallerKind, ...] = (*DISPATCH_KINDS, "first_each")

_SKIPPED: Any = object()
"""Stands for a skipped awaitable in a sync collecting caller, filtered out at the end."""


def isawaitable(value: object) -> bool:
    """``inspect.isawaitable``, without importing ``inspect``: a coroutine, a
    generator-based coroutine, or any object with ``__await__``."""
    return (
        isinstance(value, types.CoroutineType)
        or (isinstance(value, types.GeneratorType)
            and bool(value.gi_code.co_flags & _ITERABLE_COROUTINE))
        or isinstance(value, Awaitable)
    )


def is_awaitable(value: object) -> bool:
    """``isawaitable``, answered at once for the common plain result types."""
    return value.__class__ not in _PLAIN and isawaitable(value)


def usable_sync(hook_name: str, plugin_name: str | None, value: object) -> bool:
    """On a sync path: False (after the warning and closing it) for an awaitable value."""
    if is_awaitable(value):
        skip_awaitable(hook_name, plugin_name, value)
        return False
    return True


def skip_awaitable(hook_name: str, plugin_name: str | None, value: object) -> None:
    """Log a skipped awaitable on a sync path and close it so no warning leaks."""
    get_logger("runtime").warning(
        "hook.async_not_supported hook=%s adapter=%s", hook_name, plugin_name or "<unknown>"
    )
    close = getattr(value, "close", None)
    if callable(close):
        close()


class Plan:
    """One hook's implementations in execution order, with lazily compiled callers."""

    def __init__(
        self,
        hook_name: str,
        impls: tuple[HookImpl, ...],
        params: tuple[str, ...],
        tracer: Tracer | None = None,
    ) -> None:
        self.hook_name = hook_name
        self.impls = impls
        self.tracer = tracer
        used = {name for impl in impls for name in impl.argnames}
        # Spec order first, then any names of an unspecified hook, sorted for stability.
        self.params = tuple(p for p in params if p in used) + tuple(
            sorted(used.difference(params))
        )
        self._sources: dict[str, str] = {}

    # The four callers, as the type checker sees them; at run time each is compiled by
    # __getattr__ on first use and then found in the instance dict.
    first: Callable[[dict[str, Any]], Awaitable[Any]]
    many: Callable[[dict[str, Any]], Awaitable[list[Any]]]
    first_sync: Callable[[dict[str, Any]], Any]
    many_sync: Callable[[dict[str, Any]], list[Any]]
    first_each: Callable[[dict[str, Any]], Awaitable[tuple[HookImpl | None, Any]]]
    """``first`` that also says which implementation answered: ``(implementation,
    value)``, or ``(None, None)``; what ``call_first_each`` runs."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        # Called only while the caller is not compiled yet; later lookups hit __dict__.
        for kind in _CALLERS:
            if name == kind:
                caller = self._compile(kind)
                setattr(self, kind, caller)
                return caller
        raise AttributeError(name)

    def source(self, kind: CallerKind) -> str:
        """The generated source of one caller (compiling it if needed)."""
        getattr(self, kind)
        return self._sources[kind]

    def _compile(self, kind: CallerKind) -> Callable[..., Any]:
        is_async = kind in ("first", "many", "first_each")
        collect = kind.startswith("many")
        indexed = kind == "first_each"
        namespace: dict[str, Any] = {
            "_PLAIN": _PLAIN,
            "_isawaitable": isawaitable,
            "_skip": self._skip,
            "_SKIPPED": _SKIPPED,
            "_missing": self._missing,
        }
        # The caller takes the dispatch's keyword dict as is: no re-packing per call.
        # Arguments live in locals _a0, _a1, ... so no hook parameter name can shadow a
        # name of the generated code.
        local = {param: f"_a{index}" for index, param in enumerate(self.params)}
        lines = [f"{'async ' if is_async else ''}def {kind}(_kwargs):"]
        if self.params:
            lines.append("    try:")
            lines += [f"        {local[p]} = _kwargs[{p!r}]" for p in self.params]
            lines.append("    except KeyError as exc: raise _missing(exc.args[0]) from None")
        if collect and not is_async:
            lines.append("    _skipped = False")
        for index, impl in enumerate(self.impls):
            function = impl.function
            if self.tracer is not None:
                function = self.tracer.wrap(impl)
            namespace[f"_f{index}"] = function
            namespace[f"_i{index}"] = impl
            args = ", ".join(f"{name}={local[name]}" for name in impl.argnames)
            call = f"_f{index}({args})"
            lines += _step(index, call, impl.is_async, is_async, collect, indexed)
        if collect:
            # One list display at the end is cheaper than an append per implementation.
            values = ", ".join(f"_v{index}" for index in range(len(self.impls)))
            if not is_async:
                lines.append(f"    if _skipped: return [_v for _v in ({values},) "
                             "if _v is not _SKIPPED]")
            lines.append(f"    return [{values}]")
        else:
            lines.append("    return None, None" if indexed else "    return None")
        source = "\n".join(lines) + "\n"
        self._sources[kind] = source
        code = compile(source, f"<plan {self.hook_name}.{kind}>", "exec")
        exec(code, namespace)
        caller: Callable[..., Any] = namespace[kind]
        wrap_dispatch = getattr(self.tracer, "wrap_dispatch", None)  # a DispatchObserver
        if wrap_dispatch is not None:
            caller = wrap_dispatch(self.hook_name, kind, self.impls, caller)
        return caller

    def _skip(self, index: int, value: Any) -> None:
        skip_awaitable(self.hook_name, self.impls[index].plugin_name, value)

    def _missing(self, name: str) -> TypeError:
        users = [impl.describe() for impl in self.impls if name in impl.argnames]
        return missing_argument(self.hook_name, name, users)


def _step(index: int, call: str, impl_async: bool, path_async: bool, collect: bool,
          indexed: bool = False) -> list[str]:
    """Source lines for one implementation: call, handle awaitables, keep or return.

    Collecting callers keep each value in ``_v<index>`` and build the list at the end;
    an `indexed` caller returns the implementation (``_i<index>``) with its value.
    """
    v = f"_v{index}" if collect else "_v"
    if path_async and impl_async:
        lines = [f"    {v} = await {call}"]
    elif path_async:
        lines = [
            f"    {v} = {call}",
            f"    if {v} is not None and {v}.__class__ not in _PLAIN and _isawaitable({v}):",
            f"        {v} = await {v}",
        ]
    elif collect:
        # Sync path: an awaitable result is skipped with a warning, never awaited.
        return [
            f"    {v} = {call}",
            f"    if {v} is not None and {v}.__class__ not in _PLAIN and _isawaitable({v}):",
            f"        _skip({index}, {v}); {v} = _SKIPPED; _skipped = True",
        ]
    else:
        return [
            f"    {v} = {call}",
            f"    if {v} is not None:",
            f"        if {v}.__class__ in _PLAIN or not _isawaitable({v}): return {v}",
            f"        _skip({index}, {v})",
        ]
    answer = f"(_i{index}, {v})" if indexed else v
    return lines if collect else [*lines, f"    if {v} is not None: return {answer}"]
