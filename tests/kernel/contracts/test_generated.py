"""The generated files (kernel/_generate.py) are up to date, and adding a hook to the
contract takes its spec only: on a copy of the kernel with one more spec in hooks.py,
registration, the hook report and the regenerated typed.py all have the new hook, and no
other file of the kernel changes."""

from __future__ import annotations

import difflib
import filecmp
import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hookline.kernel as kernel
from hookline.kernel import _generate

KERNEL_DIR = Path(kernel.__file__).parent
REGENERATE = "python -m hookline.kernel._generate hookline.testing hookline.builtins"


def assert_fresh(path: Path, text: str) -> None:
    on_disk = path.read_text(encoding="utf-8")
    diff = "".join(difflib.unified_diff(on_disk.splitlines(True), text.splitlines(True),
                                        str(path), "generated"))
    assert on_disk == text, f"{path} is stale: run {REGENERATE} to regenerate\n{diff}"


def test_typed_py_is_what_the_specs_generate() -> None:
    assert_fresh(KERNEL_DIR / "typed.py", _generate.render_typed())


FACES = [face for root in ("hookline.kernel", "hookline.testing", "hookline.builtins")
         for face in _generate._faces(importlib.import_module(root))]


@pytest.mark.parametrize("package", FACES, ids=[face.__name__ for face in FACES])
def test_each_stub_is_what_its_table_generates(package: object) -> None:
    path = Path(package.__file__).with_suffix(".pyi")  # type: ignore[attr-defined]
    assert_fresh(path, _generate.render_stub(package._exports))  # type: ignore[attr-defined]


def test_check_mode_writes_nothing_and_says_what_is_stale(tmp_path: Path) -> None:
    package = copy_kernel(tmp_path)
    typed = package / "typed.py"
    typed.write_text(typed.read_text(encoding="utf-8") + "# edited by hand\n", "utf-8")
    done = generate(tmp_path, "--check")
    assert (done.returncode, done.stdout) == (1, f"stale: {typed}\n")
    assert typed.read_text(encoding="utf-8").endswith("# edited by hand\n")
    assert generate(tmp_path).stdout == f"wrote: {typed}\n"
    assert filecmp.cmp(typed, KERNEL_DIR / "typed.py", shallow=False)
    assert generate(tmp_path, "--check").returncode == 0


def test_a_spec_naming_a_type_hooks_py_does_not_import_is_refused(tmp_path: Path) -> None:
    package = copy_kernel(tmp_path)
    add_spec(package, '\n    @hookspec(kind="many")\n'
                      '    def audit_turn(self, entry: Ledger) -> None:\n'
                      '        """Audit."""\n        ...\n')
    done = generate(tmp_path, "--check")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "ValueError: hooks.py: audit_turn names Ledger, which hooks.py does not import; "
        "import it there (under TYPE_CHECKING)")


NEW_SPEC = '''
    # Auditing.
    @hookspec(kind="many_sync")
    def audit_turn(self, session_id: str, state: TurnState) -> list[str] | None:
        """Return audit lines for a finished turn."""
        ...
'''

ADDED_HOOK = """
import inspect, sys
sys.modules['hookline'] = None  # the copy stands alone
sys.path.insert(0, {root!r})
import acme_vendor.pluginkernel as kernel
from acme_vendor.pluginkernel import (HOOK_SPECS, HOOK_PROTOCOLS, AuditTurnHook,
                                      AuditTurnImpl, HookRuntime, Registry, hookimpl)

class Auditor:
    @hookimpl
    def audit_turn(self, session_id):
        return [f'audited {{session_id}}']

class Misspelled:
    @hookimpl
    def audit_turn(self, sesion_id):
        return None

registry = Registry(HOOK_SPECS)
registry.register(Auditor(), 'auditor')
print(len(HOOK_SPECS), HOOK_SPECS['audit_turn'].kind, HOOK_SPECS['audit_turn'].params)
print(HookRuntime(registry).call_many_sync('audit_turn', session_id='s1', state={{}}))
try:
    registry.register(Misspelled(), 'misspelled')
except kernel.PluginValidationError as exc:
    print('refused:', 'sesion_id' in str(exc))
print([line for line in HookRuntime(registry).hook_report().format().splitlines()
       if 'audit_turn' in line])
print(HOOK_PROTOCOLS['audit_turn'] is AuditTurnHook, 'AuditTurnImpl' in kernel.__all__)
print(inspect.signature(AuditTurnHook.audit_turn))
print(inspect.signature(AuditTurnImpl.__call__))
"""


def test_a_new_hook_needs_its_spec_only(tmp_path: Path) -> None:
    package = copy_kernel(tmp_path)
    original = tmp_path / "original"
    shutil.copytree(package, original)
    add_spec(package, NEW_SPEC)

    assert generate(tmp_path, "--check").stdout == f"stale: {package / 'typed.py'}\n"
    assert generate(tmp_path).returncode == 0
    changed = sorted(path.name for path in package.rglob("*.py*")
                     if not filecmp.cmp(path, original / path.relative_to(package),
                                        shallow=False))
    assert changed == ["hooks.py", "typed.py"], "the root and its stub need no edit"

    done = subprocess.run([sys.executable, "-c", ADDED_HOOK.format(root=str(tmp_path))],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == ["28 many_sync ('session_id', 'state')", "[['audited s1']]",
                         "refused: True"]
    assert "audit_turn" in lines[3] and "auditor" in lines[3], lines[3]
    assert lines[4:] == [
        "True True",
        "(self, *, session_id: 'str', state: 'TurnState') -> 'list[str] | None'",
        "(self, *, session_id: 'str', state: 'TurnState') -> 'list[str] | None'",
    ]
    typed = (package / "typed.py").read_text(encoding="utf-8")
    assert "# Auditing.\nclass AuditTurnHook(Protocol):\n" in typed
    assert '    """A plugin implementing ``audit_turn`` (many_sync: sync only)."""' in typed


@pytest.mark.slow
def test_the_generated_typed_py_of_the_copy_type_checks(tmp_path: Path) -> None:
    """mypy --strict reads the new protocols: a plugin that fits passes, one that does
    not is reported on its line."""
    package = copy_kernel(tmp_path)
    add_spec(package, NEW_SPEC)
    assert generate(tmp_path).returncode == 0
    (tmp_path / "plugin.py").write_text(
        "from typing import Any\n"
        "from acme_vendor.pluginkernel import AuditTurnHook\n\n\n"
        "class Good(AuditTurnHook):\n"
        "    def audit_turn(self, *, session_id: str, state: dict[str, Any]) -> list[str]:\n"
        "        return [session_id]\n\n\n"
        "class Bad(AuditTurnHook):\n"
        "    def audit_turn(self, *, session_id: int, state: dict[str, Any]) -> None:\n"
        "        return None\n", encoding="utf-8")
    (tmp_path / "mypy.ini").write_text("[mypy]\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--strict", "--no-pretty",
         "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), "plugin.py",
         "acme_vendor/pluginkernel/typed.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    errors = [line for line in done.stdout.splitlines() if ": error: " in line]
    assert errors == ['plugin.py:11: error: Argument 1 of "audit_turn" is incompatible with '
                      'supertype "acme_vendor.pluginkernel.typed.AuditTurnHook"; supertype '
                      'defines the argument type as "str"  [override]'], done.stdout


def copy_kernel(tmp_path: Path) -> Path:
    """The kernel, copied to ``<tmp>/acme_vendor/pluginkernel``."""
    (tmp_path / "acme_vendor").mkdir()
    (tmp_path / "acme_vendor" / "__init__.py").write_text("")
    package = tmp_path / "acme_vendor" / "pluginkernel"
    shutil.copytree(KERNEL_DIR, package, ignore=shutil.ignore_patterns("__pycache__"))
    return package


def add_spec(package: Path, spec: str) -> None:
    """Append ``spec`` to the methods of ``HooklineSpecs`` in the copy's hooks.py."""
    hooks = package / "hooks.py"
    text = hooks.read_text(encoding="utf-8")
    end = "\n\n\nHOOK_SPECS: Mapping"
    assert text.count(end) == 1
    hooks.write_text(text.replace(end, "\n" + spec.rstrip("\n") + end), encoding="utf-8")


def generate(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The copy's generator, run where hookline cannot be imported."""
    code = ("import runpy, sys\nsys.modules['hookline'] = None\n"
            f"sys.path.insert(0, {str(root)!r})\nsys.argv[1:] = {list(args)!r}\n"
            "runpy.run_module('acme_vendor.pluginkernel._generate', run_name='__main__')\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
