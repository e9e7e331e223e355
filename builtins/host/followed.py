"""Links git follows that no mount can keep.

Where a repository's hooks, hooks folder or config lead through a link that lies in the
worktree's top folder (`core.hooksPath = hk`, with `hk` a link), the link cannot be kept
read-only: a mount cannot hold a link, and its folder is the workspace. A command may
replace it, so that git runs something else; the watch keeps what each read when it was
found, and names the ones that read otherwise at the end of a turn.
"""

from __future__ import annotations

import os
import threading

__all__ = ["FollowedLinks", "link_target"]


class FollowedLinks:
    """The links found, with what each read when first found."""

    def __init__(self) -> None:
        self._read: dict[str, str] = {}
        self._lock = threading.Lock()

    def take(self, found: list[str]) -> list[str]:
        """`found` without its links, each new one kept with what it reads now."""
        kept = []
        for path in found:
            if not os.path.islink(path):
                kept.append(path)
                continue
            with self._lock:
                self._read.setdefault(path, link_target(path))
        return kept

    def changed(self) -> list[str]:
        """The links that read otherwise now, or are gone; each said once per change."""
        with self._lock:
            changed = [path for path, target in self._read.items() if link_target(path) != target]
            for path in changed:
                self._read[path] = link_target(path)
        return changed


def link_target(path: str) -> str:
    """What the link at `path` reads; empty for anything but a link."""
    try:
        return os.readlink(path)
    except OSError:
        return ""
