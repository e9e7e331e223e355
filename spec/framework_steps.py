"""Framework support for the conformance runner: value tags and framework actions.

Standard library only. ``runner.py`` imports this module; it never imports the runner.

Two things live here:

- ``Tags`` builds the values a fixture writes as ``{"$tag" = ...}`` tables. The runner
  builds the kernel-neutral ones itself (generators, a steering inbox, plain objects,
  arguments of the current call); the contract types (tools, streams, environments,
  decisions, ...) are built by the adapter's ``make(tag, data)``, so another kernel can
  supply its own types.
- ``ACTIONS`` and ``run_action`` perform the framework actions of a ``framework = true``
  fixture on a ``FrameworkUnderTest``, and ``Scope`` keeps the ``running()`` scope open
  between steps.

See ``spec/README.md`` for the fixture format.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

EXCEPTIONS: dict[str, type[BaseException]] = {
    cls.__name__: cls
    for cls in (Exception, RuntimeError, ValueError, TypeError, KeyError, LookupError,
                OSError, ConnectionError, TimeoutError, AttributeError)
}
"""The exception types a fixture may name (``raises``, ``$exception``, ``error``)."""

REQUIRED = object()
"""Marks an action parameter the fixture must give."""

SELF_KEY = "$self"
"""Where the plugin object travels among a call's arguments, for ``$self`` (no parameter
can have this name)."""


class FixtureError(AssertionError):
    """The fixture is malformed, or the adapter lacks what the fixture needs."""


def make_exception(spec: dict[str, Any]) -> BaseException:
    """``{ type = "RuntimeError", message = "boom" }`` as an exception instance."""
    try:
        return EXCEPTIONS[spec["type"]](spec.get("message", ""))
    except KeyError:
        raise FixtureError(
            f"unknown exception type in {spec!r}; known: {sorted(EXCEPTIONS)}"
        ) from None


# -- values built by the runner -----------------------------------------------------------


class SpecObject(types.SimpleNamespace):
    """``{"$object" = {...}}``: an envelope that is a plain attribute object, not a dict."""

    def __spec_describe__(self) -> dict[str, Any]:
        return {"$object": dict(vars(self))}


class SpecInbox:
    """``{"$inbox" = "label"}``: a steering inbox that records what it is given.

    Each ``enqueue_message`` appends ``{ enqueue = label, message, state }`` to the
    transcript; it holds nothing, so ``drain_messages`` returns ``[]`` and
    ``message_count`` returns 0.
    """

    def __init__(self, label: str, record: Callable[[dict[str, Any]], None]) -> None:
        self.label, self._record = label, record

    async def enqueue_message(self, message: Any, state: dict[str, Any]) -> None:
        self._record({"enqueue": self.label, "message": message, "state": state})

    async def drain_messages(self, state: dict[str, Any]) -> list[Any]:
        return []

    def message_count(self, state: dict[str, Any]) -> int:
        return 0

    def __spec_describe__(self) -> dict[str, Any]:
        return {"$inbox": self.label}


def _enter(label: str, error: BaseException | None,
           record: Callable[[dict[str, Any]], None]) -> None:
    record({"enter": label})
    if error is not None:
        raise error


def _exit(label: str, exit_error: BaseException | None,
          record: Callable[[dict[str, Any]], None]) -> None:
    record({"exit": label})
    if exit_error is not None:
        raise exit_error


def _generator(value: Any, label: str, error: BaseException | None,
               exit_error: BaseException | None,
               record: Callable[[dict[str, Any]], None]) -> Any:
    _enter(label, error, record)
    try:
        yield value
    finally:
        _exit(label, exit_error, record)


async def _async_generator(value: Any, label: str, error: BaseException | None,
                           exit_error: BaseException | None,
                           record: Callable[[dict[str, Any]], None]) -> Any:
    _enter(label, error, record)
    try:
        yield value
    finally:
        _exit(label, exit_error, record)


CLOSABLE_TAGS = frozenset({"environment", "stream"})
"""Tags whose made value receives ``on_close`` in its data."""


@dataclass
class Tags:
    """Builds tagged values at decode time. ``decode`` decodes nested values."""

    adapter: Any
    record: Callable[[dict[str, Any]], None]
    decode: Callable[[Any, dict[str, Any] | None], Any]

    def build(self, tag: str, table: dict[str, Any], args: dict[str, Any] | None) -> Any:
        """The value of ``{"$<tag>" = ..., <other keys>}``; ``args`` are the arguments of the
        call being answered (None outside an implementation).

        ``arg``, ``self``, ``type_of``, ``generator``, ``async_generator``, ``inbox``,
        ``object`` and ``tuple`` are built here; every other tag (``replace`` included) by
        ``adapter.make``.
        """
        raw = table[f"${tag}"]
        extra = {k: v for k, v in table.items() if k != f"${tag}"}
        if tag == "self":
            if args is None or SELF_KEY not in args:
                raise FixtureError("$self can only be used by an instance plugin's function")
            return _attribute_path(args[SELF_KEY], raw)
        if tag == "type_of":
            if args is None or raw not in args:
                raise FixtureError(f"$type_of names {raw!r}, which is not an argument of this call")
            return type_name(args[raw])
        if tag in ("arg", "replace"):
            if args is None or raw not in args:
                raise FixtureError(f"${tag} names {raw!r}, which is not an argument of this call")
            if tag == "arg":
                return args[raw]
            fields = self.decode(extra.get("fields", {}), args)
            return self._make("replace", {"value": args[raw], "fields": fields})
        value = self.decode(raw, args)
        if tag in ("generator", "async_generator"):
            error = make_exception(extra["raises"]) if "raises" in extra else None
            exit_error = make_exception(extra["exit_raises"]) if "exit_raises" in extra else None
            make = _generator if tag == "generator" else _async_generator
            return make(value, extra.get("label", tag), error, exit_error, self.record)
        if tag == "inbox":
            return SpecInbox(value, self.record)
        if tag == "object":
            return SpecObject(**value)
        if tag == "tuple":
            return tuple(value)
        data = {key: self.decode(item, args) for key, item in extra.items()
                if key not in ("raises", "close_raises")}
        if "raises" in extra:
            data["raises"] = make_exception(extra["raises"])
        if tag == "channel":
            data["on_start"] = self._starter(value)
        if tag in CLOSABLE_TAGS:
            label = value if tag == "environment" else extra.get("label", tag)
            close_error = make_exception(extra["close_raises"]) if "close_raises" in extra else None
            data["on_close"] = self._closer(label, close_error)
        return self._make(tag, {"value": value, **data})

    def _make(self, tag: str, data: dict[str, Any]) -> Any:
        make = getattr(self.adapter, "make", None)
        if make is None:
            raise FixtureError(f"the adapter has no make(); it cannot build ${tag}")
        return make(tag, data)

    def _starter(self, name: str) -> Callable[[Any], None]:
        def on_start(stop_event: Any) -> None:
            self.record({"start": name, "stop_event": type_name(stop_event)})

        return on_start

    def _closer(self, label: str, error: BaseException | None) -> Callable[[], None]:
        def on_close() -> None:
            self.record({"close": label})
            if error is not None:
                raise error

        return on_close


def type_name(value: Any) -> str:
    """``package.QualName`` of a value's type: the top-level package that defines it and
    the class (``hookline.ToolCall``, ``bub.ToolCall``, ``asyncio.Event``; an
    ``anyio.Event`` is ``anyio.Event`` on every backend)."""
    cls = type(value)
    return f"{cls.__module__.partition('.')[0]}.{cls.__qualname__}"


def _attribute_path(owner: Any, path: str) -> Any:
    """``framework.workspace`` of ``owner``: each dotted part read with ``getattr``."""
    value = owner
    for part in path.split("."):
        value = getattr(value, part)
    return value


def assign(args: dict[str, Any], path: str, value: Any) -> None:
    """``sets = { "result.result" = ... }``: assign into an argument the call received.

    The first part names the argument; each further part is an attribute, or a key when
    the object is a dict. ``"state.k"`` sets ``state["k"]``.
    """
    name, *parts = path.split(".")
    if name not in args or not parts:
        raise FixtureError(f"sets: {path!r} must be <argument>.<attribute or key>")
    target = args[name]
    for part in parts[:-1]:
        target = target[part] if isinstance(target, dict) else getattr(target, part)
    if isinstance(target, dict):
        target[parts[-1]] = value
    else:
        setattr(target, parts[-1], value)


# -- framework actions --------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    is_async: bool
    params: dict[str, Any] = field(default_factory=dict)
    """Parameter name -> default (``REQUIRED`` when the fixture must give it)."""


ACTIONS: dict[str, Action] = {
    "process_inbound": Action(True, {"inbound": REQUIRED, "stream_output": False}),
    "enter_running": Action(True),
    "exit_running": Action(True),
    "get_tools": Action(False),
    "offered_tools": Action(True),
    "get_channels": Action(False, {"message_handler": "handler"}),
    "get_tape_sidecars": Action(False),
    "get_system_prompt": Action(False, {"prompt": REQUIRED, "state": REQUIRED}),
    "build_tape_context": Action(False),
    "collect_onboard_config": Action(False, {"current_config": None, "plugin": None}),
    "get_model_options": Action(True, {"session_id": REQUIRED, "workspace": None}),
    "admit_message": Action(True, {"session_id": REQUIRED, "message": REQUIRED,
                                   "turn": REQUIRED}),
    "get_environment": Action(True, {"session_id": REQUIRED}),
    "get_tape_store": Action(False),
    "get_steering_inbox": Action(False),
    "steer_message": Action(True, {"message": REQUIRED, "state": REQUIRED, "reason": None}),
    "continue_prompt": Action(True, {"prompt": REQUIRED, "tape": None, "state": None}),
    "step_finished": Action(True, {"prompt": REQUIRED, "status": REQUIRED, "tape": "tape",
                                   "stream_state": None, "step": 1}),
    "before_llm_call": Action(True, {"request": REQUIRED, "state": REQUIRED}),
    "after_llm_call": Action(True, {"request": REQUIRED, "result": REQUIRED,
                                    "state": REQUIRED}),
    "before_tool_call": Action(True, {"call": REQUIRED, "state": REQUIRED}),
    "after_tool_call": Action(True, {"call": REQUIRED, "result": REQUIRED, "state": REQUIRED}),
    "run_channels": Action(True, {"selection": None, "environ": {}}),
    "run_model": Action(True, {"prompt": REQUIRED, "session_id": REQUIRED, "state": REQUIRED}),
    "run_model_stream": Action(True, {"prompt": REQUIRED, "session_id": REQUIRED,
                                      "state": REQUIRED}),
}
"""Every framework action: whether the framework method is awaited, and its parameters.

Each action except ``enter_running`` and ``exit_running`` calls the framework method of
the same name with every parameter, by keyword (defaults filled in by the runner). The
model-stage actions (``RUNTIME_ACTIONS``) call the method of the framework's ``runtime``;
a stream that ``run_model_stream`` returns is read to its end and closed, and the step's
result is ``{"events": [{"kind": ..., "data": ...}, ...]}``.
"""

RUNTIME_ACTIONS = frozenset({"run_model", "run_model_stream"})


class Scope:
    """The ``running()`` scope a fixture opened with ``enter_running``, until it exits."""

    def __init__(self) -> None:
        self.manager: Any = None

    async def enter(self, framework: Any) -> None:
        if self.manager is not None:
            raise FixtureError("enter_running while the fixture's scope is still open")
        manager = framework.running()
        await manager.__aenter__()
        self.manager = manager  # only once entered: a failed enter leaves nothing open

    async def exit(self, error: BaseException | None) -> None:
        """Leave the scope; with ``error``, as if the body had raised it."""
        manager, self.manager = self.manager, None
        if manager is None:
            raise FixtureError("exit_running without an open scope")
        if error is None:
            await manager.__aexit__(None, None, None)
            return
        try:
            raise error
        except BaseException as raised:
            if not await manager.__aexit__(type(raised), raised, raised.__traceback__):
                raise

    async def close(self) -> None:
        """At the end of a fixture: leave a scope the steps left open."""
        if self.manager is not None:
            await self.exit(None)


async def run_action(
    action: str,
    step: dict[str, Any],
    framework: Any,
    decode: Callable[[Any], Any],
    scope: Scope,
) -> tuple[Any, dict[str, Any]]:
    """Perform one framework action; returns its result and the decoded arguments."""
    spec = ACTIONS[action]
    given = step.get("args", {})
    unknown = sorted(set(given) - set(spec.params))
    if unknown:
        raise FixtureError(f"{action} has no parameter(s) {unknown}; it takes "
                           f"{sorted(spec.params)}")
    args: dict[str, Any] = {}
    for name, default in spec.params.items():
        if name in given:
            args[name] = decode(given[name])
        elif default is REQUIRED:
            raise FixtureError(f"{action} needs args.{name}")
        else:
            args[name] = default
    if action == "enter_running":
        await scope.enter(framework)
        return None, args
    if action == "exit_running":
        error = step.get("error")
        if error is not None:
            error = make_exception({"type": error, "message": "raised by the running() body"})
        await scope.exit(error)
        return None, args
    owner = framework.runtime if action in RUNTIME_ACTIONS else framework
    method = getattr(owner, action, None)
    if method is None:
        where = "the framework's runtime" if action in RUNTIME_ACTIONS else "the framework"
        raise FixtureError(f"{where} under test has no {action}()")
    result = method(**args)
    if spec.is_async:
        result = await result
    if action == "run_model_stream" and result is not None:
        result = {"events": await _read_stream(result)}
    elif inspect.isawaitable(result):
        raise FixtureError(f"{action}() is synchronous but returned an awaitable")
    return result, args


async def _read_stream(stream: Any) -> list[dict[str, Any]]:
    """Every event of a stream as plain data; the stream is closed at the end."""
    try:
        return [{"kind": event.kind, "data": dict(event.data)} async for event in stream]
    finally:
        await stream.aclose()
