"""The layout the sandbox tests confine commands in."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def layout() -> Iterator[tuple[Path, Path, Path]]:
    """A workspace, a hidden hookline home holding a secret, and an outside folder (not
    under /tmp, which a sandboxed command sees replaced by its private folder)."""
    root = Path(tempfile.mkdtemp(prefix="hookline-policy-test-", dir="/var/tmp"))
    workspace, home, outside = (root / name for name in ("workspace", "home", "outside"))
    for folder in (workspace, home, outside):
        folder.mkdir()
    (home / "secret").write_text("the secret")
    try:
        yield workspace, home, outside
    finally:
        shutil.rmtree(root, ignore_errors=True)
