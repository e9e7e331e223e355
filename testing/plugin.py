"""The pytest11 entry module: fixtures for plugin authors (docs/testing.md).

pytest imports this module in every run of every project installed beside hookline, so
importing it must cost nothing: it imports pytest only, and each fixture imports the
framework and the builtins when a test asks for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .framework import FrameworkFactory

_ISOLATED_PREFIXES = ("HOOKLINE_", "REPUBLIC_")
"""Variables of the machine running the tests that must not leak into a test's settings."""


@pytest.fixture
def hookline_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary hookline home, set as HOOKLINE_HOME, with every other HOOKLINE_* and
    REPUBLIC_* variable removed, so no setting, key or tape store of the machine running
    the tests takes part."""
    import os

    from hookline.builtins.privacy import HOME_ENV

    for name in list(os.environ):
        if name.startswith(_ISOLATED_PREFIXES):
            monkeypatch.delenv(name)
    home = tmp_path / "hookline-home"
    home.mkdir(mode=0o700)  # private, as hookline makes a home: the scripts go in it too
    monkeypatch.setenv(HOME_ENV, str(home))
    return home


@pytest.fixture
def hookline_workspace(tmp_path: Path) -> Path:
    """A temporary, empty workspace folder for the framework (what the tools act on)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return workspace


@pytest.fixture
def hookline_framework(hookline_home: Path, hookline_workspace: Path) -> FrameworkFactory:
    """A factory of frameworks in the test's home and workspace:
    `make(*plugins, builtin=True, entry_points=(), settings=None, script=None)`."""
    from .framework import FrameworkFactory

    return FrameworkFactory(hookline_home, hookline_workspace)
