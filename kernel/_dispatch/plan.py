"""Execution plans: a hook's implementations in order, compiled into direct callers.

A plan is built when plugins change. Its four callers (``first``, ``many``,
``first_sync``, ``many_sync``) are generated on first use as straight-line Python: one
direct keyword call per implementation with only the arguments that implementation
declares. A call therefore does no sorting, no signature inspection and no per-argument
filtering, which keeps dispatch close to a hand-written loop. The generated source is
kept on the plan (``plan.source(kind)``) so it can be read when debugging.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import missing_argument

if TYPE_CHECKING:
    from .registry import HookImpl

logger = logging.getLogger(__name__.rpartition(".")[0] + ".runtime")

KINDS = ("first", "many", "first_sync", "many_sync")

# Results of these types are never awaitable; checking the class first skips isawaitable.
_PLAIN = frozenset({type(None), str, int, float, bool, bytes, dict, list, tuple, set})

_SKIPPED: Any = object()
"""Stands for a skipped awaitable in a sync collecting caller, filtered out at the end."""


def is_awaitable(value: Any) -> bool:
    """``inspect.isawaitable``, answered at once for the common plain result types."""
    return value.__class__ not in _PLAIN and inspect.isawaitable(value)


def usable_sync(hook_name: str, plugin_name: str | None, value: Any) -> bool:
    """On a sync path: False (after the warning and closing it) for an awaitable value."""
    if is_awaitable(value):
        skip_awaitable(hook_name, plugin_name, value)
        return False
    return True


def skip_awaitable(hook_name: str, plugin_name: str | None, value: Any) -> None:
    """Log a skipped awaitable on a sync path and close it so no warning leaks."""
    logger.warning(
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
        tracer: Any = None,
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

    def __getattr__(self, kind: str) -> Callable[..., Any]:
        # Called only while the caller is not compiled yet; later lookups hit __dict__.
        if kind not in KINDS:
            raise AttributeError(kind)
        caller = self._compile(kind)
        setattr(self, kind, caller)
        return caller

    def source(self, kind: str) -> str:
        """The generated source of one caller (compiling it if needed)."""
        getattr(self, kind)
        return self._sources[kind]

    def _compile(self, kind: str) -> Callable[..., Any]:
        is_async = kind in ("first", "many")
        collect = kind.startswith("many")
        namespace: dict[str, Any] = {
            "_PLAIN": _PLAIN,
            "_isawaitable": inspect.isawaitable,
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
            args = ", ".join(f"{name}={local[name]}" for name in impl.argnames)
            call = f"_f{index}({args})"
            lines += _step(index, call, impl.is_async, is_async, collect)
        if collect:
            # One list display at the end is cheaper than an append per implementation.
            values = ", ".join(f"_v{index}" for index in range(len(self.impls)))
            if not is_async:
                lines.append(f"    if _skipped: return [_v for _v in ({values},) "
                             "if _v is not _SKIPPED]")
            lines.append(f"    return [{values}]")
        else:
            lines.append("    return None")
        source = "\n".join(lines) + "\n"
        self._sources[kind] = source
        code = compile(source, f"<hookline plan {self.hook_name}.{kind}>", "exec")
        exec(code, namespace)
        return namespace[kind]

    def _skip(self, index: int, value: Any) -> None:
        skip_awaitable(self.hook_name, self.impls[index].plugin_name, value)

    def _missing(self, name: str) -> TypeError:
        users = [impl.describe() for impl in self.impls if name in impl.argnames]
        return missing_argument(self.hook_name, name, users)


def _step(index: int, call: str, impl_async: bool, path_async: bool, collect: bool) -> list[str]:
    """Source lines for one implementation: call, handle awaitables, keep or return.

    Collecting callers keep each value in ``_v<index>`` and build the list at the end.
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
    return lines if collect else [*lines, f"    if {v} is not None: return {v}"]
