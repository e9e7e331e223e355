"""What the searches of a workspace found to protect, kept in the hookline home.

A search stops after `MAX_SEARCHED` entries, so a command that fills the workspace with
files (on purpose, say) would hide from the next process's search the repositories that
lie past them, and their hooks would be writable from then on. What an earlier search
found is therefore kept, by workspace, and protected again wherever it still is when a
later search is cut short; a search that saw the whole workspace replaces it (what was
removed since drops out).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from ..privacy.files import write_private_file
from .files import is_inside

__all__ = ["REMEMBERED_FILE", "remember"]

logger = logging.getLogger(__name__)

REMEMBERED_FILE = "protected.json"
MAX_WORKSPACES = 64
"""Workspaces kept, the most recently searched last; the oldest go first."""
MAX_PATHS = 2_000
"""Paths kept for one workspace, at most."""


def remember(home: Path, workspace: str, found: list[str], whole: bool) -> list[str]:
    """Keep what a search of `workspace` found (all of it when the search was `whole`, else
    added to what was kept), and return what to protect: `found`, and for a search cut
    short what earlier ones found that is still there. What was kept before stays first,
    so that what a command makes a search find (thousands of paths in a repository's
    config, say) is what the bound leaves out, never what an earlier search found."""
    kept = _read(home)
    before = [path for path in kept.pop(workspace, []) if isinstance(path, str)]
    seen = set(found)
    earlier = [path for path in before if path in seen] if whole else [
        path for path in before if is_inside(path, workspace) and os.path.lexists(path)]
    paths = list(dict.fromkeys([*earlier, *found]))
    if paths[:MAX_PATHS] != before:
        kept[workspace] = paths[:MAX_PATHS]
        while len(kept) > MAX_WORKSPACES:
            kept.pop(next(iter(kept)))
        try:
            write_private_file(home / REMEMBERED_FILE, json.dumps(kept))
        except OSError as exc:  # a full disk: this search's paths are protected all the same
            logger.debug("protection.remember_failed home=%s: %s", home, exc)
    return paths


def _read(home: Path) -> dict[str, list[str]]:
    try:
        data = json.loads((home / REMEMBERED_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(key): value for key, value in data.items()
            if isinstance(value, list)} if isinstance(data, dict) else {}
