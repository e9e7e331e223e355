"""One registered implementation (``HookImpl``), and how a marked function becomes one.

Everything read from a function (its parameters, whether it is async, where it is
defined) is read once here, at registration, so that dispatch never inspects anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

from .errors import PluginValidationError, missing_argument
from .markers import HookimplOpts


class Tracer(Protocol):
    """What dispatch asks of a tracer: a recording stand-in for one implementation."""

    def wrap(self, impl: HookImpl) -> Callable[..., Any]: ...


class DispatchObserver(Tracer, Protocol):
    """A tracer that also sees each plan dispatch whole (one span per dispatch, say).

    ``wrap_dispatch`` is asked once per compiled caller, while the observer is the
    registry's tracer, for a stand-in of the same sync/async nature; the plain plans,
    built when no tracer is set, never ask anything of it. ``kind`` is a dispatch kind or
    ``first_each`` (async, returning ``(impl, value)``, or ``(None, None)``).
    """

    def wrap_dispatch(self, hook_name: str, kind: str, impls: tuple[HookImpl, ...],
                      caller: Callable[..., Any]) -> Callable[..., Any]: ...


class HookImpl(NamedTuple):
    """One registered implementation of one hook."""

    plugin: object
    plugin_name: str
    hook_name: str
    function: Callable[..., Any]
    function_name: str
    argnames: tuple[str, ...]
    """The parameters it receives (the required ones, bar positional-only), in order."""
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

    def call(self, kwargs: Mapping[str, Any], tracer: Tracer | None = None) -> Any:
        """Call with the declared arguments taken from ``kwargs`` (slow path, no plan);
        through ``tracer``'s recorder when one is given (the registry's, while tracing)."""
        try:
            arguments = {name: kwargs[name] for name in self.argnames}
        except KeyError as exc:
            raise missing_argument(self.hook_name, exc.args[0], [self.describe()]) from None
        if tracer is not None:
            return tracer.wrap(self)(**arguments)
        return self.function(**arguments)

    def describe(self) -> str:
        """``plugin 'p', function 'f' (file:line)`` for messages."""
        return f"plugin {self.plugin_name!r}, function {self.function_name!r} ({self.location})"


class UnknownImpl(NamedTuple):
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
    import inspect

    inner = inspect.unwrap(getattr(function, "__func__", function))
    code = getattr(inner, "__code__", None)
    if code is None:
        return "<unknown>"
    return f"{code.co_filename}:{code.co_firstlineno}"


def qualified_name(function: Callable[..., Any]) -> str:
    """The function's ``__qualname__`` (of the function inside a bound method)."""
    inner = getattr(function, "__func__", function)
    return str(getattr(inner, "__qualname__", None) or getattr(inner, "__name__", repr(inner)))


class Rejection(NamedTuple):
    """Why registration refuses one implementation, in parts a tool can show apart.

    ``code`` is stable (``wrapper``, ``hookwrapper``, ``tryfirst-trylast``,
    ``signature-unreadable``, ``positional-only``, ``unknown-parameter``, ``option-type``,
    ``missing-self``); ``reason`` says what is wrong and ``fix`` what to do.
    """

    code: str
    reason: str
    fix: str

    def text(self) -> str:
        """``reason; fix``: the tail of the ``PluginValidationError`` message."""
        return f"{self.reason}; {self.fix}" if self.fix else self.reason


def make_impl(
    plugin: object,
    plugin_name: str,
    hook_name: str,
    function: Callable[..., Any],
    opts: HookimplOpts,
) -> HookImpl:
    """Check the marker options and the signature of ``function`` and describe it.

    Raises ``PluginValidationError`` naming the plugin, hook, function and location, for
    the first problem ``inspect_impl`` finds.
    """
    impl, rejections = inspect_impl(plugin, plugin_name, hook_name, function, opts)
    if rejections:
        raise rejection_error(impl, rejections[0])
    return impl


def inspect_impl(
    plugin: object,
    plugin_name: str,
    hook_name: str,
    function: Callable[..., Any],
    opts: HookimplOpts,
) -> tuple[HookImpl, list[Rejection]]:
    """Describe ``function`` and list every problem of its marker options and signature.

    The ``HookImpl`` is built even when there are problems (its ``argnames`` then hold
    only the parameters that could be passed), so a checker can report all of them.
    """
    rejections = _option_rejections(opts)
    rejections += [
        Rejection(
            marker,
            f"{marker}=True is not supported: the kernel calls implementations directly "
            f"and has no wrapper support",
            "remove the marker and implement the hook as a plain function (use "
            "tryfirst/trylast to order it)",
        )
        for marker in ("wrapper", "hookwrapper")
        if getattr(opts, marker) is True
    ]
    if opts.tryfirst is True and opts.trylast is True:
        rejections.append(Rejection(
            "tryfirst-trylast", "tryfirst=True and trylast=True together are contradictory",
            "keep one of them",
        ))
    argnames, signature_rejections = _argnames(function)
    impl = HookImpl(
        plugin=plugin,
        plugin_name=plugin_name,
        hook_name=hook_name,
        function=function,
        function_name=qualified_name(function),
        argnames=argnames,
        tryfirst=opts.tryfirst,
        trylast=opts.trylast,
        flavor=_flavor(function),
        location=function_location(function),
        opts=opts,
    )
    return impl, [*rejections, *signature_rejections]


BOOL_OPTIONS = ("tryfirst", "trylast", "wrapper", "hookwrapper", "optionalhook", "fail_closed")


def hook_name_of(attr: str, opts: HookimplOpts) -> str:
    """The hook an implementation found under ``attr`` implements: its ``specname`` when
    that is a name (a wrong one is rejected by ``inspect_impl``), else ``attr``."""
    return opts.specname if isinstance(opts.specname, str) and opts.specname else attr


def _option_rejections(opts: HookimplOpts) -> list[Rejection]:
    """Options of the wrong type: a string such as ``tryfirst="no"`` would count as true."""
    rejections = [
        Rejection("option-type", f"{name}={getattr(opts, name)!r} is not True or False",
                  f"write {name}=True, or leave it out")
        for name in BOOL_OPTIONS
        if not isinstance(getattr(opts, name), bool)
    ]
    specname: object = opts.specname  # typed str | None; a marker stores what it is given
    if specname is not None and not isinstance(specname, str):
        rejections.append(Rejection(
            "option-type", f"specname={specname!r} is not a hook name",
            "give the name of the hook as a string, or leave specname out"))
    return rejections


def rejection_error(impl: HookImpl, rejection: Rejection) -> PluginValidationError:
    """The ``PluginValidationError`` registration raises for ``rejection`` of ``impl``."""
    return PluginValidationError(
        problem_message(impl.plugin_name, impl.hook_name, impl.function_name, impl.location,
                        rejection.text()),
        plugin_name=impl.plugin_name,
        hook_name=impl.hook_name,
        function=impl.function_name,
        location=impl.location,
        code=rejection.code,
    )


def problem_message(plugin: str, hook: str, function: str, location: str, what: str) -> str:
    """How every problem of one implementation is worded: who, where, then what."""
    return f"plugin {plugin!r}, hook {hook!r}, function {function!r} ({location}): {what}"


def _flavor(function: Callable[..., Any]) -> str:
    import inspect

    if inspect.iscoroutinefunction(function):
        return "async"
    inner = inspect.unwrap(getattr(function, "__func__", function))
    if inspect.isasyncgenfunction(inner):
        return "async-generator"
    if inspect.isgeneratorfunction(inner):
        return "generator"
    return "sync"


def _argnames(function: Callable[..., Any]) -> tuple[tuple[str, ...], list[Rejection]]:
    """The parameters the kernel passes (the required ones it can pass by keyword), and
    the parameters that could never be passed.

    Follows pluggy, except for keyword-only parameters: defaults and ``*args``/``**kwargs``
    are never passed; the first parameter is dropped for bound methods, and for functions
    defined in a class when it is named ``self``. The signature is read through
    ``__wrapped__``. Arguments are passed by keyword, so a required keyword-only parameter
    is passed like a normal one (pluggy never passes it: every call fails), and a required
    positional-only one, which can never be passed, is a registration error rather than a
    failure at call time.
    """
    import inspect

    if bound_first_parameter(function) == "":
        return (), [MISSING_SELF]
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        return (), [Rejection("signature-unreadable", f"its signature cannot be read ({exc})",
                              "")]
    # inspect.signature already drops the bound first parameter of a method.
    params = list(signature.parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if (
        not inspect.ismethod(function)
        and params
        and params[0].kind in positional
        and params[0].name in ("self", "cls")
        and "." in getattr(inspect.unwrap(function), "__qualname__", "")
    ):
        params = params[1:]
    by_keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    names: list[str] = []
    rejections: list[Rejection] = []
    for param in params:
        required = param.default is inspect.Parameter.empty
        if param.kind is inspect.Parameter.POSITIONAL_ONLY and required:
            rejections.append(Rejection(
                "positional-only",
                f"positional-only parameter {param.name!r} could never be passed (hooks are "
                f"called with keyword arguments)",
                "remove the '/'",
            ))
        if param.kind in by_keyword and required:
            names.append(param.name)
    return tuple(names), rejections


MISSING_SELF = Rejection(
    "missing-self",
    "it is a method without a first parameter for the plugin object (self)",
    "add self as its first parameter, or make it a @staticmethod")


def misplaced_self(name: str) -> Rejection:
    """A method written without self: its first parameter, named like a parameter of the
    hook, would receive the plugin object."""
    return Rejection(
        "missing-self",
        f"its first parameter {name!r}, which the hook passes, receives the plugin object "
        f"instead: a method's first parameter is the object (self)",
        "add self before it, or make it a @staticmethod")


def bound_first_parameter(function: Callable[..., Any]) -> str | None:
    """For a bound method, the parameter its object fills (``self``, ``cls``), or ``""``
    when it has no positional one to fill; None for anything else (or an unreadable
    signature, which the signature check reports)."""
    import inspect

    if not inspect.ismethod(function):
        return None
    try:
        params = list(inspect.signature(function.__func__).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                  inspect.Parameter.VAR_POSITIONAL)
    return params[0].name if params and params[0].kind in positional else ""
