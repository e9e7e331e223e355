"""docs/testing.md's examples pass: each ```python block that starts with a file name
comment (`# test_x.py`, `# conftest.py`) is written to a folder and the whole set is run
by pytest in a fresh process, through hookline's pytest11 entry point."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def example_files() -> dict[str, str]:
    blocks = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text("utf-8"), re.S | re.M)
    files: dict[str, str] = {}
    for block in blocks:
        first, _, rest = block.partition("\n")
        name = re.fullmatch(r"# ((?:test_\w+|conftest)\.py)", first)
        assert name, f"a python block of docs/testing.md lacks its file name: {first!r}"
        assert name.group(1) not in files, f"two examples named {name.group(1)}"
        files[name.group(1)] = rest
    return files


def test_the_page_has_a_conftest_and_test_files() -> None:
    files = example_files()
    assert "conftest.py" in files and len(files) >= 6


def test_every_example_passes_on_both_backends(pytester: pytest.Pytester) -> None:
    files = example_files()
    for name, text in files.items():
        pytester.path.joinpath(name).write_text(text, encoding="utf-8")
    async_tests = sum(len(re.findall(r"^async def test_", text, re.M)) for text in files.values())
    sync_tests = sum(len(re.findall(r"^def test_", text, re.M)) for text in files.values())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=2 * async_tests + sync_tests)
