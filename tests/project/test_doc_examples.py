"""The examples of the dispatch pages print what the pages say they print.

Every ```python block followed by ``Output:`` and a ```text block is run in a fresh
interpreter (in an empty folder) and its output compared with the text. The pages are
those of the dispatch layer; add a page to PAGES once its examples are exact.
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = ["dispatch.md", "dispatch-tracing.md", "plugins.md", "typed-hooks.md",
         "plugin-packaging.md", "vendoring.md", "hooks/index.md"]


def examples(text: str) -> Iterator[tuple[int, str, str]]:
    """``(line, code, expected output)`` of each example with an Output block."""
    lines = text.split("\n")
    blocks: list[tuple[str, int, int]] = []
    index = 0
    while index < len(lines):
        fence = re.fullmatch(r"```(\w*)", lines[index])
        if fence is None:
            index += 1
            continue
        end = lines.index("```", index + 1)
        blocks.append((fence.group(1), index, end))
        index = end + 1
    for (lang, start, end), (next_lang, next_start, next_end) in itertools.pairwise(blocks):
        between = "\n".join(lines[end + 1:next_start]).strip()
        if lang == "python" and next_lang == "text" and between == "Output:":
            yield (start + 1, "\n".join(lines[start + 1:end]),
                   "\n".join(lines[next_start + 1:next_end]))


CASES = [
    pytest.param(code, output, id=f"{page}:{line}")
    for page in PAGES
    for line, code, output in examples((DOCS / page).read_text(encoding="utf-8"))
]


def test_the_pages_have_examples() -> None:
    pages = {str(case.id).split(":")[0] for case in CASES}
    assert pages == set(PAGES)
    assert any("myapp.hooks" in case.values[0] for case in CASES), "the vendoring example"


def test_examples_are_found_only_with_their_output() -> None:
    text = "```python\nprint(1)\n```\n\n```python\nprint(2)\n```\n\nOutput:\n\n```text\n2\n```\n"
    assert list(examples(text)) == [(5, "print(2)", "2")]


@pytest.mark.parametrize(("code", "output"), CASES)
def test_example_prints_what_the_page_says(code: str, output: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == output.strip(), done.stderr
