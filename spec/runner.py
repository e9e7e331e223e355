"""Conformance runner: plays spec fixtures against a kernel through a small adapter.

Standard library only (anyio is used when present, to run fixtures on trio as well).
A fixture is a TOML file: the plugins to build (markers, sync or async, parameters,
return value or exception), then steps (register, unregister, dispatch calls, order
and report checks), each with its expected transcript. A fixture with
``framework = true`` runs against a whole framework (``adapter.new_framework()``) and
may also use the framework actions of ``framework_steps.py``: turns, the ``running()``
scope, the collectors and the interception hooks. The plugins are built by
``fixture_plugins.py``, values decoded and compared by ``fixture_values.py``. See
``spec/README.md``.

Usage from the command line (the options are in ``suite.py``)::

    python -m spec --adapter package.module:factory [--backend trio] [FIXTURE ...]
"""

from __future__ import annotations

import asyncio
import difflib
import gc
import inspect
import json
import logging
import pprint
import re
import tomllib
import traceback
import warnings
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from .fixture_plugins import Transcript, build_plugin
from .fixture_values import decode, describe, includes, same
from .framework_steps import ACTIONS as FRAMEWORK_ACTIONS
from .framework_steps import FixtureError, Scope, Tags, run_action
from .logmatch import all_match  # log lines matched on their fields

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


class FrameworkUnderTest(KernelUnderTest, Protocol):
    """One fresh framework: a kernel plus the framework-side rules of the 27 hooks.

    Every method takes its arguments by keyword. The async ones return an awaitable.
    """

    async def process_inbound(self, inbound: Any, stream_output: bool) -> Any: ...
    def running(self) -> AbstractAsyncContextManager[Any]: ...
    def get_tools(self) -> list[Any]: ...
    async def offered_tools(self) -> list[str]: ...
    def get_channels(self, message_handler: Any) -> list[Any]: ...
    def get_tape_sidecars(self) -> list[Any]: ...
    async def run_channels(self, selection: str | None, environ: dict[str, str]) -> list[str]: ...
    def get_system_prompt(self, prompt: Any, state: dict[str, Any]) -> str: ...
    def build_tape_context(self) -> Any: ...
    def collect_onboard_config(self, current_config: Any, plugin: str | None) -> dict: ...
    async def get_model_options(self, session_id: str, workspace: Any) -> Any: ...
    async def admit_message(self, session_id: str, message: Any, turn: Any) -> Any: ...
    async def get_environment(self, session_id: str) -> Any: ...
    def get_tape_store(self) -> Any: ...
    def get_steering_inbox(self) -> Any: ...
    async def steer_message(self, message: Any, state: dict, reason: str | None) -> bool: ...
    async def continue_prompt(self, prompt: Any, tape: Any, state: Any) -> str | None: ...
    async def step_finished(self, prompt: Any, status: str, tape: Any, stream_state: Any,
                            step: int) -> str | None: ...
    async def before_llm_call(self, request: Any, state: dict) -> Any: ...
    async def after_llm_call(self, request: Any, result: Any, state: dict) -> None: ...
    async def before_tool_call(self, call: Any, state: dict) -> tuple[Any, Any]: ...
    async def after_tool_call(self, call: Any, result: Any, state: dict) -> None: ...


class Adapter(Protocol):
    """What a kernel implements to run this suite.

    ``new_framework``, ``make`` and ``describe`` are needed only by fixtures with
    ``framework = true`` (and by ``make`` for contract-type tags anywhere).
    """

    name: str
    protocol: int
    """The adapter protocol it was written for (this runner speaks 1): required."""

    def mark(self, function: Callable[..., Any], options: dict[str, Any]) -> Callable[..., Any]:
        """Apply the kernel's implementation marker with these options and return it."""

    def new_kernel(self) -> KernelUnderTest: ...

    def new_framework(self) -> FrameworkUnderTest: ...

    def make(self, tag: str, data: dict[str, Any]) -> Any:
        """Build a contract value from a fixture tag (``data["value"]`` is the tag's value)."""

    def describe(self, value: Any) -> Any:
        """Plain data for a contract value; the value itself when it is not one."""


# -- running ---------------------------------------------------------------------------------


KERNEL_ONLY = "a framework fixture, and the adapter has no new_framework() (kernel only)"
"""Why a framework fixture is skipped for an adapter of the kernel protocol alone."""


EXPECTATIONS = frozenset({
    "error", "result", "result_includes", "args_after", "calls", "calls_in_any_order",
    "warnings", "coroutines_closed", "execution", "stored", "plugins", "unknown",
})
"""The keys of a step's ``expect``, which its ``rules`` table can file under a rule."""


class FixtureFailure(AssertionError):
    """A check that did not hold. ``key`` is the expectation it checked (None: the step
    itself raised, or an implicit check); ``rule`` the rule id it is filed under, once
    known (None: the fixture's whole ``rules`` list applies)."""

    def __init__(self, message: str, key: str | None = None, rule: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.rule = rule


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append((record.getMessage().splitlines() or [""])[0])  # "" is a line


@dataclass
class _Fixture:
    """Everything one fixture's steps share."""

    adapter: Adapter
    kernel: Any
    plugins: dict[str, object]
    transcript: Transcript
    tags: Tags
    capture: _Capture
    scope: Scope
    framework: bool
    groups: dict[str, str] = field(default_factory=dict)
    """Fixture plugin name -> the entry point group it is loaded from (``group``)."""


def _tag(function: Callable[..., Any]) -> list[str]:
    tag = getattr(inspect.unwrap(getattr(function, "__func__", function)), "__spec_tag__", None)
    return list(tag) if tag else ["?", getattr(function, "__name__", "?")]


def _check(key: str | None, ok: bool, what: str, expected: Any, actual: Any) -> None:
    """Fail the expectation `key` (so the failure can be filed under its rule)."""
    if not ok:
        raise FixtureFailure(f"{what}:\n{shown_difference(expected, actual)}", key)


def check_rule(step: dict[str, Any], key: str | None, rules: list[str]) -> str | None:
    """The rule a failing check of `step` is filed under: the one its ``rules`` table
    names for the expectation `key`, else the step's ``rule``, else the fixture's only
    rule. None when the fixture names several and the step none: then no single rule
    can be blamed, and the failure names them all."""
    named = step.get("rules", {}).get(key) if key else None
    return named or step.get("rule") or (rules[0] if len(rules) == 1 else None)


def step_rules(step: dict[str, Any], rules: list[str]) -> set[str]:
    """Every rule the checks of `step` are filed under."""
    return {rule for rule in (check_rule(step, None, rules),
                              *step.get("rules", {}).values()) if rule}


def _check_attribution(step: dict[str, Any], rules: list[str]) -> None:
    """A step may only name rules the fixture lists (what ``--rule`` selects by), and
    only file expectations a step can have."""
    named = step.get("rules", {})
    if not isinstance(named, dict):
        raise FixtureError("the step's rules must be a table: expectation = rule id")
    for key, rule in [("rule", step.get("rule")), *named.items()]:
        if key != "rule" and key not in EXPECTATIONS:
            raise FixtureError(f"rules.{key}: not an expectation (one of "
                               f"{', '.join(sorted(EXPECTATIONS))})")
        if rule is not None and rule not in rules:
            raise FixtureError(f"{key} = {rule!r} is not one of the fixture's rules")


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def shown_difference(expected: Any, actual: Any) -> str:
    """Expected and actual on a line each, without memory addresses (they differ from run
    to run); for structures that take several lines, a short diff of the two below."""
    shown = (f"  expected {_ADDRESS.sub('', repr(expected))}\n"
             f"  actual   {_ADDRESS.sub('', repr(actual))}")
    if isinstance(expected, str) or isinstance(actual, str):
        return shown
    want, got = (_ADDRESS.sub("", pprint.pformat(value, width=88, sort_dicts=False))
                 for value in (expected, actual))
    if "\n" not in want and "\n" not in got:
        return shown
    diff = difflib.unified_diff(want.splitlines(), got.splitlines(), "expected", "actual",
                                lineterm="", n=2)
    return shown + "\n" + "\n".join(f"  {line}" for line in diff)


def raised_at(error: BaseException) -> str:
    """`file.py:12, function`: the innermost frame of the error, the kernel's or the
    adapter's code most often; empty without a traceback."""
    frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ else []
    if not frames:
        return ""
    frame = frames[-1]
    return f"{Path(frame.filename).name}:{frame.lineno}, {frame.name}"


def _check_error(expected: dict[str, Any] | None, error: BaseException | None) -> None:
    if expected is None:
        if error is not None:  # where it came from on a line of its own: the first line
            where = raised_at(error)  # is what --write-expected keeps, and stays stable
            raise FixtureFailure(f"unexpected {type(error).__name__}: {error}"
                                 + (f"\n  raised at {where}" if where else "")) from error
        return
    if error is None:
        raise FixtureFailure(f"expected {expected['type']}, nothing was raised", "error")
    names = {cls.__name__ for cls in type(error).__mro__}
    _check("error", expected["type"] in names, "error type", expected["type"],
           type(error).__name__)
    fragments = expected.get("contains", [])
    for fragment in [fragments] if isinstance(fragments, str) else fragments:
        _check("error", fragment in str(error), "error message contains", fragment, str(error))
    if "kind" in expected:
        kind = getattr(error, "kind", None)
        kind = getattr(kind, "value", kind)
        _check("error", kind == expected["kind"], "error kind", expected["kind"], kind)
    if "notes" in expected:
        # PEP 678 notes (add_note): each fragment must occur in one of them; [] means none.
        notes = [str(note) for note in getattr(error, "__notes__", None) or []]
        wanted = expected["notes"]
        wanted = [wanted] if isinstance(wanted, str) else wanted
        if not wanted:
            _check("error", not notes, "error notes", [], notes)
        for fragment in wanted:
            _check("error", any(fragment in note for note in notes), "error notes contain",
                   fragment, notes)


async def run_fixture(path: Path, adapter: Adapter) -> str | None:
    """Play one fixture; raises ``FixtureFailure`` on the first mismatch. Returns why it was
    skipped (kernel only: framework fixtures, before any ``requires``), else None."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise FixtureFailure(f"{path.name} is not valid TOML: {exc}") from None
    framework = bool(data.get("framework", False))
    if framework and not hasattr(adapter, "new_framework"):
        return KERNEL_ONLY
    supports = getattr(adapter, "supports", None)
    for requirement in data.get("requires", []):
        if supports is None or not supports(requirement):
            return f"the adapter does not support {requirement!r}"
    transcript = Transcript(adapter)
    tags = Tags(adapter, transcript.record, lambda value, args: decode(value, tags, args))
    kernel = adapter.new_framework() if framework else adapter.new_kernel()
    plugins = {p["name"]: build_plugin(p, adapter.mark, transcript, tags)
               for p in data["plugins"]}
    fixture = _Fixture(adapter, kernel, plugins, transcript, tags, _Capture(), Scope(),
                       framework, {p["name"]: p["group"] for p in data["plugins"] if "group" in p})
    steps = data.get("steps", [])
    if data.get("register_all", True):
        steps = [{"action": "register", "plugin": name} for name in plugins] + steps
    root = logging.getLogger()
    previous_level = root.level
    root.addHandler(fixture.capture)
    root.setLevel(min(previous_level or logging.WARNING, logging.WARNING))
    # Every step ends with gc.collect() (to catch coroutines that were never awaited).
    # Freezing what exists now keeps those collections to the fixture's own objects.
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.collect()
        gc.freeze()
    where = ""
    rules = list(data.get("rules", []))
    # The step being played, whose rules a failure is filed under; empty for the implicit
    # registrations and the end of the fixture: set-up shared by all the fixture's rules.
    current: dict[str, Any] = {}
    implicit = len(plugins) if data.get("register_all", True) else 0
    try:
        for number, step in enumerate(steps, 1 - implicit):
            # Numbered as in the file: the registrations `register_all` adds come first.
            # "(action hook)"; a step without either keeps its space ("(check )"): the
            # expected-failures files in use quote these labels.
            where = (f"step {number} ({step['action']} "
                     f"{step.get('hook', step.get('plugin', ''))})" if number > 0 else
                     f"registering plugin {step['plugin']!r} (register_all)")
            current = step if number > 0 else {}
            if current:
                _check_attribution(current, rules)
            await _run_step(step, fixture)
        where, current = "leaving running() at the end", {}
        await fixture.scope.close()
    except FixtureFailure as failure:
        rule = check_rule(current, failure.key, rules) if current else None
        raise FixtureFailure(f"{path.name} {where}: {failure}", failure.key, rule) from None
    except FixtureError as failure:  # the fixture itself is wrong: no rule to blame
        raise FixtureFailure(f"{path.name} {where}: {failure}") from None
    except Exception as exc:
        rule = check_rule(current, None, rules) if current else None
        message = f"{path.name} {where}: raised {type(exc).__name__}: {exc}"
        raise FixtureFailure(message, None, rule) from exc
    finally:
        if fixture.scope.manager is not None:  # a failed fixture: leave quietly
            with suppress(Exception):
                await fixture.scope.close()
        if freeze:
            gc.unfreeze()
        root.removeHandler(fixture.capture)
        root.setLevel(previous_level)
    return None


async def _perform(step: dict[str, Any], fixture: _Fixture) -> tuple[Any, dict[str, Any]]:
    """Run the step's action; returns its result and the arguments it was given."""
    action, kernel = step["action"], fixture.kernel
    if action == "register" and step["plugin"] in fixture.groups:
        # Loaded as an entry point of that group would be (the adapter says how).
        kernel.register_from_group(fixture.plugins[step["plugin"]],
                                   step.get("name", step["plugin"]), fixture.groups[step["plugin"]])
    elif action == "register":
        kernel.register(fixture.plugins[step["plugin"]], step.get("name", step["plugin"]))
    elif action == "unregister":
        kernel.unregister(step["plugin"])
    elif action in ASYNC_CALLS | SYNC_CALLS:
        args = decode(step.get("args", {}), fixture.tags)
        result = kernel.dispatch(action, step["hook"], args)
        if action in ASYNC_CALLS:
            result = await result
        return result, args
    elif action in FRAMEWORK_ACTIONS:
        if not fixture.framework:
            raise FixtureError(f"{action} needs a fixture with framework = true")
        return await run_action(action, step, kernel,
                                lambda value: decode(value, fixture.tags), fixture.scope)
    elif action != "check":
        raise FixtureError(f"unknown action {action!r}")
    return None, {}


def _canonical(value: Any) -> str:
    """A sortable text form of a described value (for order-insensitive checks)."""
    return json.dumps(value, sort_keys=True, default=repr)


async def _run_step(step: dict[str, Any], fixture: _Fixture) -> None:
    action, expect = step["action"], step.get("expect", {})
    transcript, kernel, adapter = fixture.transcript, fixture.kernel, fixture.adapter
    transcript.calls.clear()
    transcript.raised.clear()
    fixture.capture.messages.clear()
    result: Any = None
    args: dict[str, Any] = {}
    error: BaseException | None = None
    with warnings.catch_warnings(record=True) as python_warnings:
        warnings.simplefilter("always")
        try:
            result, args = await _perform(step, fixture)
        except (FixtureFailure, FixtureError):
            raise
        except Exception as exc:
            error = exc
        gc.collect()

    def expected(key: str) -> Any:
        return describe(decode(expect[key], fixture.tags), adapter)

    _check_error(expect.get("error"), error)
    if expect.get("error", {}).get("identical"):
        _check(
            "error",
            any(error is raised for raised in transcript.raised),
            "error is the very exception an implementation raised",
            transcript.raised,
            error,
        )
    actual = describe(result, adapter)
    if "result" in expect:
        _check("result", same(want := expected("result"), actual), "result", want, actual)
    if "result_includes" in expect:
        want = expected("result_includes")
        _check("result_includes", includes(want, actual), "result includes", want, actual)
    for name, value in expect.get("args_after", {}).items():
        want = describe(decode(value, fixture.tags), adapter)
        got = describe(args.get(name), adapter)
        _check("args_after", same(want, got), f"argument {name} after the step", want, got)
    if "calls" in expect:
        want = expected("calls")
        _check("calls", same(want, transcript.calls), "calls", want, transcript.calls)
    if "calls_in_any_order" in expect:
        want = expected("calls_in_any_order")
        _check("calls_in_any_order",
               sorted(map(_canonical, want)) == sorted(map(_canonical, transcript.calls)),
               "calls (in any order)", want, transcript.calls)
    warnings_seen = fixture.capture.messages
    # A framework logs its own failures as it likes: framework actions check warnings
    # only when the fixture gives them; dispatch calls must log nothing unexpected.
    if "warnings" in expect or action not in {*FRAMEWORK_ACTIONS, "register"}:
        want = expect.get("warnings", [])
        _check("warnings", all_match(want, warnings_seen), "warnings", want, warnings_seen)
    never_awaited = [w for w in python_warnings if "never awaited" in str(w.message)]
    _check(None, not never_awaited, "no 'never awaited' warning", [],
           [str(w.message) for w in never_awaited])
    if expect.get("coroutines_closed"):
        states = [inspect.getcoroutinestate(c) for c in transcript.coroutines]
        _check("coroutines_closed", all(s == inspect.CORO_CLOSED for s in states),
               "coroutines closed", "CLOSED",
               states)
    for hook, want in expect.get("execution", {}).items():
        got = [_tag(f) for f in kernel.execution_order(hook)]
        _check("execution", got == want, f"execution order of {hook}", want, got)
    for hook, want in expect.get("stored", {}).items():
        got = [_tag(f) for f in kernel.stored_order(hook)]
        _check("stored", got == want, f"stored order of {hook}", want, got)
    if "plugins" in expect:
        _check("plugins", kernel.plugin_names() == expect["plugins"], "registered plugins",
               expect["plugins"], kernel.plugin_names())
    if "unknown" in expect:
        got = kernel.unknown_hooks()
        _check("unknown", got == expect["unknown"], "unknown hooks", expect["unknown"], got)


# -- discovery and command line --------------------------------------------------------------


def fixture_paths(root: Path = FIXTURE_DIR) -> list[Path]:
    return sorted(root.rglob("*.toml"))


def fixture_rules(path: Path) -> list[str]:
    return list(tomllib.loads(path.read_text(encoding="utf-8")).get("rules", []))


def load_rules(path: Path = RULES_FILE) -> dict[str, dict[str, Any]]:
    return dict(tomllib.loads(path.read_text(encoding="utf-8"))["rules"])


def run_sync(path: Path, adapter: Adapter, backend: str = "asyncio") -> str | None:
    """Run one fixture to completion on ``backend`` (``trio`` needs anyio and trio);
    returns why it was skipped, or None."""
    if backend == "asyncio":
        return asyncio.run(run_fixture(path, adapter))
    import anyio

    skipped: str | None = anyio.run(run_fixture, path, adapter, backend=backend)
    return skipped


def adapter_from(factory: Any) -> Adapter:
    """A class, or a factory function, is called; an adapter instance is used as is."""
    if isinstance(factory, type) or (callable(factory) and not hasattr(factory, "mark")):
        return cast(Adapter, factory())
    return cast(Adapter, factory)

