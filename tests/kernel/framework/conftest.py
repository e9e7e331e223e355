"""Fixtures shared by the framework tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookline.kernel.framework.core import Framework


@pytest.fixture
def framework(tmp_path: Path) -> Framework:
    return Framework(workspace=tmp_path)


# Slow integration tests of modules that do not import pytest, by file and test name.
SLOW = frozenset({"test_spec_cli.py::test_the_ci_walkthrough_of_the_conformance_page_runs"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks the tests named in SLOW with `slow`."""
    for item in items:
        if f"{item.path.name}::{item.name}" in SLOW:
            item.add_marker(pytest.mark.slow)
