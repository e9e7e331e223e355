"""One import path per name: each public name is imported from the module that defines it
or from a face that lists it, never from a module that merely imported it.

A face is a package's `__init__.py`: a table `_PUBLIC` (module -> the names it defines,
imported on first use) or, for the dispatch core, `mcp` and `bub`, its `__all__`. A
second path for one name (a re-export) hides where the name lives, drifts from the face
and keeps dead imports alive, so the checks below read every import statement of
kernel/, builtins/, cli/ and testing/ with `ast`, as `test_import_layers.py` does.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from test_import_layers import ROOT, modules


@dataclass(frozen=True)
class Source:
    """A module as the checks read it: its syntax tree, and whether it is a package."""

    tree: ast.Module
    package: bool = False


def parsed() -> dict[str, Source]:
    """Every module of kernel/, builtins/, cli/ and testing/ (a fresh dict each call)."""
    return dict(_parsed())


@cache
def _parsed() -> dict[str, Source]:
    return {name: Source(ast.parse(path.read_text("utf-8")), path.name == "__init__.py")
            for name, path in modules().items()}


def top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements an import runs: the module's and those of its `if` and `try` blocks."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from top_level([*node.body, *node.orelse])
        elif isinstance(node, ast.Try):
            handlers = [stmt for handler in node.handlers for stmt in handler.body]
            yield from top_level([*node.body, *handlers, *node.orelse, *node.finalbody])


@cache
def defined(tree: ast.Module) -> frozenset[str]:
    """The names a module binds itself (classes, functions, assignments), imports aside."""
    names: set[str] = set()
    for node in top_level(tree.body):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(found.id for target in targets for found in ast.walk(target)
                         if isinstance(found, ast.Name))
    return frozenset(names)


def assigned(tree: ast.Module, name: str) -> ast.expr | None:
    """The value a module assigns to `name` at its top level."""
    for node in top_level(tree.body):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(target, ast.Name) and target.id == name for target in targets):
            return node.value
    return None


def declared_all(source: Source) -> set[str] | None:
    value = assigned(source.tree, "__all__")
    return None if value is None else set(ast.literal_eval(value))


def resolve(module: str, source: Source, node: ast.ImportFrom) -> str:
    """The absolute name of the module an import statement reads from."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if source.package else module.split(".")[:-1]
    anchor = package[: len(package) - node.level + 1]
    return ".".join([*anchor, *([node.module] if node.module else [])])


def imports(module: str, source: Source) -> Iterator[tuple[str, str]]:
    """(module read from, name) of each `from ... import name`, in functions too."""
    for node in ast.walk(source.tree):
        if isinstance(node, ast.ImportFrom):
            origin = resolve(module, source, node)
            yield from ((origin, alias.name) for alias in node.names)


def face_table(module: str, sources: dict[str, Source]) -> dict[str, set[str]] | None:
    """A face's names: module -> the names the face gives it (None if `module` is no face).

    A lazy face names its modules in `_PUBLIC` (`EVERY` takes the module's `__all__`); a
    face that imports its names lists them in `__all__`, each taken from where it is
    imported from (or from the face itself, when it defines them)."""
    source = sources[module]
    if not source.package:
        return None
    table = assigned(source.tree, "_PUBLIC")
    if isinstance(table, ast.Dict):
        found: dict[str, set[str]] = {}
        for key, value in zip(table.keys, table.values, strict=True):
            target = f"{module}.{ast.literal_eval(key) if key else ''}"
            listed = declared_all(sources[target]) if isinstance(value, ast.Name) else None
            found[target] = listed or set(ast.literal_eval(value))
        return found
    public = declared_all(source)
    if public is None:
        return None
    origins = {name: origin for origin, name in imports(module, source)}
    found = {}
    for name in public:
        found.setdefault(origins.get(name, module), set()).add(name)
    return found


def faces(sources: dict[str, Source]) -> dict[str, dict[str, set[str]]]:
    return {name: table for name in sources
            if (table := face_table(name, sources)) is not None}


def homes(tables: dict[str, dict[str, set[str]]]) -> dict[str, set[str]]:
    """Name -> the modules the faces name for it (most names have one)."""
    found: dict[str, set[str]] = {}
    for table in tables.values():
        for module, names in table.items():
            for name in names:
                found.setdefault(name, set()).add(module)
    return found


def listed_by(face: str, tables: dict[str, dict[str, set[str]]]) -> set[str]:
    return {name for names in tables.get(face, {}).values() for name in names}


def home(module: str, name: str, sources: dict[str, Source]) -> str | None:
    """The module that defines the `name` that `module` holds, following its imports."""
    seen = set()
    while module in sources and module not in seen:
        seen.add(module)
        if name in defined(sources[module].tree):
            return module
        module = next((origin for origin, imported in imports(module, sources[module])
                       if imported == name), "")
    return None


def import_problems(sources: dict[str, Source], readers: dict[str, Source] | None = None
                    ) -> list[str]:
    """Imports (of `readers`, by default the sources themselves) that take a name from a
    module that neither defines it nor is a face listing it, with the module defining it."""
    tables = faces(sources)
    problems = []
    for module, source in sorted((sources if readers is None else readers).items()):
        for origin, name in imports(module, source):
            if (origin not in sources or f"{origin}.{name}" in sources or name == "*"
                    or name in defined(sources[origin].tree) or name in listed_by(origin, tables)):
                continue
            problems.append(f"{module}: from {origin} import {name} (import it from"
                            f" {home(origin, name, sources)})")
    return problems


def test_each_name_is_imported_from_its_home_or_its_face() -> None:
    assert import_problems(parsed()) == []


def test_tests_and_benchmarks_import_each_name_from_its_home_or_its_face() -> None:
    paths = [path for folder in ("tests", "benchmarks") for path in (ROOT / folder).rglob("*.py")]
    readers = {str(path.relative_to(ROOT)): Source(ast.parse(path.read_text("utf-8")))
               for path in paths}
    assert import_problems(parsed(), readers) == []


def table_problems(sources: dict[str, Source]) -> list[str]:
    """Face entries naming a module that does not define the name. A face may list a name
    another face gives (the models face repeats the kernel's message types for the
    scripted model's users): the module it names then imports the name from that home."""
    tables = faces(sources)
    names_home = homes(tables)
    problems = []
    for face, table in sorted(tables.items()):
        for module, names in sorted(table.items()):
            source = sources[module]
            origins = {name: origin for origin, name in imports(module, source)}
            for name in sorted(names - defined(source.tree)):
                origin = origins.get(name)
                if origin is None or origin not in names_home.get(name, set()) - {module}:
                    problems.append(f"{face} names {module} for {name}, defined in {origin}")
    return problems


def test_faces_name_the_module_that_defines_each_name() -> None:
    assert table_problems(parsed()) == []


SELECTIONS = {"hookline.kernel"}
"""Faces that export a selection of their modules' names: the kernel root exports the
contract types, and helpers stay in their modules' `__all__` (docs/architecture.md)."""


def all_problems(sources: dict[str, Source]) -> list[str]:
    """Modules a face names whose `__all__` is not what that face gives them (the face of
    a module is the nearest package with a table)."""
    tables = {face: table for face, table in faces(sources).items()
              if assigned(sources[face].tree, "_PUBLIC") is not None}
    problems = []
    for module, source in sorted(sources.items()):
        face = max((face for face in tables if module.startswith(f"{face}.")), key=len,
                   default=None)
        if face is None or module not in tables[face]:
            continue
        wanted, found = tables[face][module], declared_all(source)
        if found is None and face in SELECTIONS:
            continue
        if found is None or (found < wanted if face in SELECTIONS else found != wanted):
            problems.append(f"{module}: __all__ is {sorted(found or ())}, its face gives"
                            f" {sorted(wanted)}")
    return problems


def test_a_module_exports_what_its_face_gives_it() -> None:
    assert all_problems(parsed()) == []


def test_no_module_exports_a_name_it_imports_unless_a_face_names_it_there() -> None:
    sources = parsed()
    names_home = homes(faces(sources))
    found = {module: sorted(name for name in (declared_all(source) or set())
                            - defined(source.tree) if module not in names_home.get(name, ()))
             for module, source in sources.items() if not source.package}
    assert {module: names for module, names in found.items() if names} == {}


def fake(text: dict[str, str]) -> dict[str, Source]:
    """Sources from text: a name ending in `/` is a package."""
    return {name.rstrip("/"): Source(ast.parse(body), name.endswith("/"))
            for name, body in text.items()}


FACE = '_PUBLIC = {"errors": ("HooklineError",), "streaming": ("StreamEvent",)}\n'


def test_the_checks_report_a_name_imported_from_a_module_that_re_exports_it() -> None:
    sources = fake({
        "k/": FACE,
        "k.errors": "class HooklineError(Exception): ...\ndef bad_return(): ...\n",
        "k.streaming": "from .errors import HooklineError, bad_return\n"
                       "__all__ = ['StreamEvent']\nclass StreamEvent: ...\n",
        "b.user": "from k.streaming import StreamEvent, HooklineError\n"
                  "from k import StreamEvent\n"
                  "def later():\n    from k.streaming import bad_return\n",
    })
    assert import_problems(sources) == [
        "b.user: from k.streaming import HooklineError (import it from k.errors)",
        "b.user: from k.streaming import bad_return (import it from k.errors)",
    ]
    assert all_problems(sources) == [
        "k.errors: __all__ is [], its face gives ['HooklineError']"]
    sources["k.errors"] = Source(ast.parse("__all__ = ['HooklineError', 'bad_return']\n"))
    assert all_problems(sources) == [
        "k.errors: __all__ is ['HooklineError', 'bad_return'], its face gives ['HooklineError']"]


def test_the_checks_report_a_face_that_names_a_re_exporting_module() -> None:
    sources = fake({
        "k/": FACE,
        "k.errors": "__all__ = ['HooklineError']\nclass HooklineError(Exception): ...\n",
        "k.streaming": "__all__ = ['StreamEvent']\nfrom .errors import StreamEvent\n",
        "m/": '_PUBLIC = {"base": ("HooklineError", "Other")}\n',
        "m.base": "__all__ = ['HooklineError', 'Other']\n"
                  "from k.errors import HooklineError\nfrom k.streaming import Other\n",
    })
    assert table_problems(sources) == [
        "k names k.streaming for StreamEvent, defined in k.errors",
        "m names m.base for Other, defined in k.streaming",
    ]
