"""Fixtures shared by the command-line tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from terminal_support import Terminal, clean_env


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    """A private tmux server whose panes run in `<tmp>/workspace` on `<tmp>/home`."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    # The offline model chosen on purpose: its notice would be one more line on screen.
    term = Terminal(workspace, {**clean_env(tmp_path / "home"), "HOOKLINE_MODEL": "offline"})
    try:
        yield term
    finally:
        term.close()
