"""Implementation markers, in pluggy's model: a project's marks are named after it.

``HookimplMarker("acme")`` stores an implementation's options in the function attribute
``acme_impl`` (``HookspecMarker``, in ``specs``, stores spec options in ``acme_spec``). A
registry reads the ``<project>_impl`` marks of the projects it accepts and nothing else,
so a mark means the same to every copy of this code that accepts its project, and a
function marked for another project is not an implementation (skipped, no warning).

A marker only records options; the registry reads and validates them when a plugin is
registered, because only then are the plugin name and the hook spec known, and an error
can name both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple, TypeVar, overload

from .errors import check_project

F = TypeVar("F", bound=Callable[..., Any])

_OPTION_NAMES = ("tryfirst", "trylast", "specname", "wrapper", "hookwrapper", "optionalhook",
                 "fail_closed")


def impl_attr(project: str) -> str:
    """The function attribute holding a project's implementation marks: ``<project>_impl``."""
    return f"{project}_impl"


class HookimplOpts(NamedTuple):
    """Options of one marked implementation.

    ``wrapper`` and ``hookwrapper`` are recorded only so that registration can reject
    them with a clear message: the kernel calls implementations directly. ``fail_closed``
    is read by the owner of a hook that isolates its implementations' failures: it asks
    that a failure of this one refuse what the hook guards instead of being skipped (the
    core itself never isolates, so to it the option means nothing).
    """

    tryfirst: bool = False
    trylast: bool = False
    specname: str | None = None
    wrapper: bool = False
    hookwrapper: bool = False
    optionalhook: bool = False
    fail_closed: bool = False

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> HookimplOpts:
        """Read an option dict, as pluggy's markers store it (missing keys: false/None).
        Values are kept as given, so that registration checks them as it checks this
        marker's own: `{"tryfirst": "no"}` is refused, not read as true."""
        def flag(name: str) -> Any:
            value = options.get(name)
            return False if value is None else value

        return cls(
            tryfirst=flag("tryfirst"),
            trylast=flag("trylast"),
            specname=options.get("specname") or None,
            wrapper=flag("wrapper"),
            hookwrapper=flag("hookwrapper"),
            optionalhook=flag("optionalhook"),
            fail_closed=flag("fail_closed"),
        )

    @property
    def labels(self) -> tuple[str, ...]:
        """Marker names that are set, for reports."""
        names = ("tryfirst", "trylast", "wrapper", "hookwrapper", "optionalhook", "fail_closed")
        found = tuple(name for name in names if getattr(self, name))
        return (*found, f"specname={self.specname}") if self.specname else found


class HookimplMarker:
    """The ``@hookimpl`` decorator of one project (``hookimpl = HookimplMarker("acme")``)."""

    def __init__(self, project: str) -> None:
        self.project = check_project(project)
        self.attr = impl_attr(project)

    @overload
    def __call__(self, function: F, /) -> F: ...

    @overload
    def __call__(
        self,
        /,
        *,
        tryfirst: bool = False,
        trylast: bool = False,
        specname: str | None = None,
        wrapper: bool = False,
        hookwrapper: bool = False,
        optionalhook: bool = False,
        fail_closed: bool = False,
    ) -> Callable[[F], F]: ...

    def __call__(
        self,
        function: F | None = None,
        /,
        *,
        tryfirst: bool = False,
        trylast: bool = False,
        specname: str | None = None,
        wrapper: bool = False,
        hookwrapper: bool = False,
        optionalhook: bool = False,
        fail_closed: bool = False,
    ) -> F | Callable[[F], F]:
        """Mark a function or method as a hook implementation.

        Use it bare (``@hookimpl``) or with options (``@hookimpl(tryfirst=True)``). The
        hook is the function's name unless ``specname`` names another one.
        """
        marks_function = callable(function) or isinstance(function, staticmethod | classmethod)
        if function is not None and not marks_function:
            raise TypeError(
                f"{self!r} marks a function, not {function!r}: give its options by keyword, "
                f"as in @hookimpl(specname={function!r})")
        opts = HookimplOpts(tryfirst, trylast, specname, wrapper, hookwrapper, optionalhook,
                            fail_closed)
        attr = self.attr

        def mark(func: F) -> F:
            # Above @staticmethod/@classmethod the marker sees the descriptor: mark the
            # function inside it.
            target = func.__func__ if isinstance(func, staticmethod | classmethod) else func
            setattr(target, attr, opts)
            return func

        return mark if function is None else mark(function)

    def __repr__(self) -> str:
        return f"HookimplMarker({self.project!r})"


def impl_options(function: object, projects: tuple[str, ...]) -> HookimplOpts | None:
    """The options of the first of ``projects`` whose mark ``function`` carries, or None.

    A mark is read whatever made it: this copy's ``HookimplOpts``, another copy's (an
    object with the same option attributes) or an option dict (pluggy's markers, such as
    Bub's ``bub_impl``).
    """
    for project in projects:
        opts = getattr(function, impl_attr(project), None)
        if opts is None:
            continue
        if isinstance(opts, HookimplOpts):
            return opts
        if isinstance(opts, Mapping):
            return HookimplOpts.from_mapping(opts)
        if hasattr(opts, "tryfirst") and hasattr(opts, "trylast"):
            return HookimplOpts.from_mapping({n: getattr(opts, n, None) for n in _OPTION_NAMES})
    return None


def marked_routines(
    plugin: object, projects: tuple[str, ...], *, marked_only: bool = True
) -> Iterator[tuple[str, Any, Any, HookimplOpts | None]]:
    """``(attr, raw function, bound value, options)`` of each routine of ``plugin`` that
    carries a mark of one of ``projects`` (with ``marked_only=False`` also the unmarked
    ones, options None and the value the raw function).

    Attributes are looked up statically: a property or another descriptor of the plugin
    is never run (it may be expensive, or fail); only marked functions, classmethods and
    staticmethods are fetched, to bind them. Registration and anything that must see a
    plugin as registration does (the Bub layer's shim) share this one rule.
    """
    import inspect  # registration only; importing the core does not pay for it

    for attr in dir(plugin):
        try:
            static = inspect.getattr_static(plugin, attr)
        except AttributeError:
            continue
        raw = static.__func__ if isinstance(static, staticmethod | classmethod) else static
        if not inspect.isroutine(raw):
            continue
        if impl_options(raw, projects) is None:
            if not marked_only:
                yield attr, raw, raw, None
            continue
        value = getattr(plugin, attr)
        opts = impl_options(value, projects)
        if opts is not None:
            yield attr, raw, value, opts
