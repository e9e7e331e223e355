"""Checks that read every tracked Python file of the project.

No file is over 600 lines: past that a module usually holds more than one job, and a
reader can no longer take it in; split it where its jobs part. No comment or docstring
cites an issue number or a section of the hook contract: neither is in the repository,
so the text says the fact (or links a page of docs/) instead.
"""

from __future__ import annotations

import re
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


CITATION = re.compile(r"\b(?:issue\s+#?\d+|contract\s+\d+\.\d+)", re.IGNORECASE)
"""An issue number, or a numbered section of the hook contract document."""


def citations(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each line of `text` citing what the repository lacks."""
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)
            if CITATION.search(line)]


def test_no_source_cites_an_issue_or_a_contract_section() -> None:
    found = [f"{path.relative_to(ROOT)}:{number}: {line}" for path in _python_files()
             if path.is_file() for number, line in citations(path.read_text(encoding="utf-8"))]
    assert found == [], "say the fact instead of citing:\n" + "\n".join(found)


def test_the_citation_check_finds_issue_numbers_and_contract_sections() -> None:
    # Split literals, so that this file does not cite what it shows.
    text = ("# Goal (issue " "12): start fast.\n# see Issue " "#7\n"
            '"""The manager (contract ' '2.18): enabling."""\n'
            "# an issue with numbers: 12 is fine\nreissue 3 and contracts 2 are not cited\n")
    assert [number for number, _ in citations(text)] == [1, 2, 3]
