"""Write the files derived from the hook specs and from the root's table of names.

    python -m hookline.kernel._generate [--check] [PACKAGE ...]

- ``typed.py``: the two protocols of every hook of ``HOOK_SPECS`` (``hooks.py``), with the
  spec's parameters and annotations as written there;
- ``__init__.pyi`` of this package, and of each PACKAGE named (a root built on
  ``_lazy.LazyExports``, such as ``hookline.testing``): the root's public names for type
  checkers, from the table of its ``__init__.py``.

``--check`` writes nothing and exits with status 1 when a file is stale. The tests
regenerate both in memory and fail when the files differ. It lives in the kernel, beside
what it reads, so that a vendored copy can regenerate its own files after adding a hook;
the kernel never imports it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

    from ._lazy import LazyExports

__all__ = ["main", "render_stub", "render_typed", "stem"]

LINE = 100
ACRONYMS = {"cli": "CLI", "llm": "LLM"}
"""Hook-name parts written in capitals in class names (PEP 8: ``BeforeLLMCallHook``)."""
ASYNC_KINDS = ("first", "many")
BUILTIN_NAMES = {"None", "str", "int", "float", "bool", "bytes", "dict", "list", "tuple",
                 "set", "object", "type", "Exception", "BaseException"}
# What typed.py imports at run time, whatever the hooks name.
RUNTIME_IMPORTS = {"collections.abc": {"Awaitable", "Mapping"}, "types": {"MappingProxyType"},
                   "typing": {"TYPE_CHECKING", "Protocol", "TypeAlias", "TypeVar"}}

TYPED_DOC = '''\
"""Typed hooks: each hook of ``HOOK_SPECS`` as a ``typing.Protocol`` that type checkers
enforce.

Generated from ``hooks.py`` by ``_generate.py`` (``python -m hookline.kernel._generate``):
edit the specs there, never this file (a test fails while it is stale).

``HooklineSpecs`` (``hooks.py``) declares every hook on one class, so it cannot type a
plugin that implements two of them. Here each hook has two protocols:

- ``<Hook>Hook`` (``SystemPromptHook``, ...): an object with a method named after the
  hook. A plugin class subclasses the ones it implements, or an instance, class or module
  is assigned to one (``_: SystemPromptHook = MyPlugin()``).
- ``<Hook>Impl`` (``SystemPromptImpl``, ...): one implementation function, whatever its
  name (a ``specname`` method, a module function).

Parameters are keyword-only, because the kernel passes them by keyword: an
implementation may list them in any order, as ordinary or as keyword-only parameters
(the signature copied from here registers as it is), and a misspelled name is an error
(with positional parameters mypy checks types but not names). A protocol method takes every
parameter of its hook; an implementation that uses fewer adds ``**_: object``, which the
kernel never fills. A hook dispatched on an async path returns ``MaybeAwaitable[X]``, so
``def`` and ``async def`` both fit; a sync-path hook returns exactly its spec's type, so
an ``async def`` implementation, which that path would skip, is an error.

Nothing here runs in the kernel: the module exists for type checkers and for plugin
classes that subclass a protocol. The hook types are imported for type checkers only, so
importing this module costs little more than creating its classes.
"""
'''


def stem(hook: str) -> str:
    """The class-name stem of a hook: ``before_llm_call`` -> ``BeforeLLMCall``."""
    return "".join(ACRONYMS.get(part, part.title()) for part in hook.split("_"))


def _name_order(name: str) -> tuple[int, str]:
    """ruff's (isort's) order of imported and ``__all__`` names: constants, classes, the
    rest."""
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name


def _import_order(name: str) -> tuple[int, str, str]:
    """ruff's order of imported names: by kind as in ``__all__``, then ignoring case."""
    return _name_order(name)[0], name.lower(), name


def _from_import(module: str, names: set[str], indent: str = "") -> str:
    joined = ", ".join(sorted(names, key=_import_order))
    line = f"{indent}from {module} import {joined}"
    if len(line) <= LINE:
        return line
    inner = "".join(f"{indent}    {name},\n" for name in sorted(names, key=_import_order))
    return f"{indent}from {module} import (\n{inner}{indent})"


def _spec_imports(source: str) -> dict[str, str]:
    """Name -> the module ``hooks.py`` imports it from (``.tape``, ``typing``, ...)."""
    import ast

    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                found[alias.asname or alias.name] = module
    return found


def _sections(source: str) -> dict[str, str]:
    """Hook -> the comment line that opens its group in ``hooks.py`` (``# Turn hooks.``)."""
    import re

    pattern = r"^    (# .+)\n    @hookspec\(.*\)\n    def (\w+)\("
    return {hook: comment for comment, hook in re.findall(pattern, source, re.M)}


def _signature(name: str, params: list[str], returns: str) -> str:
    """A protocol method: on one line when it fits, else wrapped as ruff formats it."""
    keyword = f", *, {', '.join(params)}" if params else ""
    line = f"    def {name}(self{keyword}) -> {returns}: ..."
    if len(line) <= LINE:
        return line
    middle = f"        self{keyword}" if params else "        self,"
    if len(middle) > LINE:
        middle = "\n".join(["        self,", "        *,", *(f"        {p}," for p in params)])
    return f"    def {name}(\n{middle}\n    ) -> {returns}: ..."


def _kind_text(kind: str, returns: str) -> str:
    if kind in ASYNC_KINDS:
        return f"{kind}; sync or async"
    return f"{kind}: sync, or a generator" if "Iterator" in returns else f"{kind}: sync only"


def render_typed() -> str:
    """The text of ``typed.py`` for the specs of ``hooks.py`` as they are now."""
    import re

    from .hooks import HOOK_SPECS, HooklineSpecs

    source = Path(__file__).with_name("hooks.py").read_text(encoding="utf-8")
    origins, sections = _spec_imports(source), _sections(source)
    runtime = {module: set(names) for module, names in RUNTIME_IMPORTS.items()}
    checking: dict[str, set[str]] = {}
    classes: list[str] = []
    for hook, spec in HOOK_SPECS.items():
        written: dict[str, str] = getattr(HooklineSpecs, hook).__annotations__
        for text in written.values():
            for word in set(re.findall(r"[A-Za-z_]\w*", text)) - BUILTIN_NAMES:
                module = origins.get(word)
                if module is None:
                    raise ValueError(f"hooks.py: {hook} names {word}, which hooks.py does not "
                                     "import; import it there (under TYPE_CHECKING)")
                if module == "typing":
                    runtime["typing"].add(word)
                elif word not in runtime.get(module, ()):
                    checking.setdefault(module, set()).add(word)
        params = [f"{param}: {written[param]}" for param in spec.params]
        returns = written["return"]
        kind = _kind_text(spec.kind, returns)
        if spec.kind in ASYNC_KINDS:
            returns = f"MaybeAwaitable[{returns}]"
        comment = f"{sections[hook]}\n" if hook in sections else ""
        classes.append(
            f'{comment}class {stem(hook)}Hook(Protocol):\n'
            f'    """A plugin implementing ``{hook}`` ({kind})."""\n\n'
            f'{_signature(hook, params, returns)}\n\n\n'
            f'class {stem(hook)}Impl(Protocol):\n'
            f'    """One implementation function of ``{hook}``, whatever its name."""\n\n'
            f'{_signature("__call__", params, returns)}\n')
    absolute = sorted(module for module in checking if not module.startswith("."))
    relative = sorted(module for module in checking if module.startswith("."))
    blocks = ["\n".join(_from_import(m, checking[m], "    ") for m in group)
              for group in (absolute, relative) if group]
    names = ["HOOK_PROTOCOLS", "IMPL_PROTOCOLS", "MaybeAwaitable",
             *(f"{stem(hook)}{suffix}" for hook in HOOK_SPECS for suffix in ("Hook", "Impl"))]
    listed = "".join(f'    "{name}",\n' for name in sorted(names, key=_name_order))
    maps = "\n".join(
        f"{label}: Mapping[str, type] = MappingProxyType({{\n"
        + "".join(f'    "{hook}": {stem(hook)}{suffix},\n' for hook in HOOK_SPECS)
        + f"}})\n{doc}\n"
        for label, suffix, doc in (
            ("HOOK_PROTOCOLS", "Hook", '"""Hook name -> its ``<Hook>Hook`` protocol, in '
             '``HOOK_SPECS`` order (for tools that look\na hook\'s typed description up by '
             'name)."""'),
            ("IMPL_PROTOCOLS", "Impl", '"""Hook name -> its ``<Hook>Impl`` protocol, in '
             '``HOOK_SPECS`` order."""')))
    return (
        TYPED_DOC
        + "\nfrom __future__ import annotations\n\n"
        + "\n".join(_from_import(m, runtime[m]) for m in sorted(runtime)) + "\n\n"
        + "if TYPE_CHECKING:\n" + "\n\n".join(blocks) + "\n\n"
        + f"__all__ = [\n{listed}]\n\n"
        + '_T = TypeVar("_T")\n\n'
        + "MaybeAwaitable: TypeAlias = _T | Awaitable[_T]\n"
        + '"""What an async-path hook returns: its value, or an awaitable of it '
        + '(``async def``)."""\n\n\n'
        + "\n\n".join(classes) + "\n\n" + maps
    )


def render_stub(exports: LazyExports) -> str:
    """The text of a root's ``__init__.pyi``: each name of its table, re-exported, and
    each moved name (so that code importing one still type-checks while it warns)."""
    from ._lazy import EVERY

    tables: dict[str, list[tuple[str, str]]] = {}
    for module, names in exports.public.items():
        tables.setdefault(module, []).extend(
            [("*", "  # noqa: F403  (every name of its __all__)")] if names == EVERY
            else [(name, "") for name in names])
    for name, module in exports.moved.items():
        tables.setdefault(module, []).append((name, "  # deprecated here (warns)"))
    lines = []
    for module in sorted(tables):
        for name, comment in sorted(tables[module], key=lambda item: _import_order(item[0])):
            imported = name if name == "*" else f"{name} as {name}"
            lines.append(f"from .{module} import {imported}{comment}")
    return ('"""The public names of this package, for type checkers (which do not see its '
            "lazy\nimports).\n\nGenerated from the table of its ``__init__.py`` by the "
            "kernel's ``_generate.py``\n(``python -m hookline.kernel._generate hookline.testing "
            'hookline.builtins``):\nedit the table, never this file.\n"""\n\n'
            + "\n".join(lines) + "\n")


def _faces(package: ModuleType) -> list[ModuleType]:
    """``package`` and its subpackages, those with a lazy table (``_exports``)."""
    import importlib
    import pkgutil

    found = [package]
    for info in pkgutil.walk_packages(getattr(package, "__path__", []), f"{package.__name__}."):
        if info.ispkg:
            found.append(importlib.import_module(info.name))
    return [module for module in found if hasattr(module, "_exports")]


def _targets(packages: list[str]) -> dict[Path, str]:
    """Each generated file -> its text as it should be."""
    import importlib

    files = {Path(__file__).with_name("typed.py"): render_typed()}
    for package in [__package__ or "", *packages]:
        for module in _faces(importlib.import_module(package)):
            files[Path(module.__file__ or "").with_suffix(".pyi")] = render_stub(module._exports)
    return files


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check``, compare) the generated files; 1 when one was stale."""
    args = sys.argv[1:] if argv is None else argv
    check = "--check" in args
    stale = []
    for path, text in _targets([arg for arg in args if arg != "--check"]).items():
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(path)
        if not check:
            path.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{'stale' if check else 'wrote'}: {path}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
