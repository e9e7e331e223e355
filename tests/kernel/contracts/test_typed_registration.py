"""The typed protocols and registration agree: the implementation an IDE writes from a
protocol of kernel/typed.py (its signature copied, keyword-only parameters included)
registers, and a dispatch passes it every argument by keyword."""

from __future__ import annotations

import asyncio
import inspect
import types
from typing import Any

import pytest

from hookline.kernel import HOOK_SPECS, HookRuntime, Registry, hookimpl
from hookline.kernel.typed import HOOK_PROTOCOLS, IMPL_PROTOCOLS


def _written_from(method: Any, name: str, first: str | None) -> str:
    """The source of a function with ``method``'s signature, annotations as text (the
    module below never evaluates them), that returns the arguments it was given."""
    signature = inspect.signature(method)
    params = list(signature.parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    assert params == [] or params[0].kind is inspect.Parameter.KEYWORD_ONLY, name
    parts = [first] if first else []
    if params:
        parts.append("*")
    parts += [f"{p.name}: {p.annotation}" for p in params]
    names = ", ".join(f"{p.name!r}: {p.name}" for p in params)
    return (f"def {name}({', '.join(parts)}) -> {signature.return_annotation}:\n"
            f"    return {{{names}}}\n")


def _dispatch(runtime: HookRuntime, hook: str, kwargs: dict[str, Any]) -> Any:
    kind = HOOK_SPECS[hook].kind
    if kind == "first":
        return asyncio.run(runtime.call_first(hook, **kwargs))
    if kind == "many":
        return asyncio.run(runtime.call_many(hook, **kwargs))
    if kind == "first_sync":
        return runtime.call_first_sync(hook, **kwargs)
    return runtime.call_many_sync(hook, **kwargs)


def _arguments(hook: str) -> dict[str, Any]:
    return {param: f"{hook}.{param}" for param in HOOK_SPECS[hook].params}


@pytest.mark.parametrize("hook", sorted(HOOK_PROTOCOLS))
def test_a_method_written_from_the_hook_protocol_registers(hook: str) -> None:
    source = _written_from(getattr(HOOK_PROTOCOLS[hook], hook), hook, "self")
    namespace: dict[str, Any] = {}
    exec("from __future__ import annotations\n" + "class Plugin:\n"
         + "".join(f"    {line}\n" for line in source.splitlines()), namespace)
    plugin_class = namespace["Plugin"]
    hookimpl(getattr(plugin_class, hook))
    registry = Registry(HOOK_SPECS)
    registry.register(plugin_class(), name="generated")
    (impl,) = registry.hook_impls(hook)
    assert sorted(impl.argnames) == sorted(HOOK_SPECS[hook].params)
    result = _dispatch(HookRuntime(registry), hook, _arguments(hook))
    answer = result[0] if isinstance(result, list) else result
    assert answer == _arguments(hook)


@pytest.mark.parametrize("hook", sorted(IMPL_PROTOCOLS))
def test_a_function_written_from_the_impl_protocol_registers(hook: str) -> None:
    source = _written_from(IMPL_PROTOCOLS[hook].__call__, "implementation", None)
    module = types.ModuleType("generated_plugin")
    exec("from __future__ import annotations\n" + source, vars(module))
    hookimpl(specname=hook)(module.implementation)
    registry = Registry(HOOK_SPECS)
    registry.register(module, name="generated")
    result = _dispatch(HookRuntime(registry), hook, _arguments(hook))
    answer = result[0] if isinstance(result, list) else result
    assert answer == _arguments(hook)
