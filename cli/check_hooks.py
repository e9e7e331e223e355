"""What `hookline plugins check` looks at beyond registration: hook parameters with
defaults, `async def` on hooks dispatched on a sync path, a generator function where the
hook wants a value, and return annotations that contradict the hook's spec (read from
kernel/hooks.py, with its type-checking imports)."""

from __future__ import annotations

import importlib
import inspect
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any, Literal

from hookline.kernel import HookImpl, HookSpec

Severity = Literal["error", "warning"]

RESULT_IGNORED = frozenset({"dispatch_outbound"})
"""Hooks whose spec names a result type that the framework never reads (docs/hooks):
an implementation annotated `-> None` loses nothing there."""

SYNC_KINDS = ("first_sync", "many_sync")


def extra_checks(impl: HookImpl, spec: HookSpec) -> Iterator[tuple[str, str, str, Severity]]:
    """`(code, message, fix, severity)` of what registration accepts but cannot work:
    defaults on hook parameters, async on a sync path, contradicting return types."""
    try:
        parameters = list(inspect.signature(impl.function).parameters.values())
    except (TypeError, ValueError):
        parameters = []  # the kernel already reported the unreadable signature
    for param in parameters:
        if param.default is inspect.Parameter.empty or param.name not in spec.params:
            continue
        if param.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
            fix = f"remove the default ({param.name}={param.default!r})"
        elif param.kind is inspect.Parameter.KEYWORD_ONLY:
            fix = "make it a normal parameter without a default (before any '*')"
        elif param.kind is inspect.Parameter.POSITIONAL_ONLY:
            fix = "make it a normal parameter without a default (remove the '/')"
        else:
            continue
        yield ("default-never-passed",
               f"parameter {param.name!r} has a default, so the hook's {param.name!r} is "
               f"never passed to it: it always sees {param.default!r}", fix, "error")
    if spec.kind in SYNC_KINDS and impl.flavor == "async":
        spec_text = _spec_return_text(spec.name)
        generators = " or an async generator function (with yield)" if (
            "AsyncIterator" in spec_text) else ""
        yield ("async-on-sync-hook",
               f"is async, but {spec.name} is dispatched on a sync path ({spec.kind}), which "
               f"skips the coroutine: it never takes effect",
               f"make it a plain function (def){generators}", "error")
    yield from _generator_checks(impl, spec)
    yield from _return_checks(impl, spec)


def _generator_checks(impl: HookImpl, spec: HookSpec) -> Iterator[tuple[str, str, str, Severity]]:
    """A function with `yield` where the hook wants no generator: what it returns is one
    (a stream of run_model_stream must be wrapped: AsyncStreamEvents). A wrapper marker
    is its own finding."""
    if impl.opts.wrapper is True or impl.opts.hookwrapper is True:
        return
    if spec.name == "run_model_stream" and impl.flavor == "async-generator":
        yield ("bare-async-generator",
               "is an async generator function (async def with yield), and run_model_stream "
               "refuses a bare async generator: it must return AsyncStreamEvents",
               "make it a plain def that returns AsyncStreamEvents(an async generator)",
               "error")
    elif impl.flavor == "generator" and "Iterator" not in _spec_return_text(spec.name):
        yield ("generator-result",
               f"is a generator function (def with yield), so {spec.name} gets a generator "
               f"where it wants {_spec_return_text(spec.name)}",
               "return the value (build a list and return it) instead of yielding", "error")


# -- return annotations --------------------------------------------------------------

_UNKNOWN = object()


def _return_checks(impl: HookImpl, spec: HookSpec) -> Iterator[tuple[str, str, str, Severity]]:
    """Compare the implementation's return annotation with the spec's, conservatively:
    `Any`, unannotated, unresolvable names, protocols and aliases never count."""
    spec_members = _members(_spec_return(spec.name))
    annotation = _return_annotation(impl.function)
    impl_members = _members(annotation)
    if spec_members is None or impl_members is None:
        return
    spec_text = _spec_return_text(spec.name)
    impl_text = _annotation_text(impl.function, annotation)
    none_type = type(None)
    if spec_members == {none_type}:
        if impl_members != {none_type}:
            yield ("return-ignored",
                   f"is annotated '-> {impl_text}', but the framework ignores what "
                   f"{spec.name} returns (the hook returns None)",
                   "annotate '-> None'", "warning")
        return
    if impl_members == {none_type}:
        if spec.name not in RESULT_IGNORED and impl.flavor in ("sync", "async"):
            yield ("return-none",
                   f"is annotated '-> None', but {spec.name}'s result is used (the hook "
                   f"returns {spec_text}): it never contributes",
                   f"return a value ({spec_text}) or annotate what it returns", "error")
        return
    wrong = [m for m in impl_members - {none_type}
             if not any(_compatible(m, s) for s in spec_members)]
    if wrong:
        names = ", ".join(sorted(getattr(m, "__name__", repr(m)) for m in wrong))
        yield ("return-type",
               f"is annotated '-> {impl_text}', but {spec.name} returns {spec_text} "
               f"({names} is not among them)",
               f"return what the hook expects ('-> {spec_text}')", "error")


def _compatible(impl_type: type, spec_type: type) -> bool:
    try:
        return issubclass(impl_type, spec_type) or issubclass(spec_type, impl_type)
    except TypeError:  # a protocol or another class issubclass cannot judge
        return True


def _members(annotation: Any) -> set[type] | None:
    """The runtime classes a type allows (None for `NoneType`), or None when unsure."""
    if annotation is _UNKNOWN or annotation is Any:
        return None
    if annotation is None or annotation is type(None):
        return {type(None)}
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        found: set[type] = set()
        for arg in typing.get_args(annotation):
            members = _members(arg)
            if members is None:
                return None
            found |= members
        return found
    if origin is typing.Literal:
        return {type(value) for value in typing.get_args(annotation)}
    if origin is not None:
        annotation = origin
    if isinstance(annotation, type) and not getattr(annotation, "_is_protocol", False):
        return {annotation}
    return None


def _return_annotation(function: Callable[..., Any]) -> Any:
    """The function's evaluated return annotation; `_UNKNOWN` when absent or unresolvable."""
    inner = inspect.unwrap(getattr(function, "__func__", function))
    annotations = getattr(inner, "__annotations__", None) or {}
    if "return" not in annotations:
        return _UNKNOWN
    annotation = annotations["return"]
    if isinstance(annotation, str):
        try:
            annotation = eval(annotation, dict(getattr(inner, "__globals__", {})))
        except Exception:  # a name imported only for type checkers, say
            return _UNKNOWN
    return annotation


def _annotation_text(function: Callable[..., Any], annotation: Any) -> str:
    inner = inspect.unwrap(getattr(function, "__func__", function))
    raw = (getattr(inner, "__annotations__", None) or {}).get("return", annotation)
    return raw if isinstance(raw, str) else inspect.formatannotation(raw)


def _spec_return_text(hook: str) -> str:
    from hookline.kernel.hooks import HooklineSpecs

    raw = getattr(getattr(HooklineSpecs, hook, None), "__annotations__", {}).get("return")
    return raw if isinstance(raw, str) else inspect.formatannotation(raw)


def _spec_return(hook: str) -> Any:
    """The evaluated return type of a hook's typed spec (`kernel/hooks.py`)."""
    from hookline.kernel.hooks import HooklineSpecs

    method = getattr(HooklineSpecs, hook, None)
    if method is None:
        return _UNKNOWN
    try:
        return typing.get_type_hints(method, globalns=_spec_namespace()).get("return", _UNKNOWN)
    except Exception:
        return _UNKNOWN


_NAMESPACE: dict[str, Any] = {}


def _spec_namespace() -> dict[str, Any]:
    """`kernel/hooks.py`'s globals plus the names it imports only for type checkers."""
    if _NAMESPACE:
        return _NAMESPACE
    import ast

    from hookline.kernel import hooks

    namespace = dict(vars(hooks))
    for node in ast.walk(ast.parse(inspect.getsource(hooks))):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name)
                and node.test.id == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if not isinstance(statement, ast.ImportFrom):
                continue
            try:
                module = importlib.import_module(
                    "." * statement.level + (statement.module or ""), hooks.__package__)
            except ImportError:
                continue
            for alias in statement.names:
                if hasattr(module, alias.name):
                    namespace[alias.asname or alias.name] = getattr(module, alias.name)
    _NAMESPACE.update(namespace)
    return _NAMESPACE
