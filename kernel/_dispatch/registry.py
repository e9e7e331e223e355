"""The plugin registry: discovery, validation, ordering and per-hook execution plans.

A registry starts with the hooks its owner declares (``Registry(specs)``, ``add_specs``,
``add_hookspecs``) and accepts the implementation marks of the projects those hooks
belong to (or of the projects it is given). Registration is atomic: every marked
implementation of a plugin is discovered and validated before any is added, so a
rejected plugin leaves nothing behind. After each change the affected hooks get a new
``Plan`` (implementations in execution order); the runtime reads plans and never sorts
or introspects on a call.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Iterator, Mapping
from typing import NamedTuple

from .errors import PluginValidationError, check_project, get_logger
from .impl import (
    HookImpl,
    Rejection,
    Tracer,
    UnknownImpl,
    bound_first_parameter,
    canonical_name,
    function_location,
    hook_name_of,
    inspect_impl,
    make_impl,
    misplaced_self,
    problem_message,
    qualified_name,
    rejection_error,
)
from .markers import marked_routines
from .plan import Plan
from .specs import HookSpec, collect_specs

SpecSource = Mapping[str, HookSpec] | Iterable[HookSpec]
"""Specs as a ``Registry`` takes them: ``HookSpec``s, or a mapping of name to ``HookSpec``."""


class Registry:
    """Plugins in registration order and, per hook, implementations in execution order.

    Execution order follows the reference exactly: implementations are kept in pluggy's
    stored order (trylast inserted at the front, tryfirst appended, normal inserted just
    before the tryfirst block) and run from the end of that list to the front. So
    tryfirst runs first, newest first; then normal, newest first; then trylast, oldest
    first.
    """

    def __init__(self, specs: SpecSource = (), *, projects: Iterable[str] | None = None) -> None:
        """A registry of the hooks ``specs`` declares (none by default).

        ``projects`` are the projects whose implementation marks (``<project>_impl``) are
        read, in order of precedence; by default, the projects of the specs, as they are
        added. A function carrying none of those marks is not an implementation.
        """
        self._specs: dict[str, HookSpec] = {}
        self._projects: tuple[str, ...] | None = None
        if projects is not None:
            if isinstance(projects, str):
                raise TypeError(f"projects must be a list of project names, not {projects!r}")
            self._projects = tuple(check_project(project) for project in projects)
        self._accepted: tuple[str, ...] = ()
        self._plugins: dict[str, object] = {}
        self._stored: dict[str, list[HookImpl]] = {}
        self._unknown: list[UnknownImpl] = []
        self.plans: dict[str, Plan] = {}
        """Hook name -> execution plan; the runtime reads this dict directly."""
        self._tracer: Tracer | None = None
        self.generation = 0
        """Incremented on every change, so callers can cache what they derive from plugins."""
        self.add_specs(specs)

    # -- specs ---------------------------------------------------------------------

    @property
    def specs(self) -> Mapping[str, HookSpec]:
        return types.MappingProxyType(self._specs)

    @property
    def projects(self) -> tuple[str, ...]:
        """The projects whose implementation marks this registry reads, in precedence order."""
        return self._accepted

    def add_specs(self, specs: SpecSource) -> list[str]:
        """Declare hooks; returns their names.

        Existing implementations of those names are validated against the new specs first;
        if any does not fit, or a name is declared already, nothing is added.
        """
        new = _spec_dict(specs)
        clash = sorted(set(new) & set(self._specs))
        if clash:
            raise ValueError(f"hook specs already defined: {', '.join(clash)}")
        for name, spec in new.items():
            for impl in self._stored.get(name, ()):
                self._check_against_spec(impl, spec)
        self._specs.update(new)
        if self._projects is not None:
            self._accepted = self._projects
        else:
            owners = (spec.project for spec in self._specs.values() if spec.project)
            self._accepted = tuple(dict.fromkeys(owners))
        self._unknown = [u for u in self._unknown if u.hook_name not in new]
        self._rebuild(new.keys())
        return list(new)

    def add_hookspecs(self, namespace: object, project: str | None = None) -> list[str]:
        """``add_specs`` of the ``@hookspec`` functions of a namespace (a class, module or
        instance); only marks of ``project`` count when it is given."""
        return self.add_specs(collect_specs(namespace, project))

    # -- plugins -------------------------------------------------------------------

    def register(self, plugin: object, name: str | None = None) -> str:
        """Register ``plugin`` (an instance, class or module); returns its name.

        Raises ``PluginValidationError`` and changes nothing when the name or the object is
        already registered or any implementation is invalid.
        """
        plugin_name = _plugin_name(plugin, name)
        if plugin_name in self._plugins:
            raise PluginValidationError(
                f"Plugin name already registered: {plugin_name!r} "
                f"({self._plugins[plugin_name]!r}); register the new plugin under another "
                f"name or unregister the old one first",
                plugin_name=plugin_name,
            )
        for other_name, other in self._plugins.items():
            if other is plugin:
                raise PluginValidationError(
                    f"Plugin already registered under a different name: {other_name!r} "
                    f"(tried {plugin_name!r}); a plugin object can be registered only once",
                    plugin_name=plugin_name,
                )
        impls, unknown = self._discover(plugin, plugin_name)
        # Everything is validated: commit.
        self._plugins[plugin_name] = plugin
        for impl in impls:
            _insert(self._stored.setdefault(impl.hook_name, []), impl)
        for entry in unknown:
            get_logger("registry").warning("hook.unknown_hook %s", entry.message())
        self._unknown.extend(unknown)
        self._rebuild({impl.hook_name for impl in impls})
        return plugin_name

    def unregister(self, plugin_or_name: object) -> object:
        """Remove a plugin (given by object or name) and all its implementations."""
        plugin_name = self._name_of(plugin_or_name)
        plugin = self._plugins.pop(plugin_name)
        touched: set[str] = set()
        for hook_name, impls in self._stored.items():
            kept = [impl for impl in impls if impl.plugin_name != plugin_name]
            if len(kept) != len(impls):
                impls[:] = kept
                touched.add(hook_name)
        for hook_name in [h for h, impls in self._stored.items() if not impls]:
            del self._stored[hook_name]
        self._unknown = [u for u in self._unknown if u.plugin_name != plugin_name]
        self._rebuild(touched)
        return plugin

    def _name_of(self, plugin_or_name: object) -> str:
        if isinstance(plugin_or_name, str) and plugin_or_name in self._plugins:
            return plugin_or_name
        for name, plugin in self._plugins.items():
            if plugin is plugin_or_name:
                return name
        raise ValueError(
            f"no plugin registered as {plugin_or_name!r}; "
            f"registered: {', '.join(self._plugins) or '(none)'}"
        )

    def get_plugin(self, name: str) -> object | None:
        return self._plugins.get(name)

    def get_name(self, plugin: object) -> str | None:
        return next((n for n, p in self._plugins.items() if p is plugin), None)

    def has_plugin(self, name: str) -> bool:
        return name in self._plugins

    def list_name_plugin(self) -> list[tuple[str, object]]:
        """``(name, plugin)`` pairs in registration order."""
        return list(self._plugins.items())

    # -- hooks ---------------------------------------------------------------------

    def hook_impls(self, hook_name: str) -> tuple[HookImpl, ...]:
        """Implementations of a hook in execution order (what runs first comes first)."""
        plan = self.plans.get(hook_name)
        return plan.impls if plan else ()

    def stored_impls(self, hook_name: str) -> tuple[HookImpl, ...]:
        """Implementations in pluggy's stored order: the reverse of execution order."""
        return tuple(self._stored.get(hook_name, ()))

    def hook_names(self) -> list[str]:
        """Spec names in spec order, then unspecified names that have implementations."""
        extra = sorted(name for name in self._stored if name not in self._specs)
        return [*self._specs, *extra]

    @property
    def unknown_impls(self) -> tuple[UnknownImpl, ...]:
        return tuple(self._unknown)

    def iter_impls(self) -> Iterator[HookImpl]:
        for impls in self._stored.values():
            yield from impls

    def plugin_hooks(self, name: str) -> set[str]:
        """Hook names the named plugin implements (through marked functions only)."""
        return {impl.hook_name for impl in self.iter_impls() if impl.plugin_name == name}

    # -- tracing -------------------------------------------------------------------

    def set_tracer(self, tracer: Tracer | None) -> None:
        """Swap every plan for a traced one (``tracer``) or back to plain ones (None)."""
        self._tracer = tracer
        self._rebuild(self._stored.keys())

    @property
    def tracer(self) -> Tracer | None:
        return self._tracer

    # -- internals -----------------------------------------------------------------

    def _rebuild(self, hook_names: Iterable[str]) -> None:
        self.generation += 1
        for hook_name in list(hook_names):
            stored = self._stored.get(hook_name)
            if not stored:
                self.plans.pop(hook_name, None)
                continue
            spec = self._specs.get(hook_name)
            params = spec.params if spec else ()
            self.plans[hook_name] = Plan(hook_name, tuple(reversed(stored)), params, self._tracer)

    def validate(self, plugin: object, name: str | None = None) -> PluginCheck:
        """Every problem ``register(plugin, name)`` would meet, registering nothing.

        ``register`` stops at the first problem; this lists them all, for tools that check
        a plugin before it is installed (``hookline plugins check``). It runs the same
        discovery and the same checks, plus two findings ``register`` does not refuse: a
        marked function naming no hook (``unknown-hook``) and an unmarked routine named
        like a hook (``unmarked``), which are ``fatal=False``. Name clashes with plugins
        already registered are not checked.
        """
        plugin_name = _plugin_name(plugin, name)
        impls: list[HookImpl] = []
        problems: list[PluginProblem] = []
        for attr, raw, value, opts in marked_routines(plugin, self._accepted, marked_only=False):
            if opts is None:
                if attr in self._specs:
                    problems.append(PluginProblem(
                        plugin_name, attr, qualified_name(raw), function_location(raw),
                        "unmarked",
                        f"is named like the hook {attr!r} but carries no mark this registry "
                        f"reads ({', '.join(f'{p}_impl' for p in self._accepted) or 'none'}),"
                        f" so it is ignored",
                        "mark it with @hookimpl, or rename it if it is not meant as one",
                        fatal=False,
                    ))
                continue
            hook_name = hook_name_of(attr, opts)
            impl, rejections = inspect_impl(plugin, plugin_name, hook_name, value, opts)
            spec = self._specs.get(hook_name)
            if spec is not None:
                rejections += self._spec_rejections(impl, spec)
            problems += [PluginProblem.of(impl, rejection) for rejection in rejections]
            if spec is None:
                unknown = self._unknown_impl(impl)
                hint = f"did you mean {unknown.suggestion!r}? " if unknown.suggestion else ""
                problems.append(PluginProblem(
                    plugin_name, hook_name, impl.function_name, impl.location, "unknown-hook",
                    f"implements {hook_name!r}, which is not a known hook",
                    f"{hint}rename the function, or name a known hook with specname=",
                    fatal=False, suggestion=unknown.suggestion,
                ))
            impls.append(impl)
        return PluginCheck(plugin_name, tuple(impls), tuple(problems))

    def _discover(
        self, plugin: object, plugin_name: str
    ) -> tuple[list[HookImpl], list[UnknownImpl]]:
        impls: list[HookImpl] = []
        unknown: list[UnknownImpl] = []
        for attr, _raw, value, opts in marked_routines(plugin, self._accepted):
            assert opts is not None
            hook_name = hook_name_of(attr, opts)
            impl = make_impl(plugin, plugin_name, hook_name, value, opts)
            spec = self._specs.get(hook_name)
            if spec is not None:
                self._check_against_spec(impl, spec)
            impls.append(impl)
            if spec is None:
                unknown.append(self._unknown_impl(impl))
        return impls, unknown

    def _unknown_impl(self, impl: HookImpl) -> UnknownImpl:
        import difflib

        close = difflib.get_close_matches(impl.hook_name, list(self._specs), n=1, cutoff=0.6)
        return UnknownImpl(impl.plugin_name, impl.hook_name, impl.function_name, impl.location,
                           close[0] if close else None)

    @staticmethod
    def _spec_rejections(impl: HookImpl, spec: HookSpec) -> list[Rejection]:
        rejections = []
        first = bound_first_parameter(impl.function)
        if first and first in spec.params:
            rejections.append(misplaced_self(first))
        extra = [name for name in impl.argnames if name not in spec.params]
        if extra:
            rejections.append(Rejection(
                "unknown-parameter",
                f"declares {', '.join(repr(n) for n in extra)}, which the hook does not have",
                f"the hook's parameters are ({', '.join(spec.params) or 'none'}): rename or "
                f"remove the parameter",
            ))
        return rejections

    @classmethod
    def _check_against_spec(cls, impl: HookImpl, spec: HookSpec) -> None:
        rejections = cls._spec_rejections(impl, spec)
        if rejections:
            raise rejection_error(impl, rejections[0])


class PluginProblem(NamedTuple):
    """One finding of ``Registry.validate``: where, what is wrong, and the fix."""

    plugin_name: str
    hook_name: str
    function_name: str
    location: str
    """``file:line`` of the function, as in ``PluginValidationError``."""
    code: str
    """``Rejection.code``, or ``unknown-hook`` / ``unmarked``."""
    reason: str
    fix: str
    fatal: bool = True
    """True when ``register`` refuses the plugin for it."""
    suggestion: str | None = None
    """For ``unknown-hook``: the closest known hook name, if any."""

    @classmethod
    def of(cls, impl: HookImpl, rejection: Rejection) -> PluginProblem:
        return cls(impl.plugin_name, impl.hook_name, impl.function_name, impl.location,
                   rejection.code, rejection.reason, rejection.fix)

    def message(self) -> str:
        """The whole message, worded like a ``PluginValidationError``."""
        what = Rejection(self.code, self.reason, self.fix).text()
        return problem_message(self.plugin_name, self.hook_name, self.function_name,
                               self.location, what)


class PluginCheck(NamedTuple):
    """What ``Registry.validate`` found on one plugin."""

    plugin_name: str
    impls: tuple[HookImpl, ...]
    """Every marked implementation, valid or not, in discovery (attribute) order."""
    problems: tuple[PluginProblem, ...]

    @property
    def ok(self) -> bool:
        """True when ``register`` would accept the plugin (no fatal problem)."""
        return not any(problem.fatal for problem in self.problems)


def _plugin_name(plugin: object, name: object) -> str:
    """The name a plugin is registered under: ``name``, else its canonical name."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"a plugin name must be a string, not {name!r} "
                        f"({type(name).__name__}); registering {plugin!r}")
    return name or canonical_name(plugin)


def _spec_dict(specs: SpecSource) -> dict[str, HookSpec]:
    """Specs by name, refusing a name given twice or a mapping key that is not the name."""
    found: dict[str, HookSpec] = {}
    if isinstance(specs, Mapping):
        pairs: Iterable[tuple[str, HookSpec]] = specs.items()
    else:
        pairs = ((spec.name, spec) for spec in specs)
    for name, spec in pairs:
        if not isinstance(spec, HookSpec):
            raise TypeError(f"hook spec {name!r} must be a HookSpec, got {type(spec).__name__}")
        if name != spec.name:
            raise ValueError(f"hook spec {spec.name!r} is filed under another name, {name!r}")
        if name in found:
            raise ValueError(f"hook spec {name!r} is given twice")
        found[name] = spec
    return found


def _insert(stored: list[HookImpl], impl: HookImpl) -> None:
    """Insert at pluggy's position: trylast at the front, tryfirst at the end, normal
    just before the tryfirst block."""
    if impl.trylast:
        stored.insert(0, impl)
    elif impl.tryfirst:
        stored.append(impl)
    else:
        index = len(stored)
        while index > 0 and stored[index - 1].tryfirst:
            index -= 1
        stored.insert(index, impl)
