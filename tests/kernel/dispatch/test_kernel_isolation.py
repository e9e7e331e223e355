"""The kernel is vendorable: standard library only, relative imports, works as a copy."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from spec_support import KERNEL_DIR, SPEC_DIR

ALLOWED_THIRD_PARTY = {"typing_extensions"}
# Imported lazily inside the one function that needs it, never at module level.
ALLOWED_LAZY = {"republic"}
# Async code uses only await, so it runs on any event loop: no loop library is imported.
FORBIDDEN = {"asyncio", "trio", "anyio", "sniffio"}


def _imports(tree: ast.AST) -> list[tuple[ast.AST, bool]]:
    """(import node, is_module_level) for every import in a module."""
    found: list[tuple[ast.AST, bool]] = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = nested or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append((child, not nested))
            visit(child, inside)

    visit(tree, False)
    return found


def test_kernel_imports_only_stdlib_and_itself_relatively() -> None:
    problems = []
    for path in sorted(KERNEL_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, module_level in _imports(tree):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [
                node.module or ""
            ]
            for name in names:
                top = name.split(".")[0]
                where = f"{path.relative_to(KERNEL_DIR)}:{node.lineno}"
                if top == "hookline":
                    problems.append(f"{where}: absolute import of {name}")
                    continue
                if top in FORBIDDEN:
                    problems.append(f"{where}: imports the event-loop library {name}")
                    continue
                allowed = top in sys.stdlib_module_names or top in ALLOWED_THIRD_PARTY
                if not (allowed or (top in ALLOWED_LAZY and not module_level)):
                    problems.append(f"{where}: imports {name}")
    assert not problems, "\n".join(problems)


def test_import_check_catches_a_bad_import(tmp_path: Path) -> None:
    source = "import anyio\ndef f():\n    import republic\nfrom hookline import x\n"
    tree = ast.parse(source)
    kinds = [(type(n).__name__, top) for n, top in _imports(tree)]
    assert kinds == [("Import", True), ("Import", False), ("ImportFrom", True)]


def test_import_kernel_loads_no_third_party_module() -> None:
    code = (
        "import sys, hookline.kernel\n"
        "heavy = [m for m in ('anyio', 'republic', 'typer', 'httpx', 'pydantic') "
        "if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""


def test_vendored_copy_passes_the_whole_spec_suite(tmp_path: Path) -> None:
    """Copy kernel/ to acme_vendor.pluginkernel and run every fixture on it, in a process
    where importing hookline is impossible."""
    package = tmp_path / "acme_vendor"
    package.mkdir()
    (package / "__init__.py").write_text("")
    shutil.copytree(KERNEL_DIR, package / "pluginkernel",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = f"""
import sys
sys.modules['hookline'] = None  # any import of hookline now fails
sys.path[:0] = [{str(tmp_path)!r}, {str(SPEC_DIR)!r}]
import acme_vendor.pluginkernel as kernel
import runner
from hookline_adapter import HooklineAdapter
adapter = HooklineAdapter(kernel)
paths = runner.fixture_paths()
for backend in ('asyncio', 'trio'):
    for path in paths:
        runner.run_sync(path, adapter, backend)
assert kernel.Registry.__module__ == 'acme_vendor.pluginkernel.registry'
print('ran', len(paths))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ran ")
    assert int(out.stdout.split()[1]) == len(list((SPEC_DIR / "fixtures").rglob("*.toml")))
