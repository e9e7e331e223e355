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
            # `from package import module` names the module, `from module import name`
            # the module.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                       for alias in node.names]
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
                      "def later():\n    from . import pipeline\n    from .gone import x\n"
                      "from . import _util\n")
    known = {"hookline.kernel": module, "hookline.kernel.framework": module,
             "hookline.kernel.pipeline": module, "hookline.kernel.mod": module}
    found = set(imported("hookline.kernel.mod", module, known))
    assert found == {"hookline.kernel.framework", "hookline.kernel.pipeline",
                     "missing:hookline.kernel.gone", "hookline.kernel"}
    # `from . import pipeline` names the module, not the package; `_util` is no known
    # module here, so that import names the package.
    with_util = {**known, "hookline.kernel._util": module}
    found_with_util = set(imported("hookline.kernel.mod", module, with_util))
    assert found_with_util == (found - {"hookline.kernel"}) | {"hookline.kernel._util"}


def test_the_cycle_finder_finds_cycles_and_only_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


# The kernel's layers, bottom up (docs/architecture.md "Layering"). Each module may import
# its own layer and those below; the package root (`hookline.kernel`) re-exports them all.
KERNEL_LAYERS = {
    "helpers": {"_identity", "_lazy", "_util"},
    "core": {"_dispatch"},
    "contract": {"hooks", "typed", "errors", "envelope", "turn", "streaming", "prompt", "tape",
                 "environment", "channels", "tools", "interception", "events", "models",
                 "messages"},
    "framework": {"framework"},  # the folder kernel/framework/
    "tools": {"_generate", "vendor"},
}
LAYER_ORDER = list(KERNEL_LAYERS)


def kernel_layer(module: str) -> str | None:
    """The layer of a ``hookline.kernel`` module (None for the package root)."""
    if module == "hookline.kernel":
        return None
    first = module.removeprefix("hookline.kernel.").split(".")[0]
    found = [layer for layer, members in KERNEL_LAYERS.items() if first in members]
    assert found, f"{module}: add it to a layer of KERNEL_LAYERS (docs/architecture.md)"
    return found[0]


def layer_problems(graph: dict[str, set[str]]) -> list[str]:
    """Imports of a kernel module that reach a layer above its own."""
    problems = []
    for name, targets in sorted(graph.items()):
        if not name.startswith("hookline.kernel") or (own := kernel_layer(name)) is None:
            continue
        for target in sorted(targets):
            if not target.startswith("hookline.kernel"):
                continue
            layer = kernel_layer(target)
            if layer is None or LAYER_ORDER.index(layer) > LAYER_ORDER.index(own):
                problems.append(f"{name} ({own}) imports {target} ({layer or 'the root'})")
    return problems


def test_kernel_modules_import_their_layer_and_those_below_only() -> None:
    """The contract modules never import the framework layer (hooks.py declares, the
    framework runs), and nothing but the root imports the root."""
    known = modules()
    graph = {name: {t for t in imported(name, path, known) if t in known}
             for name, path in known.items() if name.startswith("hookline.kernel")}
    assert {kernel_layer(name) for name in graph} >= {"contract", "framework", "core"}
    assert layer_problems(graph) == []


def test_the_layer_check_catches_a_contract_module_importing_the_framework() -> None:
    graph = {"hookline.kernel.hooks": {"hookline.kernel.framework.model_stage",
                                       "hookline.kernel._dispatch.registry"},
             "hookline.kernel.framework.model_stage": {"hookline.kernel.hooks"},
             "hookline.kernel._util": {"hookline.kernel"}}
    assert layer_problems(graph) == [
        "hookline.kernel._util (helpers) imports hookline.kernel (the root)",
        "hookline.kernel.hooks (contract) imports hookline.kernel.framework.model_stage"
        " (framework)",
    ]


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: {t for t in imported(name, path, known) if t in known}
            for name, path in known.items()}


def builtins_faces() -> set[str]:
    """``hookline.builtins``, its plugin module and the face of each folder in it."""
    folders = {path.parent.name for path in (ROOT / "builtins").glob("*/__init__.py")}
    return {"hookline.builtins", "hookline.builtins.plugin",
            *(f"hookline.builtins.{folder}" for folder in folders)}


def test_builtins_root_holds_the_plugin_and_folders_only() -> None:
    files = {path.name for path in (ROOT / "builtins").glob("*.py*")}
    assert files == {"__init__.py", "plugin.py"}


def test_cli_and_testing_import_builtins_through_folder_faces_only() -> None:
    faces = builtins_faces()
    deep = {name: sorted(t for t in targets
                         if t.startswith("hookline.builtins.") and t not in faces)
            for name, targets in import_graph().items()
            if name.startswith(("hookline.cli", "hookline.testing"))}
    assert {name: found for name, found in deep.items() if found} == {}


def test_the_framework_folder_is_imported_through_its_face_only() -> None:
    """Outside kernel/framework/, code names the framework's modules through
    `hookline.kernel.framework` (or the kernel root), never a module inside it."""
    inside = "hookline.kernel.framework."
    deep = {name: sorted(t for t in targets if t.startswith(inside))
            for name, targets in import_graph().items() if not name.startswith(inside)}
    assert {name: found for name, found in deep.items() if found} == {}


BUILTINS_ORDER = ("privacy", "store", "config", "models", "host", "tape", "agent", "terminal",
                  "approval", "mcp", "telemetry", "channels", "bub")
"""The folders of builtins/, bottom-up: a folder imports only the folders before it (the
root's `plugin.py` and `__init__.py` sit above them all). docs/architecture.md shows it."""


def builtins_folder(module: str) -> str | None:
    """The builtins folder a module belongs to (`plugin` for the plugin module), or None
    outside the folders (the builtins root, other packages)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["hookline", "builtins"] else None


def order_problems(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a builtins folder that reaches a folder at or above its own place in
    BUILTINS_ORDER (or the root, or a folder without a place)."""
    rank = {folder: place for place, folder in enumerate(BUILTINS_ORDER)}
    problems = []
    for name, targets in sorted(graph.items()):
        source = builtins_folder(name)
        if source is None or source == "plugin":
            continue
        if source not in rank:
            problems.append(f"{name}: the folder {source!r} has no place in BUILTINS_ORDER")
            continue
        for target in sorted(targets):
            folder = builtins_folder(target)
            if target == "hookline.builtins" or folder == "plugin":
                problems.append(f"{name} imports {target}, the builtins root above every folder")
            elif folder is not None and folder != source and rank.get(folder, len(rank)) > \
                    rank[source]:
                problems.append(f"{name} imports {target}: {folder!r} comes after {source!r}")
    return problems


def test_builtins_folders_import_only_the_folders_below_them() -> None:
    folders = {path.parent.name for path in (ROOT / "builtins").glob("*/__init__.py")}
    assert folders == set(BUILTINS_ORDER), "give every builtins folder its place"
    assert order_problems(import_graph()) == []


def test_the_order_check_catches_an_import_upwards() -> None:
    graph = {
        "hookline.builtins.store.memory": {"hookline.builtins.tape.tape",
                                           "hookline.builtins.privacy.redact"},
        "hookline.builtins.tape.tape": {"hookline.builtins.store.memory", "hookline.kernel"},
        "hookline.builtins.agent.loop": {"hookline.builtins.plugin"},
        "hookline.builtins.newfolder.x": {"hookline.builtins.store.memory"},
        "hookline.builtins.plugin": {"hookline.builtins.channels.manager"},
    }
    assert order_problems(graph) == [
        "hookline.builtins.agent.loop imports hookline.builtins.plugin, the builtins root "
        "above every folder",
        "hookline.builtins.newfolder.x: the folder 'newfolder' has no place in BUILTINS_ORDER",
        "hookline.builtins.store.memory imports hookline.builtins.tape.tape: 'tape' comes "
        "after 'store'",
    ]


def test_the_architecture_page_shows_the_order() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert " → ".join(f"`{folder}/`" for folder in BUILTINS_ORDER) in page
