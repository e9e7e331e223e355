"""How a test runs hookline as a second user, `nobody` (through setpriv)."""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import subprocess
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import hookline

SETPRIV = shutil.which("setpriv")
SYSTEM_PYTHON = "/usr/bin/python3"


@contextlib.contextmanager
def nobody_python_command() -> Iterator[list[str]]:
    """How `nobody` runs hookline: the system's Python (this one lives where `nobody` may not
    enter), this environment's packages, and a copy of hookline's own folders in a place
    `nobody` can read (the checkout may be in such a place too)."""
    assert os.access(SYSTEM_PYTHON, os.X_OK), f"{SYSTEM_PYTHON} (the machine's Python) is needed"
    site = sysconfig.get_paths()["purelib"]
    root = Path(tempfile.mkdtemp(prefix="hookline-nobody-", dir="/var/tmp"))
    package = root / "hookline"
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(hookline.__file__).parent, package, ignore=skip)
    for name in ("kernel", "builtins", "cli", "testing"):
        source = Path(importlib.import_module(f"hookline.{name}").__file__ or "").parent
        shutil.copytree(source, package / name, ignore=skip)
    for path in (root, *root.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert _nobody_reads(site), f"nobody cannot read {site}: .ci/run opens its folder to others"
    try:
        yield [SETPRIV, "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--",  # type: ignore[list-item]
               SYSTEM_PYTHON, "-c", f"import site, sys; sys.path.insert(0, {str(root)!r}); "
               f"site.addsitedir({site!r}); sys.argv[0] = 'hookline'; "
               "from hookline.cli import main; sys.exit(main())"]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _nobody_reads(path: str) -> bool:
    assert SETPRIV
    return subprocess.run([SETPRIV, "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           "--", "ls", path], capture_output=True).returncode == 0
