"""The layers import downwards only: no import cycle anywhere in hookline's packages.

Every import statement counts, including those under `if TYPE_CHECKING:` and those inside
functions: a cycle hidden from the interpreter still ties two modules together for a reader,
a type checker and anyone who vendors one of them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"kernel": "hookline.kernel", "builtins": "hookline.builtins", "cli": "hookline.cli",
            "testing": "hookline.testing"}


def module_name(path: Path) -> str:
    folder, *rest = path.relative_to(ROOT).with_suffix("").parts
    parts = [PACKAGES[folder], *rest]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for folder in PACKAGES
            for path in sorted((ROOT / folder).rglob("*.py"))}


def imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The known modules `name` imports (a `from package import module` names the module).

    A relative import of a module that does not exist (left behind by a move) is yielded as
    `missing:<name>`, so the checks below report it instead of reading it as the package."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            if node.level and node.module and base not in known:
                yield f"missing:{base}"
                continue
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return found


def test_no_import_cycles_in_any_layer() -> None:
    known = modules()
    graph = {name: set(imported(name, path, known)) for name, path in known.items()}
    missing = {name: sorted(t for t in targets if t.startswith("missing:"))
               for name, targets in graph.items()}
    assert {name: found for name, found in missing.items() if found} == {}
    graph = {name: {t for t in targets if t in known} for name, targets in graph.items()}
    assert cycles(graph) == []


def test_the_import_reader_sees_type_checking_and_lazy_imports(tmp_path: Path) -> None:
    module = tmp_path / "mod.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from .framework import Framework\n"
                      "def later():\n    from . import pipeline\n    from .gone import x\n")
    known = {"hookline.kernel": module, "hookline.kernel.framework": module,
             "hookline.kernel.pipeline": module, "hookline.kernel.mod": module}
    found = set(imported("hookline.kernel.mod", module, known))
    assert {"hookline.kernel.framework", "hookline.kernel.pipeline",
            "missing:hookline.kernel.gone"} <= found


def test_the_cycle_finder_finds_cycles_and_only_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
