"""The pytest11 entry module costs nothing: pytest imports it in every run of every
project installed beside hookline, used or not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ENTRY_MODULE = "hookline.testing.plugin"
HEAVY = ("anyio", "trio", "republic", "sniffio", "typer", "hypercorn", "prompt_toolkit",
         "sqlite3", "hookline.kernel.", "hookline.builtins", "hookline.cli")
# The package's lazy exports use the kernel's helper, which loads the kernel's root (a table
# of names) and nothing else of the kernel.
LAZY_HELPER = {"hookline.kernel", "hookline.kernel._lazy"}


def _python(code: str, cwd: Path, *options: str) -> subprocess.CompletedProcess[str]:
    # Run outside the checkout, so that only the installed distribution is importable.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run([sys.executable, *options, "-c", code], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=60, check=True)


def _modules_after(statement: str, cwd: Path) -> set[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sys.modules))"
    return set(_python(code, cwd).stdout.split())


def test_the_entry_module_adds_only_itself_to_what_pytest_imports(tmp_path: Path) -> None:
    baseline = _modules_after("import pytest", tmp_path)
    with_plugin = _modules_after(f"import pytest\nimport {ENTRY_MODULE}", tmp_path)
    assert with_plugin - baseline == {"hookline", "hookline.testing", ENTRY_MODULE,
                                      *LAZY_HELPER}


def test_importtime_shows_no_heavy_module(tmp_path: Path) -> None:
    stderr = _python(f"import {ENTRY_MODULE}", tmp_path, "-X", "importtime").stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines()
                if line.startswith("import time:") and "|" in line]
    assert ENTRY_MODULE in imported
    heavy = [name for name in imported if name.startswith(HEAVY) and name not in LAZY_HELPER]
    assert heavy == [], f"importing {ENTRY_MODULE} pulls in {heavy}"


def test_the_helpers_load_on_first_use(tmp_path: Path) -> None:
    code = ("import sys, hookline.testing as t\n"
            "assert 'hookline.testing.turns' not in sys.modules\n"
            "assert 'run_turn' in dir(t) and t.run_turn.__module__ == 'hookline.testing.turns'\n"
            "try:\n    t.nothing\nexcept AttributeError as e:\n    print(e)\n")
    assert "has no attribute 'nothing'" in _python(code, tmp_path).stdout
