"""The workspace's `AGENTS.md`, read under the file tools' rules for the system prompt.

A cloned repository decides what its `AGENTS.md` is, and its text goes to the provider in
every system prompt, so it is read only when it is workspace content:

- after resolving links it is a file inside the workspace (a link to a file inside is
  fine; one to `~/.ssh/id_ed25519` is not);
- a regular file (no FIFO, socket or device: opened without blocking, checked on the
  open descriptor) with exactly one hard link (another may be a name for a file outside);
- at most `MAX_AGENTS_BYTES` (64 KiB); bytes that are not UTF-8 show as U+FFFD.

A refused file never reaches the model; one warning line says why, once per change of the
file, not at every turn.

`system_prompt` is a `many_sync` hook, which the agent calls on the event loop's thread,
so it cannot wait for a worker thread. Instead the file is looked at on every
`StepStarted` and read in a worker thread when it changed (`refresh`, which the builtin
plugin subscribes on its agent's bus just before each model call), and the hook takes
that reading (`text`). A reading is kept until the file changes: the cache key is the
resolved path with the `stat` fields an edit, a replacement or a new link changes
(device, inode, size, mtime, ctime, link count, mode). When no refresh came first (the
hook called on its own), `text` checks the file itself, cheaply when it is unchanged.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread

from hookline.kernel.streaming import HooklineError

from .files import is_inside, open_single_link

__all__ = ["AGENTS_FILE", "MAX_AGENTS_BYTES", "WorkspaceInstructions", "read_agents_file"]

logger = logging.getLogger(__name__)

AGENTS_FILE = "AGENTS.md"
MAX_AGENTS_BYTES = 64 * 1024
"""Largest `AGENTS.md` sent to the model, in bytes; a larger one is refused whole."""

_RACY_NS = 2_000_000_000
"""A file modified this recently before it was read may change again within the same
timestamp tick, unseen by the key: such a reading is not reused."""

Key = tuple[str, int, int, int, int, int, int, int]


@dataclass(frozen=True)
class Reading:
    """What `read_agents_file` found: the text, or why there is none (`problem`)."""

    key: Key | None
    text: str | None = None
    problem: str | None = None
    reusable: bool = True


def _key(resolved: str, info: os.stat_result) -> Key:
    return (resolved, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns,
            info.st_ctime_ns, info.st_nlink, info.st_mode)


def _locate(workspace: Path) -> tuple[str, Key] | Reading:
    """The resolved path and its key, or the reading it comes to without opening it."""
    path = workspace / AGENTS_FILE
    if not os.path.lexists(path):
        return Reading(None)
    root = os.path.realpath(workspace)
    resolved = os.path.realpath(path)
    if not is_inside(resolved, root):
        return Reading(None, problem=f"it links to {resolved}, outside the workspace")
    try:
        info = os.stat(resolved)
    except FileNotFoundError:
        return Reading(None, problem=f"it links to {resolved}, which does not exist")
    except OSError as exc:
        return Reading(None, problem=f"it cannot be read ({exc.strerror or exc})")
    return resolved, _key(resolved, info)


def _read(resolved: str, key: Key) -> Reading:
    started = time.time_ns()
    try:
        handle, info = open_single_link(resolved, AGENTS_FILE)
    except HooklineError as exc:
        return Reading(key, problem=exc.message)
    except OSError as exc:
        return Reading(key, problem=f"it cannot be read ({exc.strerror or exc})")
    with handle:
        if info.st_size > MAX_AGENTS_BYTES:
            return Reading(key, problem=f"it is {info.st_size:,} bytes, more than the "
                                        f"{MAX_AGENTS_BYTES:,} bytes sent to the model")
        data = handle.read(MAX_AGENTS_BYTES + 1)
    if len(data) > MAX_AGENTS_BYTES:
        return Reading(key, problem=f"it grew past the {MAX_AGENTS_BYTES:,} bytes sent to "
                                    f"the model while being read", reusable=False)
    reusable = _key(resolved, info) == key and info.st_mtime_ns + _RACY_NS < started
    return Reading(key, data.decode("utf-8", "replace"), reusable=reusable)


def look_at_agents_file(workspace: Path, known: Reading | None) -> Reading | None:
    """What can be told without opening the file (a few `stat` calls, cheap enough for the
    event loop): no file, a refusal, or `known` while the file is unchanged; None when the
    file must be read."""
    located = _locate(workspace)
    if isinstance(located, Reading):
        return located
    _resolved, key = located
    return known if known is not None and known.key == key and known.reusable else None


def read_agents_file(workspace: Path, known: Reading | None = None) -> Reading:
    """The workspace's `AGENTS.md` under the rules above (blocking: a worker thread).

    `known`, an earlier reading, is returned again when the file has not changed since."""
    located = _locate(workspace)
    if isinstance(located, Reading):
        return located
    resolved, key = located
    if known is not None and known.key == key and known.reusable:
        return known
    return _read(resolved, key)


class WorkspaceInstructions:
    """The `AGENTS.md` reading of each workspace, refreshed off the event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._readings: dict[str, Reading] = {}
        self._fresh: set[str] = set()
        """Workspaces refreshed since the hook last took their reading."""
        self._warned: dict[str, tuple[Key | None, str] | None] = {}
        """The refusal last warned about, per workspace: one line per change, not per turn."""

    async def refresh(self, workspace: Path) -> None:
        """Look at the file and, only when it changed, read it in a worker thread: a model
        step costs no thread hop while the file stays the same."""
        reading = look_at_agents_file(workspace, self._known(workspace))
        if reading is None:
            reading = await anyio.to_thread.run_sync(read_agents_file, workspace,
                                                     self._known(workspace))
        self._keep(workspace, reading, fresh=True)

    def text(self, workspace: Path) -> str | None:
        """The text to put in the system prompt, or None (no file, or a refused one)."""
        name = str(workspace)
        with self._lock:
            if name in self._fresh:
                self._fresh.discard(name)
                return self._readings[name].text
        reading = read_agents_file(workspace, self._known(workspace))
        return self._keep(workspace, reading, fresh=False).text

    def _known(self, workspace: Path) -> Reading | None:
        with self._lock:
            return self._readings.get(str(workspace))

    def _keep(self, workspace: Path, reading: Reading, *, fresh: bool) -> Reading:
        """Remember a reading (for the hook when `fresh`); warn once per new refusal."""
        name = str(workspace)
        with self._lock:
            self._readings[name] = reading
            if fresh:
                self._fresh.add(name)
            marker = (reading.key, reading.problem) if reading.problem is not None else None
            warn = marker is not None and self._warned.get(name) != marker
            self._warned[name] = marker
        if warn:
            logger.warning("prompt.agents_md_skipped path=%s reason=%s; it is not sent to "
                           "the model", workspace / AGENTS_FILE, reading.problem)
        return reading
