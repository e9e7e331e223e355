"""The plugin registry: discovery, validation, ordering and per-hook execution plans.

Registration is atomic: every marked implementation of a plugin is discovered and
validated before any is added, so a rejected plugin leaves nothing behind. After each
change the affected hooks get a new ``Plan`` (implementations in execution order); the
runtime reads plans and never sorts or introspects on a call.
"""

from __future__ import annotations

import difflib
import inspect
import logging
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..hooks import HOOK_SPECS, HookSpec, collect_specs
from .errors import PluginValidationError, missing_argument
from .markers import HookimplOpts, impl_options
from .plan import Plan

logger = logging.getLogger(__name__)

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


@dataclass(frozen=True, slots=True)
class HookImpl:
    """One registered implementation of one hook."""

    plugin: object
    plugin_name: str
    hook_name: str
    function: Callable[..., Any]
    function_name: str
    argnames: tuple[str, ...]
    tryfirst: bool
    trylast: bool
    flavor: str
    """``sync``, ``async``, ``generator`` or ``async-generator``."""
    location: str
    """``file:line`` of the function, for error messages and reports."""
    opts: HookimplOpts

    @property
    def is_async(self) -> bool:
        """True when calling the function returns a coroutine."""
        return self.flavor == "async"

    def call(self, kwargs: Mapping[str, Any]) -> Any:
        """Call with the declared arguments taken from ``kwargs`` (slow path, no plan)."""
        try:
            arguments = {name: kwargs[name] for name in self.argnames}
        except KeyError as exc:
            raise missing_argument(self.hook_name, exc.args[0], [self.describe()]) from None
        return self.function(**arguments)

    def describe(self) -> str:
        """``plugin 'p', function 'f' (file:line)`` for messages."""
        return f"plugin {self.plugin_name!r}, function {self.function_name!r} ({self.location})"


@dataclass(frozen=True, slots=True)
class UnknownImpl:
    """A marked function whose hook name matches no spec: recorded, never silently lost."""

    plugin_name: str
    hook_name: str
    function_name: str
    location: str
    suggestion: str | None

    def message(self) -> str:
        hint = f"; did you mean {self.suggestion!r}?" if self.suggestion else ""
        return (
            f"plugin {self.plugin_name!r}: function {self.function_name!r} ({self.location}) "
            f"implements {self.hook_name!r}, which is not a known hook{hint}"
        )


def canonical_name(plugin: object) -> str:
    """Default plugin name: its ``__name__`` (modules, classes), else its id."""
    return getattr(plugin, "__name__", None) or str(id(plugin))


def function_location(function: Callable[..., Any]) -> str:
    """``file:line`` of a function's innermost definition, or ``<unknown>``."""
    inner = inspect.unwrap(getattr(function, "__func__", function))
    code = getattr(inner, "__code__", None)
    if code is None:
        return "<unknown>"
    return f"{code.co_filename}:{code.co_firstlineno}"


def _flavor(function: Callable[..., Any]) -> str:
    if inspect.iscoroutinefunction(function):
        return "async"
    inner = inspect.unwrap(getattr(function, "__func__", function))
    if inspect.isasyncgenfunction(inner):
        return "async-generator"
    if inspect.isgeneratorfunction(inner):
        return "generator"
    return "sync"


def _qualified_name(function: Callable[..., Any]) -> str:
    inner = getattr(function, "__func__", function)
    return getattr(inner, "__qualname__", None) or getattr(inner, "__name__", repr(inner))


class Registry:
    """Plugins in registration order and, per hook, implementations in execution order.

    Execution order follows the reference exactly: implementations are kept in pluggy's
    stored order (trylast inserted at the front, tryfirst appended, normal inserted just
    before the tryfirst block) and run from the end of that list to the front. So
    tryfirst runs first, newest first; then normal, newest first; then trylast, oldest
    first.
    """

    def __init__(self, specs: Mapping[str, HookSpec] | None = None) -> None:
        self._specs: dict[str, HookSpec] = dict(HOOK_SPECS if specs is None else specs)
        self._plugins: dict[str, object] = {}
        self._stored: dict[str, list[HookImpl]] = {}
        self._unknown: list[UnknownImpl] = []
        self.plans: dict[str, Plan] = {}
        """Hook name -> execution plan; the runtime reads this dict directly."""
        self._tracer: Any = None
        self.generation = 0
        """Incremented on every change, so callers can cache what they derive from plugins."""

    # -- specs ---------------------------------------------------------------------

    @property
    def specs(self) -> Mapping[str, HookSpec]:
        return types.MappingProxyType(self._specs)

    def add_hookspecs(self, namespace: object) -> list[str]:
        """Add hook specs from a namespace of ``@hookspec`` functions; returns their names.

        Existing implementations of those names are validated against the new specs first;
        if any does not fit, nothing is added.
        """
        new = collect_specs(namespace)
        clash = sorted(set(new) & set(self._specs))
        if clash:
            raise ValueError(f"hook specs already defined: {', '.join(clash)}")
        for name, spec in new.items():
            for impl in self._stored.get(name, ()):
                self._check_against_spec(impl.plugin_name, name, impl.function, impl.argnames,
                                         impl.location, spec)
        self._specs.update(new)
        self._unknown = [u for u in self._unknown if u.hook_name not in new]
        self._rebuild(new.keys())
        return list(new)

    # -- plugins -------------------------------------------------------------------

    def register(self, plugin: object, name: str | None = None) -> str:
        """Register ``plugin`` (an instance, class or module); returns its name.

        Raises ``PluginValidationError`` and changes nothing when the name or the object is
        already registered or any implementation is invalid.
        """
        plugin_name = name or canonical_name(plugin)
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
            logger.warning("hook.unknown_hook %s", entry.message())
        self._unknown.extend(unknown)
        self._rebuild({impl.hook_name for impl in impls})
        return plugin_name

    def unregister(self, plugin_or_name: object) -> object:
        """Remove a plugin (given by object or name) and all its implementations."""
        plugin_name = self._name_of(plugin_or_name)
        plugin = self._plugins.pop(plugin_name)
        touched = set()
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

    def set_tracer(self, tracer: Any) -> None:
        """Swap every plan for a traced one (``tracer``) or back to plain ones (None)."""
        self._tracer = tracer
        self._rebuild(self._stored.keys())

    @property
    def tracer(self) -> Any:
        return self._tracer

    # -- internals -----------------------------------------------------------------

    def _rebuild(self, hook_names: Any) -> None:
        self.generation += 1
        for hook_name in list(hook_names):
            stored = self._stored.get(hook_name)
            if not stored:
                self.plans.pop(hook_name, None)
                continue
            spec = self._specs.get(hook_name)
            params = spec.params if spec else ()
            self.plans[hook_name] = Plan(hook_name, tuple(reversed(stored)), params, self._tracer)

    def _discover(
        self, plugin: object, plugin_name: str
    ) -> tuple[list[HookImpl], list[UnknownImpl]]:
        impls: list[HookImpl] = []
        unknown: list[UnknownImpl] = []
        for attr in dir(plugin):
            # Looked up statically: a property or another descriptor of the plugin is never
            # run by registration (it may be expensive, or fail); only marked functions,
            # classmethods and staticmethods are fetched, to bind them.
            try:
                static = inspect.getattr_static(plugin, attr)
            except AttributeError:
                continue
            raw = static.__func__ if isinstance(static, staticmethod | classmethod) else static
            if not inspect.isroutine(raw) or impl_options(raw) is None:
                continue
            value = getattr(plugin, attr)
            opts = impl_options(value)
            if opts is None:
                continue
            hook_name = opts.specname or attr
            impl = self._validate(plugin, plugin_name, hook_name, value, opts)
            impls.append(impl)
            if hook_name not in self._specs:
                close = difflib.get_close_matches(hook_name, list(self._specs), n=1, cutoff=0.6)
                unknown.append(
                    UnknownImpl(plugin_name, hook_name, impl.function_name, impl.location,
                                close[0] if close else None)
                )
        return impls, unknown

    def _validate(
        self,
        plugin: object,
        plugin_name: str,
        hook_name: str,
        function: Callable[..., Any],
        opts: HookimplOpts,
    ) -> HookImpl:
        location = function_location(function)
        function_name = _qualified_name(function)

        def reject(problem: str) -> PluginValidationError:
            return PluginValidationError(
                f"plugin {plugin_name!r}, hook {hook_name!r}, function {function_name!r} "
                f"({location}): {problem}",
                plugin_name=plugin_name,
                hook_name=hook_name,
                function=function_name,
                location=location,
            )

        for marker in ("wrapper", "hookwrapper"):
            if getattr(opts, marker):
                raise reject(
                    f"{marker}=True is not supported: the kernel calls implementations "
                    f"directly and has no wrapper support; remove the marker and implement "
                    f"the hook as a plain function (use tryfirst/trylast to order it)"
                )
        if opts.tryfirst and opts.trylast:
            raise reject(
                "tryfirst=True and trylast=True together are contradictory; keep one of them"
            )
        argnames = _argnames(function, reject)
        spec = self._specs.get(hook_name)
        if spec is not None:
            self._check_against_spec(plugin_name, hook_name, function, argnames, location, spec)
        return HookImpl(
            plugin=plugin,
            plugin_name=plugin_name,
            hook_name=hook_name,
            function=function,
            function_name=function_name,
            argnames=argnames,
            tryfirst=opts.tryfirst,
            trylast=opts.trylast,
            flavor=_flavor(function),
            location=location,
            opts=opts,
        )

    @staticmethod
    def _check_against_spec(
        plugin_name: str,
        hook_name: str,
        function: Callable[..., Any],
        argnames: tuple[str, ...],
        location: str,
        spec: HookSpec,
    ) -> None:
        extra = [name for name in argnames if name not in spec.params]
        if extra:
            function_name = _qualified_name(function)
            raise PluginValidationError(
                f"plugin {plugin_name!r}, hook {hook_name!r}, function {function_name!r} "
                f"({location}): declares {', '.join(repr(n) for n in extra)}, which the hook "
                f"does not have; the hook's parameters are "
                f"({', '.join(spec.params) or 'none'}): rename or remove the parameter",
                plugin_name=plugin_name,
                hook_name=hook_name,
                function=function_name,
                location=location,
            )


def _argnames(
    function: Callable[..., Any], reject: Callable[[str], PluginValidationError]
) -> tuple[str, ...]:
    """The parameters the kernel passes: required positional-or-keyword ones.

    Follows pluggy: defaults and ``*args``/``**kwargs`` are never passed; the first
    parameter is dropped for bound methods, and for functions defined in a class when it
    is named ``self``. The signature is read through ``__wrapped__``. Arguments are passed
    by keyword, so parameters that can never be passed (required keyword-only,
    positional-only) are registration errors rather than failures at call time.
    """
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise reject(f"its signature cannot be read ({exc})") from exc
    # inspect.signature already drops the bound first parameter of a method.
    params = list(signature.parameters.values())
    if (
        not inspect.ismethod(function)
        and params
        and params[0].kind in _POSITIONAL
        and params[0].name in ("self", "cls")
        and "." in getattr(inspect.unwrap(function), "__qualname__", "")
    ):
        params = params[1:]
    names: list[str] = []
    for param in params:
        required = param.default is inspect.Parameter.empty
        if param.kind is inspect.Parameter.KEYWORD_ONLY and required:
            raise reject(
                f"keyword-only parameter {param.name!r} has no default, so it could never be "
                f"passed; give it a default or make it a normal parameter"
            )
        if param.kind is inspect.Parameter.POSITIONAL_ONLY and required:
            raise reject(
                f"positional-only parameter {param.name!r} could never be passed (hooks are "
                f"called with keyword arguments); remove the '/'"
            )
        if param.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and required:
            names.append(param.name)
    return tuple(names)


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
