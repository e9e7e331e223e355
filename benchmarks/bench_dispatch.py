"""Cost per dispatch of the kernel's four primitives, against pluggy and a hand-written loop.

The kernel compiles each hook's implementations into straight-line callers so that a
dispatch costs little more than calling the functions by hand. This script checks that
claim on ``load_state(message, session_id)`` with 1, 5 and 20 implementations:

- hookline ``call_first_sync`` / ``call_many_sync`` against pluggy's native hook call on
  the same functions and against a plain loop that calls them with keyword arguments;
- hookline ``call_first`` / ``call_many`` (async implementations) against a plain loop
  that awaits the same functions, both measured inside one running event loop.

Every implementation returns None, so first-style walks run every implementation too.
Variants of one row are timed interleaved (best of several repeats, order rotated) so that
machine noise hits them alike. Not a test: figures are printed, and goal lines say
PASS/MISS without changing the exit status.

    python benchmarks/bench_dispatch.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import platform
import time
import timeit
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pluggy

from hookline.kernel import HOOK_SPECS, HookRuntime, Registry, hookimpl

IMPL_COUNTS = (1, 5, 20)
GOAL_COUNTS = (5, 20)
"""Implementation counts at which the sync goals are judged (1 impl is fixed overhead)."""
SYNC_VS_PLUGGY = 0.5
SYNC_VS_PLAIN = 1.3
ASYNC_VS_PLAIN = 1.5

MESSAGE = {"channel": "bench", "content": "hello"}
SESSION_ID = "bench-session"

# pluggy needs its own marker; marking the same functions with both lets the kernel and
# pluggy dispatch the very same plugin objects.
pluggy_impl = pluggy.HookimplMarker("bench")
pluggy_spec = pluggy.HookspecMarker("bench")


class SyncPlugin:
    """A trivial sync implementation: returns None so that every implementation runs."""

    @hookimpl
    @pluggy_impl
    def load_state(self, message: Any, session_id: str) -> None:
        return None


class AsyncPlugin:
    """The same, as a coroutine function, for the awaiting primitives."""

    @hookimpl
    async def load_state(self, message: Any, session_id: str) -> None:
        return None


class ManySpec:
    @pluggy_spec
    def load_state(self, message: Any, session_id: str) -> Any:
        """All results (pluggy's default), for comparison with call_many_sync."""


class FirstSpec:
    @pluggy_spec(firstresult=True)
    def load_state(self, message: Any, session_id: str) -> Any:
        """First non-None result, for comparison with call_first_sync."""


# -- plain baselines: what a hand-written dispatcher over the same functions does ----------
# They are called the way a hook is called (arguments by keyword) and call each function
# with keyword arguments. Unlike the kernel they do not check results for awaitables,
# which the contract requires on the sync paths: that check is part of the measured cost.


def plain_many(funcs: Sequence[Callable[..., Any]], message: Any, session_id: str) -> list[Any]:
    results = []
    for function in funcs:
        results.append(function(message=message, session_id=session_id))
    return results


def plain_first(funcs: Sequence[Callable[..., Any]], message: Any, session_id: str) -> Any:
    for function in funcs:
        value = function(message=message, session_id=session_id)
        if value is not None:
            return value
    return None


async def plain_many_async(
    funcs: Sequence[Callable[..., Awaitable[Any]]], message: Any, session_id: str
) -> list[Any]:
    results = []
    for function in funcs:
        results.append(await function(message=message, session_id=session_id))
    return results


async def plain_first_async(
    funcs: Sequence[Callable[..., Awaitable[Any]]], message: Any, session_id: str
) -> Any:
    for function in funcs:
        value = await function(message=message, session_id=session_id)
        if value is not None:
            return value
    return None


# -- setup -------------------------------------------------------------------------------


@dataclass
class Setup:
    """Everything one implementation count needs, sharing the same plugin objects."""

    runtime: HookRuntime
    funcs: list[Callable[..., Any]]
    pluggy_many: pluggy.PluginManager
    pluggy_first: pluggy.PluginManager
    async_runtime: HookRuntime
    async_funcs: list[Callable[..., Awaitable[Any]]]


def build(count: int) -> Setup:
    registry, async_registry = Registry(HOOK_SPECS), Registry(HOOK_SPECS)
    pluggy_many, pluggy_first = pluggy.PluginManager("bench"), pluggy.PluginManager("bench")
    pluggy_many.add_hookspecs(ManySpec)
    pluggy_first.add_hookspecs(FirstSpec)
    for index in range(count):
        plugin = SyncPlugin()
        registry.register(plugin, f"p{index}")
        pluggy_many.register(plugin, f"p{index}")
        pluggy_first.register(plugin, f"p{index}")
        async_registry.register(AsyncPlugin(), f"p{index}")
    # The plain loops call the kernel's own bound methods, in the kernel's order.
    funcs = [impl.function for impl in registry.hook_impls("load_state")]
    async_funcs = [impl.function for impl in async_registry.hook_impls("load_state")]
    assert len(funcs) == len(async_funcs) == count
    return Setup(HookRuntime(registry), funcs, pluggy_many, pluggy_first,
                 HookRuntime(async_registry), async_funcs)


# -- timing ------------------------------------------------------------------------------

SYNC_STATEMENTS = {
    "call_first_sync": {
        "hookline": "runtime.call_first_sync('load_state', message=message, session_id=sid)",
        "plain": "plain_first(funcs, message=message, session_id=sid)",
        "pluggy": "pluggy_first.hook.load_state(message=message, session_id=sid)",
    },
    "call_many_sync": {
        "hookline": "runtime.call_many_sync('load_state', message=message, session_id=sid)",
        "plain": "plain_many(funcs, message=message, session_id=sid)",
        "pluggy": "pluggy_many.hook.load_state(message=message, session_id=sid)",
    },
}

ASYNC_STATEMENTS = {
    "call_first": {
        "hookline": "runtime.call_first('load_state', message=message, session_id=sid)",
        "plain": "plain_first_async(funcs, message=message, session_id=sid)",
    },
    "call_many": {
        "hookline": "runtime.call_many('load_state', message=message, session_id=sid)",
        "plain": "plain_many_async(funcs, message=message, session_id=sid)",
    },
}

# Like timeit's template, with ``await`` in the loop: the loop itself costs both sides alike.
ASYNC_TEMPLATE = """
async def measure(_number, _timer=_timer):
    _start = _timer()
    for _ in range(_number):
        await {expression}
    return _timer() - _start
"""


def sync_timer(expression: str, namespace: dict[str, Any]) -> Callable[[int], float]:
    timer = timeit.Timer(expression, globals=namespace)
    return timer.timeit


def async_timer(
    expression: str, namespace: dict[str, Any]
) -> Callable[[int], Awaitable[float]]:
    scope = {**namespace, "_timer": time.perf_counter}
    exec(compile(ASYNC_TEMPLATE.format(expression=expression), "<bench>", "exec"), scope)
    return scope["measure"]


def calibrate(elapsed_for: Callable[[int], float], target: float) -> int:
    """Number of calls for one measurement of about ``target`` seconds."""
    number = 1
    while True:
        elapsed = elapsed_for(number)
        if elapsed >= target / 4:
            return max(1, round(number * target / elapsed))
        number *= 4


async def calibrate_async(measure: Callable[[int], Awaitable[float]], target: float) -> int:
    """``calibrate`` for a coroutine loop."""
    number = 1
    while True:
        elapsed = await measure(number)
        if elapsed >= target / 4:
            return max(1, round(number * target / elapsed))
        number *= 4


def best_of(
    timers: dict[str, Callable[[int], float]], number: int, repeats: int
) -> dict[str, float]:
    """Best time per call (seconds) of each variant, measured round-robin."""
    names = list(timers)
    best = dict.fromkeys(names, float("inf"))
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            best[name] = min(best[name], timers[name](number) / number)
    return best


async def best_of_async(
    timers: dict[str, Callable[[int], Awaitable[float]]], number: int, repeats: int
) -> dict[str, float]:
    """``best_of`` for coroutine loops, all inside the one running event loop."""
    names = list(timers)
    best = dict.fromkeys(names, float("inf"))
    gc_was_enabled = gc.isenabled()
    gc.disable()  # timeit does the same for the sync side
    try:
        for repeat in range(repeats):
            shift = repeat % len(names)
            for name in names[shift:] + names[:shift]:
                best[name] = min(best[name], await timers[name](number) / number)
    finally:
        if gc_was_enabled:
            gc.enable()
    return best


@dataclass
class Row:
    impls: int
    kind: str
    hookline: float
    plain: float
    pluggy: float | None

    @property
    def vs_plain(self) -> float:
        return self.hookline / self.plain

    @property
    def vs_pluggy(self) -> float | None:
        return None if self.pluggy is None else self.hookline / self.pluggy


def namespace_for(setup: Setup, is_async: bool) -> dict[str, Any]:
    return {
        "runtime": setup.async_runtime if is_async else setup.runtime,
        "funcs": setup.async_funcs if is_async else setup.funcs,
        "pluggy_many": setup.pluggy_many,
        "pluggy_first": setup.pluggy_first,
        "plain_many": plain_many,
        "plain_first": plain_first,
        "plain_many_async": plain_many_async,
        "plain_first_async": plain_first_async,
        "message": MESSAGE,
        "sid": SESSION_ID,
    }


def measure_sync(setup: Setup, count: int, repeats: int, target: float) -> list[Row]:
    rows = []
    namespace = namespace_for(setup, is_async=False)
    for kind, statements in SYNC_STATEMENTS.items():
        timers = {name: sync_timer(expr, namespace) for name, expr in statements.items()}
        number = calibrate(timers["pluggy"], target)
        best = best_of(timers, number, repeats)
        rows.append(Row(count, kind, best["hookline"], best["plain"], best["pluggy"]))
    return rows


async def measure_async(setup: Setup, count: int, repeats: int, target: float) -> list[Row]:
    rows = []
    namespace = namespace_for(setup, is_async=True)
    for kind, statements in ASYNC_STATEMENTS.items():
        timers = {name: async_timer(expr, namespace) for name, expr in statements.items()}
        number = await calibrate_async(timers["hookline"], target)
        best = await best_of_async(timers, number, repeats)
        rows.append(Row(count, kind, best["hookline"], best["plain"], None))
    return rows


# -- report ------------------------------------------------------------------------------

COLUMNS = ("impls", "kind", "hookline us", "plain us", "pluggy us", "ratio vs plain",
           "ratio vs pluggy")
WIDTHS = (5, 15, 11, 9, 9, 14, 15)


def format_row(cells: Sequence[str]) -> str:
    return "  ".join(
        cell.ljust(width) if index < 2 else cell.rjust(width)
        for index, (cell, width) in enumerate(zip(cells, WIDTHS, strict=True))
    )


def render(rows: list[Row]) -> list[str]:
    lines = [format_row(COLUMNS), format_row(["-" * width for width in WIDTHS])]
    for row in rows:
        lines.append(format_row([
            str(row.impls),
            row.kind,
            f"{row.hookline * 1e6:.3f}",
            f"{row.plain * 1e6:.3f}",
            "-" if row.pluggy is None else f"{row.pluggy * 1e6:.3f}",
            f"{row.vs_plain:.2f}x",
            "-" if row.vs_pluggy is None else f"{row.vs_pluggy:.2f}x",
        ]))
    return lines


def goal_line(label: str, limit: float, checked: list[tuple[Row, float]]) -> str:
    worst_row, worst = max(checked, key=lambda pair: pair[1])
    verdict = "PASS" if worst <= limit else "MISS"
    return (
        f"{verdict}  {label} <= {limit}x: worst {worst:.2f}x "
        f"({worst_row.kind}, {worst_row.impls} impls)"
    )


def goals(rows: list[Row]) -> list[str]:
    sync = [r for r in rows if r.kind.endswith("_sync") and r.impls in GOAL_COUNTS]
    async_rows = [r for r in rows if not r.kind.endswith("_sync")]
    counts = ", ".join(map(str, GOAL_COUNTS))
    return [
        goal_line(f"sync call_many/call_first vs pluggy at {counts} impls", SYNC_VS_PLUGGY,
                  [(r, r.vs_pluggy or 0.0) for r in sync]),
        goal_line(f"sync call_many/call_first vs plain loop at {counts} impls", SYNC_VS_PLAIN,
                  [(r, r.vs_plain) for r in sync]),
        goal_line("async call_many/call_first vs plain await loop at every count",
                  ASYNC_VS_PLAIN, [(r, r.vs_plain) for r in async_rows]),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="few, short repeats (a smoke run; figures are noisy)")
    args = parser.parse_args(argv)
    repeats, target = (3, 0.002) if args.quick else (25, 0.01)

    print(f"python {platform.python_version()}, pluggy {pluggy.__version__}; "
          f"best of {repeats} interleaved repeats of ~{target * 1000:g} ms each; "
          f"hook load_state(message, session_id); implementations return None")

    setups = {count: build(count) for count in IMPL_COUNTS}

    async def run_async() -> dict[int, list[Row]]:
        return {
            count: await measure_async(setup, count, repeats, target)
            for count, setup in setups.items()
        }

    async_rows = asyncio.run(run_async())
    rows: list[Row] = []
    for count, setup in setups.items():
        rows += async_rows[count]
        rows += measure_sync(setup, count, repeats, target)

    print()
    print("\n".join(render(rows)))
    print()
    print("\n".join(goals(rows)))
    if args.quick:
        print("(--quick: too few repeats for the verdicts to mean anything)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
