"""The kernel is vendorable: standard library only, relative imports, works as a copy."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from spec_support import DISPATCH_DIR, KERNEL_DIR, SPEC_DIR

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


def _core_import_problems(folder: Path) -> list[str]:
    """Imports of the modules in ``folder`` that reach beyond it or beyond the stdlib."""
    problems = []
    modules = {path.stem for path in folder.glob("*.py")}
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, _ in _imports(tree):
            where = f"{path.relative_to(folder)}:{node.lineno}"
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                first = (node.module or "").split(".")[0]
                if node.level > 1:
                    problems.append(f"{where}: imports from outside the core ({'.' * node.level}"
                                    f"{node.module or ''})")
                elif first not in modules:
                    problems.append(f"{where}: imports .{node.module or ''}, not a core module")
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [
                node.module or ""
            ]
            for name in names:
                top = name.split(".")[0]
                if top in FORBIDDEN:
                    problems.append(f"{where}: imports the event-loop library {name}")
                elif top not in sys.stdlib_module_names and top not in ALLOWED_THIRD_PARTY:
                    problems.append(f"{where}: imports {name}")
    return problems


def test_dispatch_core_imports_only_stdlib_and_itself() -> None:
    """kernel/_dispatch stands alone: no import reaches the rest of the kernel, not even
    under TYPE_CHECKING or inside a function, and nothing third-party is imported."""
    problems = _core_import_problems(DISPATCH_DIR)
    assert not problems, "\n".join(problems)


def test_core_import_check_catches_imports_of_the_kernel(tmp_path: Path) -> None:
    (tmp_path / "fine.py").write_text("import inspect\nfrom .other import x\n")
    (tmp_path / "other.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ..framework import Framework\n"
        "def f():\n    from .tape import TapeContext\n    import anyio\n"
    )
    assert _core_import_problems(tmp_path) == [
        "other.py:3: imports from outside the core (..framework)",
        "other.py:5: imports .tape, not a core module",
        "other.py:6: imports the event-loop library anyio",
    ]


def _core_graph() -> dict[str, set[str]]:
    """Module -> core modules it imports (every import statement, wherever it is)."""
    graph: dict[str, set[str]] = {}
    for path in DISPATCH_DIR.glob("*.py"):
        targets = graph.setdefault(path.stem, set())
        for node, _ in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                targets.add((node.module or "__init__").split(".")[0])
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (as a path), or [] when there is none."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(module: str) -> list[str]:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                return [*path[path.index(target):], target]
            if target not in state and (found := visit(target)):
                return found
        state[module] = "done"
        path.pop()
        return []

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return []


def test_dispatch_core_has_no_import_cycles() -> None:
    graph = _core_graph()
    assert {"registry", "plan", "runtime", "__init__"} <= set(graph)
    assert _cycle(graph) == []
    # The check finds a cycle when there is one.
    assert _cycle({**graph, "impl": {*graph["impl"], "registry"}})[0] in {"impl", "registry"}


FRAMEWORK_LAYER = {"framework", "pipeline", "agent_hooks", "envcache", "loading", "model_stage"}
"""The kernel modules above the contract modules (see docs/architecture.md)."""


def test_contract_modules_do_not_import_the_framework() -> None:
    problems = []
    for path in sorted(KERNEL_DIR.glob("*.py")):
        if path.stem in FRAMEWORK_LAYER or path.name == "__init__.py":
            continue
        for node, _ in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                target = (node.module or "").split(".")[0]
                if target in FRAMEWORK_LAYER:
                    problems.append(f"{path.name}:{node.lineno}: imports .{node.module}")
    assert not problems, "\n".join(problems)


def test_import_check_catches_a_bad_import(tmp_path: Path) -> None:
    source = "import anyio\ndef f():\n    import republic\nfrom hookline import x\n"
    tree = ast.parse(source)
    kinds = [(type(n).__name__, top) for n, top in _imports(tree)]
    assert kinds == [("Import", True), ("Import", False), ("ImportFrom", True)]


def test_import_kernel_loads_no_third_party_module() -> None:
    code = (
        "import sys\n"
        "from hookline.kernel import *  # every public name, so every layer\n"
        "assert 'hookline.kernel.framework.core' in sys.modules\n"
        "heavy = [m for m in ('anyio', 'republic', 'typer', 'httpx', 'pydantic') "
        "if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""


KERNEL_SUITE_FILES = ("__init__.py", "__main__.py", "runner.py", "suite.py", "command_adapter.py",
                      "fixture_values.py", "fixture_plugins.py", "framework_steps.py",
                      "logmatch.py", "dispatch_adapter.py", "hookline_adapter.py", "fixtures")
"""What docs/vendoring.md says to copy of spec/ to run the suite on a copy of kernel/."""
CORE_SUITE_FILES = ("__init__.py", "__main__.py", "runner.py", "suite.py", "command_adapter.py",
                    "fixture_values.py", "fixture_plugins.py", "framework_steps.py",
                    "logmatch.py", "dispatch_adapter.py", "fixtures/dispatch")
"""What docs/vendoring.md says to copy of spec/ to run the suite on a copy of the core."""


def _copy_suite(folder: Path, files: tuple[str, ...]) -> Path:
    """Only ``files`` of spec/ in the package ``<folder>/conformance``: the run proves
    nothing else is needed; ``folder`` goes on the path."""
    target = folder / "conformance"
    for name in files:
        source = SPEC_DIR / name
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target / name)
        else:
            shutil.copy(source, target / name)
    return folder


def test_vendoring_page_lists_the_suite_files() -> None:
    page = (SPEC_DIR.parent / "docs" / "vendoring.md").read_text(encoding="utf-8")
    for name in {*KERNEL_SUITE_FILES, *CORE_SUITE_FILES}:
        assert f"`spec/{name}`" in page, name


@pytest.mark.slow
def test_vendored_copy_passes_the_whole_spec_suite(tmp_path: Path) -> None:
    """Copy kernel/ to acme_vendor.pluginkernel and run every fixture on it, in a process
    where importing hookline is impossible, with only the listed files of spec/."""
    suite = _copy_suite(tmp_path / "suite", KERNEL_SUITE_FILES)
    package = tmp_path / "acme_vendor"
    package.mkdir()
    (package / "__init__.py").write_text("")
    shutil.copytree(KERNEL_DIR, package / "pluginkernel",
                    ignore=shutil.ignore_patterns("__pycache__"))
    code = f"""
import sys
sys.modules['hookline'] = None  # any import of hookline now fails
sys.path[:0] = [{str(tmp_path)!r}, {str(suite)!r}]
import acme_vendor.pluginkernel as kernel
from conformance import runner
from conformance.hookline_adapter import HooklineAdapter
adapter = HooklineAdapter(kernel)
paths = runner.fixture_paths()
for backend in ('asyncio', 'trio'):
    for path in paths:
        runner.run_sync(path, adapter, backend)
assert kernel.Registry.__module__ == 'acme_vendor.pluginkernel._dispatch.registry'
print('ran', len(paths))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ran ")
    assert int(out.stdout.split()[1]) == len(list((SPEC_DIR / "fixtures").rglob("*.toml")))



@pytest.mark.slow
def test_vendored_copy_without_republic_skips_the_media_fixtures(tmp_path: Path) -> None:
    """republic is the whole kernel's one optional library: without it the fixtures that
    build media objects are skipped, with the reason, and nothing fails."""
    suite = _copy_suite(tmp_path / "suite", KERNEL_SUITE_FILES)
    package = tmp_path / "acme_vendor"
    package.mkdir()
    (package / "__init__.py").write_text("")
    shutil.copytree(KERNEL_DIR, package / "pluginkernel",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (suite / "acme_adapter.py").write_text(
        "from conformance.hookline_adapter import HooklineAdapter\n\n\n"
        "def make():\n    return HooklineAdapter('acme_vendor.pluginkernel')\n")
    code = f"""
import sys
sys.modules.update(hookline=None, republic=None)  # neither can be imported now
sys.path[:0] = [{str(tmp_path)!r}, {str(suite)!r}]
from conformance.suite import main
raise SystemExit(main(['--adapter', 'acme_adapter:make']))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    media = sorted(path.relative_to(SPEC_DIR / "fixtures").as_posix()
                   for path in (SPEC_DIR / "fixtures").rglob("*.toml")
                   if "$image" in path.read_text(encoding="utf-8"))
    assert media
    skipped = [line for line in out.stdout.splitlines()
               if line.endswith(": the adapter does not support 'media'")]
    assert skipped == [f"SKIP {name}: the adapter does not support 'media'" for name in media]


def _copy_core(tmp_path: Path, package: str) -> Path:
    """Copy kernel/_dispatch alone to ``<tmp>/<package>`` (dotted: parents are made)."""
    target = tmp_path.joinpath(*package.split("."))
    for parent in list(target.parents)[: package.count(".")]:
        parent.mkdir(parents=True, exist_ok=True)
        (parent / "__init__.py").touch()
    shutil.copytree(DISPATCH_DIR, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.mark.slow
def test_vendored_dispatch_core_passes_the_dispatch_fixtures(tmp_path: Path) -> None:
    """Copy kernel/_dispatch alone to acme.hookcore and run the dispatch fixtures on it,
    through an adapter that declares the hooks they use, where hookline cannot be
    imported, with only the listed files of spec/."""
    suite = _copy_suite(tmp_path / "suite", CORE_SUITE_FILES)
    _copy_core(tmp_path, "acme.hookcore")
    code = f"""
import sys
sys.modules['hookline'] = None  # any import of hookline now fails
sys.path[:0] = [{str(tmp_path)!r}, {str(suite)!r}]
import acme.hookcore as core
from conformance import dispatch_adapter, runner
from conformance.dispatch_adapter import DispatchAdapter
from conformance.suite import main
assert runner.__file__.startswith({str(suite)!r})
adapter = DispatchAdapter(core)
paths = runner.fixture_paths(runner.FIXTURE_DIR / 'dispatch')
for backend in ('asyncio', 'trio'):
    for path in paths:
        runner.run_sync(path, adapter, backend)
assert core.Registry.__module__ == 'acme.hookcore.registry'
import contextlib, io
dispatch_adapter.make_copy = lambda: DispatchAdapter(core)
with contextlib.redirect_stdout(io.StringIO()) as shown:
    status = main(['--adapter', 'conformance.dispatch_adapter:make_copy'])
assert status == 0 and ' 0 failed' in shown.getvalue(), shown.getvalue()
assert sys.modules['hookline'] is None
assert not [m for m in sys.modules if m.startswith('hookline.')]
print('ran', len(paths))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ran", str(len(list((SPEC_DIR / "fixtures" / "dispatch")
                                                      .glob("*.toml"))))]


def test_marks_belong_to_projects_across_copies(tmp_path: Path) -> None:
    """A registry reads the marks of its projects, whichever copy of the code made them:
    a copy with a hook of its own ignores hookline's marks and reads its own, and
    hookline's registry reads a ``hookline`` mark made by the copy, but not the copy's."""
    _copy_core(tmp_path, "acme.hookcore")
    code = f"""
import sys
sys.path.insert(0, {str(tmp_path)!r})
import acme.hookcore as core
from hookline.kernel import HOOK_SPECS, HookRuntime, Registry, hookimpl

acme_spec, acme_impl = core.HookspecMarker('acme'), core.HookimplMarker('acme')

class AcmeHooks:
    @acme_spec(kind='many_sync')
    def greet(self, name):
        \"\"\"Greet someone.\"\"\"

class MarkedForHookline:
    @hookimpl
    def greet(self, name):
        return 'hookline ' + name

class MarkedForAcme:
    @acme_impl
    def greet(self, name):
        return 'acme ' + name

registry = core.Registry(core.collect_specs(AcmeHooks))
registry.register(MarkedForHookline(), 'hookline-plugin')
registry.register(MarkedForAcme(), 'acme-plugin')
print(registry.projects, core.HookRuntime(registry).call_many_sync('greet', name='bob'))
print(sorted(registry.plugin_hooks('hookline-plugin')), len(registry.unknown_impls))

class FromTheCopy:
    @core.HookimplMarker('hookline')(tryfirst=True)
    def resolve_session(self, message):
        return 'copy'

class AcmeOnly:
    @acme_impl
    def resolve_session(self, message):
        return 'acme'

ours = Registry(HOOK_SPECS)
ours.register(FromTheCopy(), 'copy')
ours.register(AcmeOnly(), 'acme')
impl, = ours.hook_impls('resolve_session')
print(ours.projects, HookRuntime(ours).call_first_sync('resolve_session', message={{}}),
      impl.tryfirst, sorted(ours.plugin_hooks('acme')))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "('acme',) ['acme bob']",
        "[] 0",
        "('hookline',) copy True []",
    ]
