"""Property tests: the kernel's ordering and argument rules, with pluggy 1.6 as the oracle.

The kernel promises pluggy's ordering and (with three documented exceptions) pluggy's
argument-name rules. Rather than restating those rules here, every example registers the
very same plugin objects with the kernel and with a pluggy ``PluginManager`` and compares
what the two decide. pluggy is imported by tests only; the kernel never depends on it.
"""

from __future__ import annotations

import asyncio
import functools
import types
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pluggy
from hypothesis import given, settings
from hypothesis import strategies as st

from hookline.kernel import (
    HOOK_SPECS,
    HookRuntime,
    PluginValidationError,
    Registry,
    hookimpl,
    hookspec,
)
from hookline.kernel.hooks import IMPL_PROJECTS

# pluggy's marker for project "bub" stores its options in ``bub_impl``, which a registry
# accepting the projects hookline and bub (as a Framework's does) also reads; the same
# marked function therefore means the same thing to both sides.
PROJECT = "bub"
pluggy_impl = pluggy.HookimplMarker(PROJECT)
pluggy_spec = pluggy.HookspecMarker(PROJECT)

SETTINGS = settings(max_examples=200, deadline=None)

MESSAGE = {"content": "hi"}
SESSION = "session-1"
STATE = {"k": 1}


class OracleSpecs:
    """pluggy's view of the two hooks used here (no ``firstresult``: we want every result)."""

    @pluggy_spec
    def load_state(self, message: Any, session_id: str) -> Any:
        """Mirror of the kernel's ``load_state`` spec."""

    @pluggy_spec
    def probe(self, message: Any, session_id: str, state: dict) -> Any:
        """Mirror of ``ProbeSpecs.probe``."""


class ProbeSpecs:
    """A three-parameter hook for signature probing, independent of the contract's specs."""

    @hookspec(kind="many")
    def probe(self, message: Any, session_id: str, state: dict) -> Any:
        """Receives whatever the generated implementation declares."""


def new_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager(PROJECT)
    manager.add_hookspecs(OracleSpecs)
    return manager


# ---------------------------------------------------------------------------------------
# Ordering: registration, markers, specname and unregistration
# ---------------------------------------------------------------------------------------

MARKERS = ("none", "tryfirst", "trylast")


@dataclass(frozen=True)
class ImplDef:
    """One implementation of ``load_state`` on a generated plugin."""

    attr: str
    marker: str
    specname: bool


@dataclass(frozen=True)
class PluginDef:
    """A generated plugin plus the churn (unregister / re-register) that follows it."""

    impls: tuple[ImplDef, ...]
    kernel_marker: bool
    """True: also mark with the kernel's ``hookimpl``; False: the kernel reads ``bub_impl``."""
    churn: tuple[tuple[str, int], ...]


def mark(function: Callable[..., Any], impl: ImplDef, kernel_marker: bool) -> Callable[..., Any]:
    """Apply pluggy's marker and optionally the kernel's, with identical options."""
    options: dict[str, Any] = {
        "tryfirst": impl.marker == "tryfirst",
        "trylast": impl.marker == "trylast",
        "specname": "load_state" if impl.specname else None,
    }
    function = pluggy_impl(**options)(function)
    if kernel_marker:
        function = hookimpl(**options)(function)
    return function


def recorder(plugin_name: str, attr: str, log: list[tuple[str, str]]) -> Callable[..., Any]:
    """A ``load_state`` method that logs and returns who ran, so order is observable."""

    def function(self: object, message: Any, session_id: str) -> tuple[str, str]:
        log.append((plugin_name, attr))
        return (plugin_name, attr)

    function.__name__ = attr
    function.__qualname__ = f"{plugin_name}.{attr}"
    return function


def build_plugin(plugin_name: str, plugin: PluginDef, log: list[tuple[str, str]]) -> object:
    body = {
        impl.attr: mark(recorder(plugin_name, impl.attr, log), impl, plugin.kernel_marker)
        for impl in plugin.impls
    }
    return type(plugin_name, (), body)()


ATTRS = ("alpha", "beta", "delta", "gamma", "load_state", "omega", "zeta")
churn_ops = st.lists(
    st.tuples(st.sampled_from(["unregister", "reregister"]), st.integers(0, 11)), max_size=2
)


@st.composite
def plugin_defs(draw: st.DrawFn, *, several: bool) -> PluginDef:
    """One ``load_state`` method per plugin, or (``several``) 1-4 methods via specname."""
    if several:
        attrs = draw(st.lists(st.sampled_from(ATTRS), min_size=1, max_size=4, unique=True))
    else:
        attrs = ["load_state"]
    impls = tuple(ImplDef(attr, draw(st.sampled_from(MARKERS)), several) for attr in attrs)
    return PluginDef(impls, draw(st.booleans()), tuple(draw(churn_ops)))


@dataclass
class Harness:
    """The kernel and pluggy side by side, fed the same plugin objects in the same order."""

    registry: Registry = field(
        default_factory=lambda: Registry(HOOK_SPECS, projects=IMPL_PROJECTS))
    manager: pluggy.PluginManager = field(default_factory=new_manager)
    log: list[tuple[str, str]] = field(default_factory=list)
    registered: list[tuple[str, object]] = field(default_factory=list)
    removed: list[tuple[str, object]] = field(default_factory=list)

    @property
    def runtime(self) -> HookRuntime:
        return HookRuntime(self.registry)

    def register(self, name: str, plugin: object) -> None:
        assert self.registry.register(plugin, name) == name
        assert self.manager.register(plugin, name) == name
        self.registered.append((name, plugin))

    def churn(self, op: str, index: int) -> None:
        if op == "unregister" and self.registered:
            name, plugin = self.registered.pop(index % len(self.registered))
            assert self.registry.unregister(name) is plugin
            self.manager.unregister(name=name)
            self.removed.append((name, plugin))
        elif op == "reregister" and self.removed:
            name, plugin = self.removed.pop(index % len(self.removed))
            self.register(name, plugin)

    def check(self) -> list[tuple[str, str]]:
        """Compare stored and execution order, and the order in which calls really happen."""
        oracle = [
            (impl.plugin_name, impl.function.__name__)
            for impl in self.manager.hook.load_state.get_hookimpls()
        ]
        stored = [(i.plugin_name, i.function.__name__) for i in self.registry.stored_impls(
            "load_state")]
        execution = [(i.plugin_name, i.function.__name__) for i in self.registry.hook_impls(
            "load_state")]
        assert stored == oracle
        assert execution == oracle[::-1]

        self.log.clear()
        results = self.runtime.call_many_sync("load_state", message=MESSAGE, session_id=SESSION)
        assert self.log == execution
        assert results == execution

        self.log.clear()
        assert self.manager.hook.load_state(message=MESSAGE, session_id=SESSION) == execution
        assert self.log == execution
        return execution

    def check_other_primitives(self, execution: list[tuple[str, str]]) -> None:
        """``call_first_sync`` and the async primitives walk the same plan (checked once per
        example: compiling every caller after every change would only slow the test)."""
        self.log.clear()
        first = self.runtime.call_first_sync("load_state", message=MESSAGE, session_id=SESSION)
        assert first == (execution[0] if execution else None)
        assert self.log == execution[:1]

        async def run() -> tuple[list[Any], Any]:
            runtime = self.runtime
            many = await runtime.call_many("load_state", message=MESSAGE, session_id=SESSION)
            first = await runtime.call_first("load_state", message=MESSAGE, session_id=SESSION)
            return many, first

        self.log.clear()
        many, first = asyncio.run(run())
        assert many == execution
        assert first == (execution[0] if execution else None)
        assert self.log == execution + execution[:1]


def run_sequence(plugins: list[PluginDef]) -> None:
    harness = Harness()
    for index, plugin in enumerate(plugins):
        name = f"p{index}"
        harness.register(name, build_plugin(name, plugin, harness.log))
        harness.check()
        for op, which in plugin.churn:
            harness.churn(op, which)
            harness.check()
    harness.check_other_primitives(harness.check())


@SETTINGS
@given(st.lists(plugin_defs(several=False), min_size=1, max_size=12))
def test_order_matches_pluggy(plugins: list[PluginDef]) -> None:
    """Random markers, registrations and unregistrations: same stored and execution order."""
    run_sequence(plugins)


@SETTINGS
@given(st.lists(plugin_defs(several=True), min_size=1, max_size=6))
def test_specname_impls_match_pluggy(plugins: list[PluginDef]) -> None:
    """Several implementations per plugin via specname join the order like separate plugins,
    in alphabetical attribute order, exactly as pluggy adds them."""
    run_sequence(plugins)


def test_worked_example_from_the_contract() -> None:
    """Anchor the oracle to the worked example of docs/plugins.md ("Ordering"), so both
    agree on D A F C B E."""
    markers = {"A": "tryfirst", "B": "trylast", "C": "none", "D": "tryfirst", "E": "trylast",
               "F": "none"}
    harness = Harness()
    for name, marker in markers.items():
        plugin = PluginDef((ImplDef("load_state", marker, False),), True, ())
        harness.register(name, build_plugin(name, plugin, harness.log))
    assert [p for p, _ in harness.check()] == list("DAFCBE")


# ---------------------------------------------------------------------------------------
# Argument names from random signatures
# ---------------------------------------------------------------------------------------

SPEC_NAMES = ("message", "session_id", "state")
EXTRA_NAMES = ("extra", "other")
DEFAULT_SOURCES = ("None", "0", "'d'", "()")

BOUND = ("method", "classmethod")
"""Placements where registration sees a bound method: the first parameter is always dropped."""
CLASS_BODY = ("static", "class_function")
"""Placements where registration sees a plain function defined in a class body."""
PLACEMENTS = ("module", *BOUND, *CLASS_BODY)


@dataclass(frozen=True)
class Param:
    name: str
    default: str | None = None
    """Source text of the default value; None means required."""

    def source(self) -> str:
        return self.name if self.default is None else f"{self.name}={self.default}"


@dataclass(frozen=True)
class Sig:
    """A generated implementation: its signature and where it lives on the plugin."""

    placement: str
    positional: tuple[Param, ...]
    """Positional parameters, the implicit first one (self/cls/...) included."""
    posonly: int
    """How many leading positional parameters come before ``/`` (0: no ``/``)."""
    star_args: bool
    kwonly: tuple[Param, ...]
    star_kwargs: bool
    wrapped: bool
    """Decorated with a ``functools.wraps`` wrapper: the signature is read through it."""
    via_instance: bool
    """For classmethods: register an instance instead of the class."""

    def render(self) -> str:
        parts: list[str] = []
        for index, param in enumerate(self.positional):
            parts.append(param.source())
            if index + 1 == self.posonly:
                parts.append("/")
        if self.star_args:
            parts.append("*args")
        elif self.kwonly:
            parts.append("*")
        parts += [param.source() for param in self.kwonly]
        if self.star_kwargs:
            parts.append("**kwargs")
        decorators = ["@_pmark", "@_kmark", *(["@_wrap"] if self.wrapped else [])]
        if self.placement == "static":
            decorators.insert(0, "@staticmethod")
        elif self.placement == "classmethod":
            decorators.insert(0, "@classmethod")
        lines = [*decorators, f"def probe({', '.join(parts)}):", "    return dict(locals())"]
        if self.placement == "module":
            return "\n".join(lines) + "\n"
        return "class Plugin:\n" + "".join(f"    {line}\n" for line in lines)

    @property
    def kernel_drops_first(self) -> bool:
        if not self.positional:
            return False
        return self.placement in BOUND or (
            self.placement in CLASS_BODY and self.positional[0].name in ("self", "cls")
        )

    @property
    def cls_difference(self) -> bool:
        """Difference (a): a required first ``cls`` of a class-body function is dropped."""
        return (
            self.placement in CLASS_BODY
            and bool(self.positional)
            and self.positional[0].name == "cls"
            and self.positional[0].default is None
        )

    @property
    def unpassable(self) -> list[str]:
        """Difference (b): required positional-only parameters."""
        start = 1 if self.kernel_drops_first else 0
        return [p.name for p in self.positional[start : self.posonly] if p.default is None]

    @property
    def kwonly_required(self) -> tuple[str, ...]:
        """Difference (c): required keyword-only parameters, which the kernel passes."""
        return tuple(p.name for p in self.kwonly if p.default is None)

    def pluggy_equivalent(self) -> Sig:
        """The signature on which pluggy should decide exactly as the kernel does on this one.

        pluggy ignores keyword-only parameters and ``/``, so dropping them changes nothing
        for pluggy; renaming a class-body ``cls`` to ``self`` makes pluggy drop it too.
        """
        positional = self.positional
        if self.placement in CLASS_BODY and positional and positional[0].name == "cls":
            positional = (Param("self", positional[0].default), *positional[1:])
        kwonly = tuple(p for p in self.kwonly if p.default is not None)
        return replace(self, positional=positional, posonly=0, kwonly=kwonly)


def _wrap(function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    return wrapper


def build_probe_plugin(sig: Sig) -> object:
    """Turn a ``Sig`` into a real plugin object: a module, an instance or a class."""
    namespace: dict[str, Any] = {"_kmark": hookimpl, "_pmark": pluggy_impl, "_wrap": _wrap}
    exec(compile(sig.render(), "<generated probe>", "exec"), namespace)
    if sig.placement == "module":
        module = types.ModuleType("generated_probe")
        module.probe = namespace["probe"]  # type: ignore[attr-defined]
        return module
    cls = namespace["Plugin"]
    if sig.placement == "method" or (sig.placement == "classmethod" and sig.via_instance):
        return cls()
    return cls


@st.composite
def signatures(draw: st.DrawFn) -> Sig:
    placement = draw(st.sampled_from(PLACEMENTS))
    if placement in BOUND:
        # A bound method always gets a first positional parameter: without one it could
        # never be called, and the two sides disagree (the kernel rejects it because
        # inspect.signature fails on the bound method; pluggy accepts it with no argnames).
        first: list[Param] = [Param(draw(st.sampled_from(["self", "cls", "this"])))]
    else:
        first_name = draw(st.sampled_from([None, "self", "cls", "this"]))
        first = [] if first_name is None else [Param(first_name)]
    # Extra names appear in about half the examples so that acceptance stays common.
    names = draw(st.lists(st.sampled_from(SPEC_NAMES), max_size=3, unique=True))
    if draw(st.booleans()):
        names += draw(st.lists(st.sampled_from(EXTRA_NAMES), min_size=1, max_size=2, unique=True))
    names = draw(st.permutations(names))
    split = draw(st.integers(0, len(names)))
    required = draw(st.integers(0, split))
    defaults = st.sampled_from(DEFAULT_SOURCES)
    positional = first + [
        Param(name, None if index < required else draw(defaults))
        for index, name in enumerate(names[:split])
    ]
    use_slash = bool(positional) and draw(st.integers(0, 3)) == 0
    posonly = draw(st.integers(1, len(positional))) if use_slash else 0
    kwonly = [Param(name, draw(st.sampled_from([None, *DEFAULT_SOURCES]))) for name in
              names[split:]]
    return Sig(
        placement=placement,
        positional=tuple(positional),
        posonly=posonly,
        star_args=draw(st.booleans()),
        kwonly=tuple(kwonly),
        star_kwargs=draw(st.booleans()),
        wrapped=draw(st.booleans()),
        via_instance=draw(st.booleans()),
    )


@dataclass
class Outcome:
    """What one side decided about one plugin: its argnames, or a rejection."""

    argnames: tuple[str, ...] | None
    error: str = ""
    call: Callable[[], Any] | None = None

    @property
    def accepted(self) -> bool:
        return self.argnames is not None


def kernel_outcome(plugin: object) -> Outcome:
    registry = Registry()
    registry.add_hookspecs(ProbeSpecs)
    try:
        registry.register(plugin, "p")
    except PluginValidationError as exc:
        return Outcome(None, str(exc))
    (impl,) = registry.stored_impls("probe")
    runtime = HookRuntime(registry)
    return Outcome(
        impl.argnames,
        call=lambda: runtime.call_many_sync(
            "probe", message=MESSAGE, session_id=SESSION, state=STATE
        ),
    )


def pluggy_outcome(plugin: object) -> Outcome:
    manager = new_manager()
    try:
        manager.register(plugin, "p")
    except pluggy.PluginValidationError as exc:
        return Outcome(None, str(exc))
    (impl,) = manager.hook.probe.get_hookimpls()
    return Outcome(
        tuple(impl.argnames),
        call=lambda: manager.hook.probe(message=MESSAGE, session_id=SESSION, state=STATE),
    )


def call_result(outcome: Outcome) -> tuple[str, Any]:
    """The dispatch's return value, or the exception type (messages differ by design:
    pluggy passes arguments positionally, the kernel by keyword)."""
    assert outcome.call is not None
    try:
        return ("ok", outcome.call())
    except TypeError as exc:
        return ("error", type(exc))


@SETTINGS
@given(signatures())
def test_argnames_match_pluggy(sig: Sig) -> None:
    """Accepted implementations get pluggy's argnames; extra required names are rejected by
    both; the documented differences (a), (b) and (c) are asserted explicitly."""
    plugin = build_probe_plugin(sig)
    kernel = kernel_outcome(plugin)
    pluggy_same = pluggy_outcome(plugin)
    equivalent = sig.pluggy_equivalent()
    pluggy_equiv = (
        pluggy_same if equivalent == sig else pluggy_outcome(build_probe_plugin(equivalent))
    )

    if sig.unpassable:
        # (b): the kernel refuses parameters it could never pass, naming one of them.
        assert not kernel.accepted
        assert "positional-only" in kernel.error
        assert "plugin 'p', hook 'probe'" in kernel.error
        assert any(repr(name) in kernel.error for name in sig.unpassable)
    else:
        # (c): required keyword-only parameters are passed too, after pluggy's argnames;
        # like any passed name they must be the hook's.
        kwonly = sig.kwonly_required
        kwonly_fit = set(kwonly) <= set(SPEC_NAMES)
        assert kernel.accepted == (pluggy_equiv.accepted and kwonly_fit), (
            sig.render(), kernel, pluggy_equiv)
        if kernel.accepted:
            assert pluggy_equiv.argnames is not None
            assert kernel.argnames == pluggy_equiv.argnames + kwonly, sig.render()
        else:
            assert "which the hook does not have" in kernel.error
            if not pluggy_equiv.accepted:
                assert "can not be found in the hookspec" in pluggy_equiv.error

    if sig.cls_difference:
        # (a): pluggy 1.6 keeps a class-body ``cls`` as a required argument, not in the spec.
        assert not pluggy_same.accepted
        assert "cls" in pluggy_same.error
    else:
        # keyword-only parameters and '/' make no difference to pluggy at registration.
        assert (pluggy_same.accepted, pluggy_same.argnames) == (
            pluggy_equiv.accepted,
            pluggy_equiv.argnames,
        )
        if kernel.accepted and equivalent == sig:
            # Same function on both sides: the dispatch passes the same values.
            assert call_result(kernel) == call_result(pluggy_same), sig.render()


@SETTINGS
@given(signatures())
def test_kernel_never_passes_unlisted_names(sig: Sig) -> None:
    """Whatever the signature, an accepted implementation declares only spec names."""
    kernel = kernel_outcome(build_probe_plugin(sig))
    if kernel.accepted:
        assert kernel.argnames is not None
        assert set(kernel.argnames) <= set(SPEC_NAMES)
