"""The public surface of ``hookline.kernel`` is exactly its ``__all__``: every type a host
or plugin author needs is importable from the package root, and nothing else is public
there (as anyio checks its own surface)."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys

import pytest

import hookline.kernel as kernel

CONTRACT_MODULES = ("channels", "envelope", "environment", "errors", "events", "interception",
                    "models", "prompt", "streaming", "tape", "tools", "turn", "typed")
# What host and plugin authors reach for first.
NEEDED = {"ModelOptions", "ModelChoice", "AdmitDecision", "TurnSnapshot", "StreamEvent",
          "AsyncStreamEvents", "StreamState", "Environment", "Tool", "Channel",
          "HooklineError", "TapeEntry", "Framework", "HookRuntime", "hookimpl", "hookspec",
          "Registry", "PluginValidationError", "LLMCallRequest", "ToolCallDecision"}
# The typed hooks: plugin authors subclass or annotate with the hook protocols.
TYPED = {"SystemPromptHook", "SystemPromptImpl", "LoadStateHook", "BeforeLLMCallHook",
         "RegisterCLICommandsHook", "MaybeAwaitable", "HOOK_PROTOCOLS", "IMPL_PROTOCOLS"}


def test_the_names_authors_need_are_exported() -> None:
    assert set(kernel.__all__) >= NEEDED, sorted(NEEDED - set(kernel.__all__))


def test_the_typed_hooks_are_exported_whole() -> None:
    """Every name of ``hookline.kernel.typed`` (two protocols per hook, ``MaybeAwaitable``
    and the two maps), from the root, lazily like the rest."""
    typed = importlib.import_module("hookline.kernel.typed")
    assert set(typed.__all__) >= TYPED
    assert len(typed.__all__) == 2 * len(kernel.HOOK_SPECS) + 3
    assert set(typed.__all__) <= set(kernel.__all__)
    assert kernel._PUBLIC["typed"] == "*"


def test_every_contract_type_is_exported_from_the_root() -> None:
    missing = [f"{module}.{name}"
               for module in CONTRACT_MODULES
               for name in importlib.import_module(f"hookline.kernel.{module}").__all__
               if re.match(r"^[A-Z][a-z]", name) and name not in kernel.__all__]
    assert not missing, f"add to hookline.kernel's exports: {missing}"


def where(name: str) -> str:
    """The module the root's table names for ``name``."""
    return next(module for module, names in kernel._PUBLIC.items()
                if names == "*" or name in names)


def test_every_exported_name_is_the_object_of_its_module() -> None:
    for name in kernel.__all__:
        value = getattr(kernel, name)
        module = importlib.import_module(f"hookline.kernel.{where(name)}")
        assert getattr(module, name) is value, name


def test_all_is_the_table() -> None:
    """``__all__`` is derived from the one table: its names (dunders such as
    ``__version__`` reachable, not listed), and every name of typed."""
    listed = [name for names in kernel._PUBLIC.values() if names != "*" for name in names
              if not name.startswith("__")]
    assert kernel.__version__ == kernel._identity.__version__
    assert len(listed) == len(set(listed)), "a name listed twice"
    typed = importlib.import_module("hookline.kernel.typed")
    assert sorted(kernel.__all__) == sorted([*listed, *typed.__all__])
    assert kernel.__dir__() == sorted({*vars(kernel), *kernel.__all__})


MOVED = {"EnvironmentCache": "framework.envcache", "UnknownImpl": "_dispatch",
         "ImplInfo": "_dispatch", "HookBinding": "_dispatch",
         "PluginAgentHooks": "framework.agent_hooks"}


def test_internals_left_the_root_and_warn_where_they_were() -> None:
    """Five internals are no longer public at the root: not in ``__all__`` nor ``dir()``,
    still reachable there (the object of their module), each use warning."""
    for name, module_name in MOVED.items():
        assert name not in kernel.__all__ and name not in dir(kernel)
        with pytest.warns(DeprecationWarning) as caught:
            value = getattr(kernel, name)
        assert value is getattr(importlib.import_module(f"hookline.kernel.{module_name}"), name)
        assert str(caught[0].message) == (f"hookline.kernel.{name} is deprecated; import {name} "
                                          f"from hookline.kernel.{module_name}")
        assert caught[0].filename == __file__, "the warning points at the importing line"
        with pytest.warns(DeprecationWarning):
            getattr(kernel, name)  # warns at every use: never kept in the package
    assert not set(MOVED) & set(vars(kernel))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match=re.escape(
            "module 'hookline.kernel' has no attribute 'Nothing'")):
        kernel.Nothing  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute '__wrapped__'"):
        kernel.__wrapped__  # noqa: B018


def test_the_public_surface_equals_all() -> None:
    """After every name and module is loaded, nothing public is left outside __all__
    (submodules and the module's own typing helpers aside)."""
    for name in kernel.__all__:
        getattr(kernel, name)
    public = {name for name, value in vars(kernel).items()
              if not name.startswith("_") and not inspect.ismodule(value)
              and name not in {"annotations", "TYPE_CHECKING"}}
    assert public == set(kernel.__all__), sorted(public ^ set(kernel.__all__))


def loaded_after(statement: str) -> list[str]:
    """The kernel's modules a fresh interpreter has loaded after ``statement``."""
    code = (f"import sys\n{statement}\n"
            "print(sorted(m for m in sys.modules if m.startswith('hookline.kernel.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    return list(ast.literal_eval(out))


def test_importing_the_root_loads_no_contract_module() -> None:
    """Only the lazy-export helper, which imports nothing of the kernel."""
    assert loaded_after("import hookline.kernel") == ["hookline.kernel._lazy"]


def test_a_plugin_import_loads_the_core_and_the_specs_only() -> None:
    loaded = loaded_after("from hookline.kernel import HOOK_SPECS, Registry, hookimpl")
    assert loaded == sorted(["hookline.kernel._lazy", "hookline.kernel.hooks",
                             *(m for m in loaded if m.startswith("hookline.kernel._dispatch"))])
    # A host's runtime adds the model stage only (its errors, and their dataclasses, are
    # imported when a model hook returns the wrong type).
    with_runtime = loaded_after("from hookline.kernel import HOOK_SPECS, HookRuntime, Registry")
    assert with_runtime == sorted([*loaded, "hookline.kernel.framework",
                                   "hookline.kernel.framework.model_stage"])


def test_star_import_takes_all() -> None:
    namespace: dict[str, object] = {}
    exec("from hookline.kernel import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(kernel.__all__)
