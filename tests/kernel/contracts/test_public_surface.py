"""The public surface of ``hookline.kernel`` is exactly its ``__all__``: every type a host
or plugin author needs is importable from the package root, and nothing else is public
there (as anyio checks its own surface)."""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys

import hookline.kernel as kernel

CONTRACT_MODULES = ("channels", "envelope", "environment", "events", "interception", "models",
                    "prompt", "streaming", "tape", "tools", "turn", "envcache", "typed")
# Named by issue 11 as what host and plugin authors reach for first.
NEEDED = {"ModelOptions", "ModelChoice", "AdmitDecision", "TurnSnapshot", "StreamEvent",
          "AsyncStreamEvents", "StreamState", "Environment", "Tool", "Channel",
          "HooklineError", "TapeEntry", "Framework", "HookRuntime", "hookimpl", "hookspec",
          "Registry", "PluginValidationError", "LLMCallRequest", "ToolCallDecision"}
# Issue 13 (typed hooks): plugin authors subclass or annotate with the hook protocols.
TYPED = {"SystemPromptHook", "SystemPromptImpl", "LoadStateHook", "BeforeLLMCallHook",
         "RegisterCLICommandsHook", "MaybeAwaitable", "HOOK_PROTOCOLS", "IMPL_PROTOCOLS"}


def test_the_names_authors_need_are_exported() -> None:
    assert set(kernel.__all__) >= NEEDED, sorted(NEEDED - set(kernel.__all__))


def test_the_typed_hooks_are_exported_whole() -> None:
    """Every name of ``hookline.kernel.typed`` (two protocols per hook, ``MaybeAwaitable``
    and the two maps), from the root, lazily like the rest."""
    typed = importlib.import_module("hookline.kernel.typed")
    assert set(typed.__all__) >= TYPED
    assert len(typed.__all__) == 2 * 27 + 3
    assert {name for name, module in kernel._EXPORTS.items() if module == "typed"} == set(
        typed.__all__)


def test_every_contract_type_is_exported_from_the_root() -> None:
    missing = [f"{module}.{name}"
               for module in CONTRACT_MODULES
               for name in importlib.import_module(f"hookline.kernel.{module}").__all__
               if re.match(r"^[A-Z][a-z]", name) and name not in kernel.__all__]
    assert not missing, f"add to hookline.kernel's exports: {missing}"


def test_every_exported_name_is_the_object_of_its_module() -> None:
    for name in kernel.__all__:
        value = getattr(kernel, name)
        module = importlib.import_module(f"hookline.kernel.{kernel._EXPORTS[name]}")
        assert getattr(module, name) is value, name


def test_the_public_surface_equals_all() -> None:
    """After every name and module is loaded, nothing public is left outside __all__
    (submodules and the module's own typing helpers aside)."""
    for name in kernel.__all__:
        getattr(kernel, name)
    public = {name for name, value in vars(kernel).items()
              if not name.startswith("_") and not inspect.ismodule(value)
              and name not in {"annotations", "TYPE_CHECKING"}}
    assert public == set(kernel.__all__), sorted(public ^ set(kernel.__all__))


def test_importing_the_root_loads_no_contract_module() -> None:
    code = ("import sys, hookline.kernel; "
            "print(sorted(m for m in sys.modules if m.startswith('hookline.kernel.')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == "[]"
