"""No Python file of the project is over 600 lines: past that a module usually holds more
than one job, and a reader can no longer take it in; split it where its jobs part."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("kernel", "builtins", "cli", "testing", "spec", "tests", "benchmarks",
           "hookline_root")
MAX_LINES = 600


def _python_files() -> list[Path]:
    """The tracked .py files of FOLDERS; every .py file there outside a git checkout."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--", *FOLDERS], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return [path for folder in FOLDERS for path in (ROOT / folder).rglob("*.py")
                if "__pycache__" not in path.parts]
    return [ROOT / name for name in listed.split("\0") if name.endswith(".py")]


def test_no_python_file_is_over_600_lines() -> None:
    files = _python_files()
    assert any(path.name == "hooks.py" for path in files)  # the listing found the sources
    too_long = {
        str(path.relative_to(ROOT)): count
        for path in files
        if path.is_file()
        and (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert too_long == {}, "over 600 lines: " + ", ".join(
        f"{name} ({count})" for name, count in sorted(too_long.items()))
