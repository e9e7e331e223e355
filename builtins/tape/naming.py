"""How a session's tape is named (from the workspace and the session id, as the reference
names it), and whether a run's fork merges back into it (docs/tapes.md)."""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from os import PathLike
from pathlib import Path
from typing import Final

__all__ = ["session_tape_name", "should_merge_back"]

_TEMP_SESSION_PREFIX: Final = "temp/"


@lru_cache(maxsize=256)
def _resolve(workspace: str) -> str:
    return str(Path(workspace).expanduser().resolve())


def resolved_workspace(workspace: str | PathLike[str]) -> str:
    """The workspace's absolute path, an absolute one's symbolic links resolved once per
    process: every turn names its tape from it, and a `realpath` a turn is measurable in a
    busy gateway. A relative path depends on the current folder: resolved each time."""
    path = os.fspath(workspace)
    return _resolve(path) if os.path.isabs(path) else str(Path(path).expanduser().resolve())


def session_tape_name(session_id: str, workspace: str | PathLike[str]) -> str:
    """`<md5(resolved workspace)[:16]>__<md5(session id)[:16]>`, the reference naming."""
    resolved = resolved_workspace(workspace)
    workspace_hash = hashlib.md5(resolved.encode("utf-8"), usedforsecurity=False).hexdigest()
    session_hash = hashlib.md5(session_id.encode("utf-8"), usedforsecurity=False).hexdigest()
    return f"{workspace_hash[:16]}__{session_hash[:16]}"


def should_merge_back(session_id: str) -> bool:
    """Whether a run's fork merges into the session tape: not for `temp/` sessions."""
    return not session_id.startswith(_TEMP_SESSION_PREFIX)
