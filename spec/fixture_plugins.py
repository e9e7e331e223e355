"""Fixture plugins: the instances, classes and modules a fixture's ``plugins`` describe.

Standard library only; the runner imports this module. Each implementation is a real
function compiled from the fixture (so a kernel reads its signature as it would a
plugin's), which records its calls in a ``Transcript`` and answers what the fixture says.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .fixture_values import decode, describe
from .framework_steps import SELF_KEY, FixtureError, Tags, assign, make_exception

Mark = Callable[[Callable[..., Any], dict[str, Any]], Callable[..., Any]]
"""The adapter's ``mark``: applies the kernel's implementation marker with options."""


@dataclass
class Transcript:
    """What the fixture's implementations (and the values they made) saw, in order."""

    adapter: Any = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    coroutines: list[Any] = field(default_factory=list)
    raised: list[BaseException] = field(default_factory=list)
    """Exceptions the implementations raised (for ``error.identical``)."""

    def record(self, entry: dict[str, Any]) -> None:
        """Append an entry, described now: later changes to its values do not show."""
        self.calls.append(describe(entry, self.adapter))


def _make_function(
    plugin: str, spec: dict[str, Any], prefix: str, transcript: Transcript, tags: Tags,
    group: str | None = None,
) -> Callable[..., Any]:
    attr = spec.get("attr", spec["hook"])
    params = spec.get("params", "")
    mode = spec.get("mode", "sync")
    returns = spec.get("returns", {"$none": True})
    raises = spec.get("raises")
    sets = spec.get("sets", {})
    logs = spec.get("logs")
    if logs is not None and group is None:
        raise FixtureError(f"{plugin}.{attr}: logs needs a plugin with a group")
    full_params = ", ".join(p for p in (prefix, params) if p)

    def hit(seen: dict[str, Any]) -> Any:
        args = {k: v for k, v in seen.items() if k not in ("self", "cls")}
        transcript.record({"plugin": plugin, "function": attr, "args": args})
        # ``$self`` reads the plugin object: it travels with the arguments, under a key
        # no parameter can have.
        scope = {**args, SELF_KEY: seen["self"]} if "self" in seen else args
        for path, value in sets.items():
            assign(args, path, decode(value, tags, scope))
        if logs is not None:
            log = getattr(transcript.adapter, "log", None)
            if log is None:
                raise FixtureError("the adapter has no log(); it cannot log as a plugin")
            log(group, logs.get("level", "WARNING"), logs["message"])
        if raises:
            exc = make_exception(raises)
            transcript.raised.append(exc)
            raise exc
        # Decoded at every call: each call gets fresh values (streams, generators, ...).
        return decode(returns, tags, scope)

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
            transcript.record(entry)
            return inner(*args, **kwargs)

    return function


def _tripwire_property(plugin: str, attr: str, transcript: Transcript) -> property:
    """A property that records being read (as `property:<attr>`) and then raises."""

    def read(self: object) -> Any:
        transcript.record({"plugin": plugin, "function": f"property:{attr}", "args": {}})
        raise RuntimeError(f"property {attr} of fixture plugin {plugin} was read")

    return property(read)


def build_plugin(data: dict[str, Any], mark: Mark, transcript: Transcript, tags: Tags) -> object:
    """An instance, class or module carrying the fixture plugin's implementations; for an
    adapter whose kernel runs elsewhere (``remote_plugin``), what it makes of the
    description, since the plugin is built where the kernel is."""
    remote = getattr(transcript.adapter, "remote_plugin", None)
    if remote is not None:
        return remote(data, transcript)
    name, form = data["name"], data.get("form", "instance")
    factory = data.get("factory")
    if factory is not None and ("group" not in data or form != "instance"):
        raise FixtureError(f"plugin {name}: factory needs a group and the instance form")
    prefix = {"instance": "self", "class": "cls", "static": "", "module": ""}[form]
    members: dict[str, Any] = {}
    for spec in data.get("impls", []):
        own_prefix = prefix if spec.get("self", True) else ""  # a method written without it
        function = _make_function(name, spec, own_prefix, transcript, tags, data.get("group"))
        if spec.get("marked", True):
            function = mark(function, dict(spec.get("markers", {})))
        wrap = {"class": classmethod, "static": staticmethod}.get(form)
        members[spec.get("attr", spec["hook"])] = wrap(function) if wrap else function
    for attr, value in data.get("attributes", {}).items():
        members[attr] = decode(value, tags)
    for attr in data.get("properties", []):
        members[attr] = _tripwire_property(name, attr, transcript)
    if form == "module":
        module = types.ModuleType(f"spec_plugin_{name}")
        vars(module).update(members)
        return module
    if factory is not None:
        members["__init__"] = _factory_init(name, factory, tags)
    cls = type(f"Plugin{name}", (), members)
    if factory is not None:
        return cls  # the group's loader calls it with the framework
    return cls() if form == "instance" else cls


def _factory_init(name: str, factory: dict[str, Any], tags: Tags) -> Callable[..., None]:
    """The constructor of a ``factory`` plugin: called with the framework by the group's
    loader, it keeps it as ``self.framework``, decodes ``makes`` (so what those values do
    when made, such as registering a tool, happens while the plugin loads), then raises
    ``raises`` if given."""

    def __init__(self: Any, framework: Any) -> None:
        self.framework = framework
        self.made = decode(factory.get("makes", []), tags, {})
        if "raises" in factory:
            raise make_exception(factory["raises"])

    __init__.__qualname__ = f"Plugin{name}.__init__"
    return __init__
