"""The ``hookimpl`` and ``hookspec`` markers.

A marker only records options on the function; the registry reads and validates them
when a plugin is registered, because only then are the plugin name and the hook spec
known, and an error can name both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, overload

IMPL_ATTR = "hookline_impl"
"""Function attribute where ``@hookimpl`` stores its options."""

BUB_IMPL_ATTR = "bub_impl"
"""Function attribute of Bub's own marker: recognised so unmodified Bub plugins load."""

SPEC_ATTR = "hookline_spec"
"""Function attribute where ``@hookspec`` stores its options."""

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class HookimplOpts:
    """Options of one marked implementation.

    ``wrapper`` and ``hookwrapper`` are recorded only so that registration can reject
    them with a clear message: the kernel calls implementations directly.
    """

    tryfirst: bool = False
    trylast: bool = False
    specname: str | None = None
    wrapper: bool = False
    hookwrapper: bool = False
    optionalhook: bool = False

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> HookimplOpts:
        """Read a foreign marker's option dict (missing keys mean false/None)."""
        return cls(
            tryfirst=bool(options.get("tryfirst")),
            trylast=bool(options.get("trylast")),
            specname=options.get("specname") or None,
            wrapper=bool(options.get("wrapper")),
            hookwrapper=bool(options.get("hookwrapper")),
            optionalhook=bool(options.get("optionalhook")),
        )

    @property
    def labels(self) -> tuple[str, ...]:
        """Marker names that are set, for reports."""
        names = ("tryfirst", "trylast", "wrapper", "hookwrapper", "optionalhook")
        found = tuple(name for name in names if getattr(self, name))
        return (*found, f"specname={self.specname}") if self.specname else found


@overload
def hookimpl(function: F, /) -> F: ...


@overload
def hookimpl(
    *,
    tryfirst: bool = False,
    trylast: bool = False,
    specname: str | None = None,
    wrapper: bool = False,
    hookwrapper: bool = False,
    optionalhook: bool = False,
) -> Callable[[F], F]: ...


def hookimpl(
    function: F | None = None,
    /,
    *,
    tryfirst: bool = False,
    trylast: bool = False,
    specname: str | None = None,
    wrapper: bool = False,
    hookwrapper: bool = False,
    optionalhook: bool = False,
) -> F | Callable[[F], F]:
    """Mark a function or method as a hook implementation.

    Use it bare (``@hookimpl``) or with options (``@hookimpl(tryfirst=True)``). The hook
    is the function's name unless ``specname`` names another one.
    """
    opts = HookimplOpts(tryfirst, trylast, specname, wrapper, hookwrapper, optionalhook)

    def mark(func: F) -> F:
        # Above @staticmethod/@classmethod the marker sees the descriptor: mark the function.
        target = func.__func__ if isinstance(func, staticmethod | classmethod) else func
        setattr(target, IMPL_ATTR, opts)
        return func

    return mark if function is None else mark(function)


@dataclass(frozen=True, slots=True)
class HookspecOpts:
    """Options of one hook specification: how it is dispatched and where it belongs."""

    kind: str
    family: str = "custom"


def hookspec(*, kind: str, family: str = "custom") -> Callable[[F], F]:
    """Mark a function as a hook specification with its dispatch kind.

    The function's parameters are the hook's parameters and the first line of its
    docstring is the hook's one-line description.
    """

    def mark(func: F) -> F:
        setattr(func, SPEC_ATTR, HookspecOpts(kind, family))
        return func

    return mark


def impl_options(function: object) -> HookimplOpts | None:
    """The marker options carried by ``function``, or None when it is not marked."""
    opts = getattr(function, IMPL_ATTR, None)
    if isinstance(opts, HookimplOpts):
        return opts
    if opts is not None and hasattr(opts, "tryfirst") and hasattr(opts, "trylast"):
        # Marked by another copy of this kernel (vendored elsewhere): same fields.
        names = ("tryfirst", "trylast", "specname", "wrapper", "hookwrapper", "optionalhook")
        return HookimplOpts.from_mapping({name: getattr(opts, name, None) for name in names})
    foreign = getattr(function, BUB_IMPL_ATTR, None)
    if isinstance(foreign, Mapping):
        return HookimplOpts.from_mapping(foreign)
    return None
