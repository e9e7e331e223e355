"""Hook specifications: the ``HookSpec`` type, the ``@hookspec`` marker and its reader.

A spec names a hook, its parameters in order, its dispatch kind and its one-line
description. Registration checks every implementation against the spec of its hook; the
kind says which runtime primitive the hook's owner dispatches it with:

- ``first``: ``call_first``, implementations in priority order until one answers (a
  result other than None), awaitables awaited;
- ``many``: ``call_many``, every implementation, every result (None included);
- ``first_sync`` / ``many_sync``: ``call_first_sync`` / ``call_many_sync``, the same
  without awaiting (an awaitable result is skipped with a warning).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal, NamedTuple, TypeVar, cast, get_args

from .errors import check_project

F = TypeVar("F", bound=Callable[..., Any])

DispatchKind = Literal["first", "many", "first_sync", "many_sync"]
DISPATCH_KINDS: Final[tuple[DispatchKind, ...]] = get_args(DispatchKind)
"""Every ``DispatchKind``, in this order everywhere (specs, plans, reports)."""


class HookSpec(NamedTuple):
    """One hook: its name, parameters in order, dispatch kind and description.

    ``project`` is the project whose ``HookspecMarker`` declared it (empty when the spec
    was built by hand); a registry accepts the implementation marks of its specs'
    projects unless it is told otherwise.
    """

    name: str
    params: tuple[str, ...]
    kind: DispatchKind
    doc: str = ""
    project: str = ""


def spec_attr(project: str) -> str:
    """The function attribute holding a project's spec marks: ``<project>_spec``."""
    return f"{project}_spec"


def check_kind(kind: object, where: str) -> DispatchKind:
    """``kind`` as a ``DispatchKind``; a ValueError naming ``where`` and the choices if not."""
    if kind not in DISPATCH_KINDS:
        raise ValueError(
            f"{where} has unknown kind {kind!r}; use one of {', '.join(DISPATCH_KINDS)}"
        )
    return kind


class HookspecOpts(NamedTuple):
    """Options of one hook specification: how it is dispatched, and whose hook it is."""

    kind: DispatchKind
    project: str


class HookspecMarker:
    """The ``@hookspec`` decorator of one project (``hookspec = HookspecMarker("acme")``)."""

    def __init__(self, project: str) -> None:
        self.project = check_project(project)
        self.attr = spec_attr(project)

    def __call__(self, function: object = None, /, *, kind: DispatchKind | None = None,
                 **pluggy_options: object) -> Callable[[F], F]:
        """Mark a function as a hook specification with its dispatch kind.

        The function's parameters are the hook's parameters and the first line of its
        docstring is the hook's one-line description. The kind is required: pluggy's
        spellings (a bare ``@hookspec``, ``firstresult=True``) raise a TypeError that says
        which ``kind`` to write, since only the owner knows whether the hook is awaited.
        """
        if function is not None or kind is None or pluggy_options:
            raise TypeError(_kind_needed(function, kind, pluggy_options))
        opts = HookspecOpts(kind, self.project)
        attr = self.attr

        def mark(func: F) -> F:
            setattr(func, attr, opts)
            return func

        return mark

    def __repr__(self) -> str:
        return f"HookspecMarker({self.project!r})"


def _kind_needed(function: object, kind: object, options: dict[str, object]) -> str:
    """What to write instead of a spelling the marker does not take (pluggy's, mostly)."""
    name = getattr(function, "__name__", None)
    where = f"@hookspec above {name!r}" if name else "@hookspec"
    unknown = sorted(set(options) - {"firstresult"})
    if unknown:
        return (f"{where} got unknown option(s) {', '.join(unknown)}; the only option is "
                f"kind, one of {', '.join(DISPATCH_KINDS)}")
    if kind is not None:
        return f"{where}: kind={kind!r} says it all; remove firstresult"
    if options.get("firstresult"):
        return (f"{where}: firstresult=True is written @hookspec(kind=\"first\") (results "
                f"awaited) or @hookspec(kind=\"first_sync\") (called without awaiting)")
    return (f"{where} needs a dispatch kind: write @hookspec(kind=\"many\") (every result, "
            f"awaited; kind=\"many_sync\" without awaiting), or kind=\"first\" / "
            f"\"first_sync\" for the first non-None result")


def spec_options(function: object, project: str | None = None) -> HookspecOpts | None:
    """The spec mark of ``function``: of ``project``, or of any project when None.

    Marks made by another copy of this code are read by their two fields.
    """
    if project is not None:
        marks = [getattr(function, spec_attr(project), None)]
    else:
        attributes = getattr(function, "__dict__", None) or {}
        marks = [value for name, value in attributes.items() if name.endswith("_spec")]
    for opts in marks:
        if isinstance(opts, HookspecOpts):
            return opts
        kind, owner = getattr(opts, "kind", None), getattr(opts, "project", None)
        if isinstance(kind, str) and isinstance(owner, str):
            return HookspecOpts(cast(DispatchKind, kind), owner)
    return None


def collect_specs(namespace: object, project: str | None = None) -> dict[str, HookSpec]:
    """Read every ``@hookspec``-marked function of ``namespace`` into a ``HookSpec``.

    Only marks of ``project`` count when it is given. A class keeps its definition order
    (so reports list hooks as declared); other namespaces (modules, instances) come out in
    alphabetical order.
    """
    import inspect  # on first use: registries and dispatch never need it at import

    found: dict[str, HookSpec] = {}
    members = vars(namespace) if isinstance(namespace, type) else {
        name: getattr(namespace, name) for name in dir(namespace)
    }
    for name, function in members.items():
        opts = spec_options(function, project)
        if opts is None:
            continue
        kind = check_kind(opts.kind, f"hookspec {name!r}")
        params = tuple(inspect.signature(function).parameters)
        if params and params[0] == "self":
            params = params[1:]
        doc = (inspect.getdoc(function) or "").strip().splitlines()
        found[name] = HookSpec(name, params, kind, doc[0] if doc else "", opts.project)
    return found
