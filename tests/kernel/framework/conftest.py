"""Fixtures shared by the framework tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookline.kernel.framework.core import Framework


@pytest.fixture
def framework(tmp_path: Path) -> Framework:
    return Framework(workspace=tmp_path)

