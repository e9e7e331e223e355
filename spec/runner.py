"""Conformance runner: plays spec fixtures against a kernel through a small adapter.

Standard library only (anyio is used when present, to run fixtures on trio as well).
A fixture is a TOML file: the plugins to build (markers, sync or async, parameters,
return value or exception), then steps (register, unregister, dispatch calls, order
and report checks), each with its expected transcript. See ``spec/README.md``.

Usage from the command line::

    python spec/runner.py --adapter package.module:factory [--backend trio] [FIXTURE ...]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import inspect
import logging
import sys
import tomllib
import types
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

SPEC_DIR = Path(__file__).resolve().parent
FIXTURE_DIR = SPEC_DIR / "fixtures"
RULES_FILE = SPEC_DIR / "rules.toml"

ASYNC_CALLS = frozenset({"call_first", "call_many", "notify_error"})
SYNC_CALLS = frozenset({"call_first_sync", "call_many_sync", "notify_error_sync"})


# -- the adapter a kernel provides ---------------------------------------------------------


class KernelUnderTest(Protocol):
    """One fresh kernel instance (registry plus runtime)."""

    def register(self, plugin: object, name: str) -> None: ...
    def unregister(self, name: str) -> None: ...
    def plugin_names(self) -> list[str]: ...
    def execution_order(self, hook: str) -> list[Callable[..., Any]]: ...
    def stored_order(self, hook: str) -> list[Callable[..., Any]]: ...
    def unknown_hooks(self) -> list[dict[str, Any]]: ...
    def dispatch(self, call: str, hook: str, kwargs: dict[str, Any]) -> Any: ...


class Adapter(Protocol):
    """What a kernel implements to run this suite."""

    name: str

    def mark(self, function: Callable[..., Any], options: dict[str, Any]) -> Callable[..., Any]:
        """Apply the kernel's implementation marker with these options and return it."""

    def new_kernel(self) -> KernelUnderTest: ...


# -- value encoding ------------------------------------------------------------------------

_EXCEPTIONS = {cls.__name__: cls for cls in (Exception, RuntimeError, ValueError, TypeError,
                                             KeyError, LookupError)}


def decode(value: Any) -> Any:
    """TOML has no null and no exceptions: ``{"$none" = true}`` and
    ``{"$exception" = "RuntimeError", message = "..."}`` stand for them."""
    if isinstance(value, dict):
        if value.get("$none") is True:
            return None
        if "$exception" in value:
            return _EXCEPTIONS[value["$exception"]](value.get("message", ""))
        return {key: decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode(item) for item in value]
    return value


def comparable(value: Any) -> Any:
    """Exceptions compare by type and message, everything else as is."""
    if isinstance(value, BaseException):
        return (type(value).__name__, str(value))
    if isinstance(value, dict):
        return {key: comparable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [comparable(item) for item in value]
    return value


def same(expected: Any, actual: Any) -> bool:
    """Equality of ``comparable`` values that also tells booleans from numbers
    (``False == 0`` in Python, but a fixture expecting ``false`` must not accept ``0``)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(map(same, expected, actual))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(
            same(expected[key], actual[key]) for key in expected
        )
    return expected == actual


# -- building plugins from fixture data ------------------------------------------------------


@dataclass
class Transcript:
    """What the fixture's implementations saw, in call order."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    coroutines: list[Any] = field(default_factory=list)
    raised: list[BaseException] = field(default_factory=list)
    """Exceptions the implementations raised (for ``error.identical``)."""


def _make_function(
    plugin: str, spec: dict[str, Any], prefix: str, transcript: Transcript
) -> Callable[..., Any]:
    attr = spec.get("attr", spec["hook"])
    params = spec.get("params", "")
    mode = spec.get("mode", "sync")
    returns = decode(spec.get("returns", {"$none": True}))
    raises = spec.get("raises")
    full_params = ", ".join(p for p in (prefix, params) if p)

    def hit(seen: dict[str, Any]) -> Any:
        args = {k: v for k, v in seen.items() if k not in ("self", "cls")}
        transcript.calls.append({"plugin": plugin, "function": attr, "args": args})
        if raises:
            exc = _EXCEPTIONS[raises["type"]](raises.get("message", ""))
            transcript.raised.append(exc)
            raise exc
        return returns

    async def awaited(seen: dict[str, Any]) -> Any:
        return hit(seen)

    def make_coroutine(seen: dict[str, Any]) -> Any:
        coroutine = awaited(seen)
        transcript.coroutines.append(coroutine)
        return coroutine

    bodies = {
        "sync": f"def {attr}({full_params}):\n    return __hit(dict(locals()))\n",
        "async": f"async def {attr}({full_params}):\n    return __hit(dict(locals()))\n",
        "sync-awaitable": f"def {attr}({full_params}):\n    return __coro(dict(locals()))\n",
        "generator": f"def {attr}({full_params}):\n    __hit(dict(locals()))\n    yield\n",
    }
    namespace: dict[str, Any] = {"__hit": hit, "__coro": make_coroutine}
    # The file name makes locations readable: ``<fixture plugin.attr>:1``.
    exec(compile(bodies[mode], f"<fixture {plugin}.{attr}>", "exec"), namespace)
    function = namespace[attr]
    function.__spec_tag__ = (plugin, attr)  # type: ignore[attr-defined]
    if spec.get("decorated"):
        # A signature-hiding decorator: (*args, **kwargs), with __wrapped__ set by
        # functools.wraps. It records what it was called with as its own transcript
        # entry ``decorator:<attr>``, so a fixture can see the outer function was called.
        inner = function

        @functools.wraps(inner)
        def function(*args: Any, **kwargs: Any) -> Any:
            entry: dict[str, Any] = {
                "plugin": plugin,
                "function": f"decorator:{attr}",
                "args": dict(kwargs),
            }
            positional = args[1:] if prefix else args  # a bound self/cls is not an argument
            if positional:
                entry["positional"] = list(positional)
            transcript.calls.append(entry)
            return inner(*args, **kwargs)

    return function


def build_plugin(
    data: dict[str, Any], adapter: Adapter, transcript: Transcript
) -> object:
    """An instance, class or module carrying the fixture plugin's implementations."""
    name, form = data["name"], data.get("form", "instance")
    prefix = {"instance": "self", "class": "cls", "static": "", "module": ""}[form]
    members: dict[str, Any] = {}
    for spec in data.get("impls", []):
        function = _make_function(name, spec, prefix, transcript)
        if spec.get("marked", True):
            function = adapter.mark(function, dict(spec.get("markers", {})))
        wrap = {"class": classmethod, "static": staticmethod}.get(form)
        members[spec.get("attr", spec["hook"])] = wrap(function) if wrap else function
    for attr, value in data.get("attributes", {}).items():
        members[attr] = decode(value)
    if form == "module":
        module = types.ModuleType(f"spec_plugin_{name}")
        vars(module).update(members)
        return module
    cls = type(f"Plugin{name}", (), members)
    return cls() if form == "instance" else cls


# -- running ---------------------------------------------------------------------------------


class FixtureFailure(AssertionError):
    pass


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage().splitlines()[0])


def _tag(function: Callable[..., Any]) -> list[str]:
    tag = getattr(inspect.unwrap(getattr(function, "__func__", function)), "__spec_tag__", None)
    return list(tag) if tag else ["?", getattr(function, "__name__", "?")]


def _check(ok: bool, what: str, expected: Any, actual: Any) -> None:
    if not ok:
        raise FixtureFailure(f"{what}:\n  expected {expected!r}\n  actual   {actual!r}")


def _check_error(expected: dict[str, Any] | None, error: BaseException | None) -> None:
    if expected is None:
        if error is not None:
            raise FixtureFailure(f"unexpected {type(error).__name__}: {error}") from error
        return
    if error is None:
        raise FixtureFailure(f"expected {expected['type']}, nothing was raised")
    names = {cls.__name__ for cls in type(error).__mro__}
    _check(expected["type"] in names, "error type", expected["type"], type(error).__name__)
    fragments = expected.get("contains", [])
    for fragment in [fragments] if isinstance(fragments, str) else fragments:
        _check(fragment in str(error), "error message contains", fragment, str(error))


async def run_fixture(path: Path, adapter: Adapter) -> None:
    """Play one fixture; raises ``FixtureFailure`` on the first mismatch."""
    fixture = tomllib.loads(path.read_text(encoding="utf-8"))
    transcript = Transcript()
    kernel = adapter.new_kernel()
    plugins = {p["name"]: build_plugin(p, adapter, transcript) for p in fixture["plugins"]}
    steps = fixture.get("steps", [])
    if fixture.get("register_all", True):
        steps = [{"action": "register", "plugin": name} for name in plugins] + steps
    capture = _Capture()
    root = logging.getLogger()
    previous_level = root.level
    root.addHandler(capture)
    root.setLevel(min(previous_level or logging.WARNING, logging.WARNING))
    try:
        for number, step in enumerate(steps, 1):
            try:
                await _run_step(step, kernel, plugins, transcript, capture)
            except FixtureFailure as failure:
                raise FixtureFailure(
                    f"{path.name} step {number} ({step['action']} "
                    f"{step.get('hook', step.get('plugin', ''))}): {failure}"
                ) from None
    finally:
        root.removeHandler(capture)
        root.setLevel(previous_level)


async def _run_step(
    step: dict[str, Any],
    kernel: KernelUnderTest,
    plugins: dict[str, object],
    transcript: Transcript,
    capture: _Capture,
) -> None:
    action, expect = step["action"], step.get("expect", {})
    transcript.calls.clear()
    transcript.raised.clear()
    capture.messages.clear()
    result: Any = None
    error: BaseException | None = None
    with warnings.catch_warnings(record=True) as python_warnings:
        warnings.simplefilter("always")
        try:
            if action == "register":
                kernel.register(plugins[step["plugin"]], step.get("name", step["plugin"]))
            elif action == "unregister":
                kernel.unregister(step["plugin"])
            elif action in ASYNC_CALLS | SYNC_CALLS:
                result = kernel.dispatch(action, step["hook"], decode(step.get("args", {})))
                if action in ASYNC_CALLS:
                    result = await result
            elif action != "check":
                raise FixtureFailure(f"unknown action {action!r}")
        except FixtureFailure:
            raise
        except Exception as exc:
            error = exc
        import gc

        gc.collect()
    _check_error(expect.get("error"), error)
    if expect.get("error", {}).get("identical"):
        _check(
            any(error is raised for raised in transcript.raised),
            "error is the very exception an implementation raised",
            transcript.raised,
            error,
        )
    if "result" in expect:
        want = comparable(decode(expect["result"]))
        _check(same(want, comparable(result)), "result", want, comparable(result))
    if "calls" in expect:
        want = comparable(decode(expect["calls"]))
        _check(
            same(want, comparable(transcript.calls)), "calls", want, comparable(transcript.calls)
        )
    warnings_seen = capture.messages
    if "warnings" in expect or action != "register":
        want = expect.get("warnings", [])
        matched = len(want) == len(warnings_seen) and all(
            seen.startswith(w) for w, seen in zip(want, warnings_seen, strict=True)
        )
        _check(matched, "warnings", want, warnings_seen)
    never_awaited = [w for w in python_warnings if "never awaited" in str(w.message)]
    _check(not never_awaited, "no 'never awaited' warning", [], [str(w.message)
                                                                  for w in never_awaited])
    if expect.get("coroutines_closed"):
        states = [inspect.getcoroutinestate(c) for c in transcript.coroutines]
        _check(all(s == inspect.CORO_CLOSED for s in states), "coroutines closed", "CLOSED",
               states)
    for hook, want in expect.get("execution", {}).items():
        got = [_tag(f) for f in kernel.execution_order(hook)]
        _check(got == want, f"execution order of {hook}", want, got)
    for hook, want in expect.get("stored", {}).items():
        got = [_tag(f) for f in kernel.stored_order(hook)]
        _check(got == want, f"stored order of {hook}", want, got)
    if "plugins" in expect:
        _check(kernel.plugin_names() == expect["plugins"], "registered plugins",
               expect["plugins"], kernel.plugin_names())
    if "unknown" in expect:
        got = kernel.unknown_hooks()
        _check(got == expect["unknown"], "unknown hooks", expect["unknown"], got)


# -- discovery and command line --------------------------------------------------------------


def fixture_paths(root: Path = FIXTURE_DIR) -> list[Path]:
    return sorted(root.rglob("*.toml"))


def fixture_rules(path: Path) -> list[str]:
    return list(tomllib.loads(path.read_text(encoding="utf-8")).get("rules", []))


def load_rules(path: Path = RULES_FILE) -> dict[str, dict[str, Any]]:
    return dict(tomllib.loads(path.read_text(encoding="utf-8"))["rules"])


def run_sync(path: Path, adapter: Adapter, backend: str = "asyncio") -> None:
    """Run one fixture to completion on ``backend`` (``trio`` needs anyio and trio)."""
    if backend == "asyncio":
        asyncio.run(run_fixture(path, adapter))
    else:
        import anyio

        anyio.run(run_fixture, path, adapter, backend=backend)


def _load_adapter(spec: str) -> Adapter:
    module_name, _, attr = spec.partition(":")
    factory = getattr(importlib.import_module(module_name), attr or "adapter")
    # A class, or a factory function, is called; an adapter instance is used as is.
    if isinstance(factory, type) or (callable(factory) and not hasattr(factory, "mark")):
        return factory()
    return factory


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", default="hookline_adapter:HooklineAdapter",
                        help="module:factory returning the adapter")
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    parser.add_argument("fixtures", nargs="*", type=Path)
    args = parser.parse_args(list(argv) if argv is not None else None)
    sys.path.insert(0, str(SPEC_DIR))
    adapter = _load_adapter(args.adapter)
    failed = 0
    paths = args.fixtures or fixture_paths()
    for path in paths:
        try:
            run_sync(path, adapter, args.backend)
        except FixtureFailure as failure:
            failed += 1
            print(f"FAIL {path.relative_to(SPEC_DIR) if path.is_absolute() else path}: {failure}")
    print(f"{len(paths) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
