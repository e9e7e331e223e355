"""The `AGENTS.md` files of the working folder and the folders above it, read under the
file tools' rules for the system prompt.

Which files, as Codex CLI finds them: the one in the repository root (the nearest folder
at or above the working folder that holds `.git`, a folder or a file) and the one in every
folder below it down to the working folder, root first. Outside a repository only the
working folder's counts. Each is headed by its path from the root, so the model knows
which folder it governs.

A cloned repository decides what these files are, and their text goes to the provider in
every system prompt, so each is read only when it is the repository's own content:

- after resolving links it is a file inside the folder it was found in (a link to
  `docs/agents.md` beside it is fine; one to `~/.ssh/id_ed25519` is not);
- a regular file (no FIFO, socket or device: opened without blocking, checked on the
  open descriptor) with exactly one hard link (another may be a name for a file outside);
- at most `MAX_AGENTS_BYTES` (64 KiB); bytes that are not UTF-8 show as U+FFFD.

Together they send at most `MAX_AGENTS_TOTAL` (128 KiB): a file past it is left out whole
and the prompt names it. A refused or left-out file never reaches the model and does not
stop the others; one warning line says why, once per change of the file, not at every turn.

`system_prompt` is a `many_sync` hook, which the agent calls on the event loop's thread,
so it cannot wait for a worker thread. Instead the files are looked at on every
`StepStarted` and read in a worker thread when one changed (`refresh`, which the builtin
plugin subscribes on its agent's bus just before each model call), and the hook takes
that reading (`text`). Each file's reading is kept until it changes: the cache key is the
resolved path with the `stat` fields an edit, a replacement or a new link changes
(device, inode, size, mtime, ctime, link count, mode). When no refresh came first (the
hook called on its own), `text` checks the files itself, cheaply when they are unchanged.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread

from hookline.kernel.errors import HooklineError

from .files import is_inside, open_single_link

__all__ = ["AGENTS_FILE", "MAX_AGENTS_BYTES", "MAX_AGENTS_TOTAL", "WorkspaceInstructions",
           "agents_places", "read_agents_files"]

logger = logging.getLogger(__name__)

AGENTS_FILE = "AGENTS.md"
MAX_AGENTS_BYTES = 64 * 1024
"""Largest `AGENTS.md` sent to the model, in bytes; a larger one is refused whole."""
MAX_AGENTS_TOTAL = 128 * 1024
"""Most bytes of `AGENTS.md` text sent together; a file past it is left out whole."""

_RACY_NS = 2_000_000_000
"""A file modified this recently before it was read may change again within the same
timestamp tick, unseen by the key: such a reading is not reused."""

Key = tuple[str, int, int, int, int, int, int, int]


@dataclass(frozen=True)
class Place:
    """Where one folder's `AGENTS.md` would be, and its name from the repository root."""

    folder: str
    """The folder, resolved: the file must resolve to a file inside it."""
    path: str
    label: str


@dataclass(frozen=True)
class Reading:
    """What one file came to: the text, or why there is none (`problem`)."""

    key: Key | None
    text: str | None = None
    problem: str | None = None
    reusable: bool = True
    size: int = 0
    """Bytes read, counted against `MAX_AGENTS_TOTAL`."""


Located = tuple[str, Key]
"""A file to read: its resolved path and its key."""


def _holds_git(folder: str) -> bool:
    try:
        mode = os.stat(os.path.join(folder, ".git")).st_mode
    except OSError:
        return False
    return stat.S_ISDIR(mode) or stat.S_ISREG(mode)


def agents_places(workspace: Path) -> list[Place]:
    """The places from the repository root down to the working folder, root first (a few
    `stat` calls, cheap enough for the event loop)."""
    here = os.path.realpath(workspace)
    chain = [here]
    while not _holds_git(chain[-1]):
        parent = os.path.dirname(chain[-1])
        if parent == chain[-1]:
            chain = [here]
            break
        chain.append(parent)
    root = chain[-1]
    return [Place(folder, os.path.join(folder, AGENTS_FILE),
                  os.path.relpath(os.path.join(folder, AGENTS_FILE), root))
            for folder in reversed(chain)]


def _key(resolved: str, info: os.stat_result) -> Key:
    return (resolved, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns,
            info.st_ctime_ns, info.st_nlink, info.st_mode)


def _locate(place: Place) -> Located | Reading:
    """The resolved path and its key, or the reading it comes to without opening it."""
    if not os.path.lexists(place.path):
        return Reading(None)
    resolved = os.path.realpath(place.path)
    if not is_inside(resolved, place.folder):
        return Reading(None, problem=f"it links to {resolved}, outside its folder")
    try:
        info = os.stat(resolved)
    except FileNotFoundError:
        return Reading(None, problem=f"it links to {resolved}, which does not exist")
    except OSError as exc:
        return Reading(None, problem=f"it cannot be read ({exc.strerror or exc})")
    return resolved, _key(resolved, info)


def _read(place: Place, resolved: str, key: Key) -> Reading:
    started = time.time_ns()
    try:
        handle, info = open_single_link(resolved, place.label)
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
    return Reading(key, data.decode("utf-8", "replace"), reusable=reusable, size=len(data))


def look_at(place: Place, known: Reading | None) -> Reading | Located:
    """What can be told without opening the file: no file, a refusal, or `known` while the
    file is unchanged; otherwise the file to read."""
    located = _locate(place)
    if isinstance(located, Reading):
        return located
    if known is not None and known.key == located[1] and known.reusable:
        return known
    return located


def read_agents_files(places: Sequence[Place],
                      looked: Sequence[Reading | Located]) -> list[Reading]:
    """The readings of `places`, reading the files `look_at` could not tell (blocking: a
    worker thread)."""
    return [seen if isinstance(seen, Reading) else _read(place, *seen)
            for place, seen in zip(places, looked, strict=True)]


def compose(places: Sequence[Place], readings: Sequence[Reading]
            ) -> tuple[str | None, dict[str, str]]:
    """The system prompt's section (None when no file is sent), and why each file with a
    problem is not sent, by path."""
    parts: list[str] = []
    left_out: list[str] = []
    problems: dict[str, str] = {}
    used = 0
    for place, reading in zip(places, readings, strict=True):
        if reading.problem is not None:
            problems[place.path] = reading.problem
        elif reading.text is not None and used + reading.size > MAX_AGENTS_TOTAL:
            left_out.append(place.label)
            problems[place.path] = (f"the files above it already take {used:,} of the "
                                    f"{MAX_AGENTS_TOTAL:,} bytes sent to the model")
        elif reading.text is not None:
            used += reading.size
            parts.append(f"{place.label}:\n{reading.text.rstrip()}")
    if not parts:
        return None, problems
    where = os.path.relpath(places[-1].folder, places[0].folder)
    head = (f"{AGENTS_FILE} files from the repository root down to the working folder "
            f"({'the root itself' if where == '.' else where}), paths from the root; each "
            f"applies to its folder and those below it, and the deeper one wins where they "
            f"differ:")
    if left_out:
        parts.append(f"Left out, past the {MAX_AGENTS_TOTAL:,} bytes of {AGENTS_FILE} sent "
                     f"to the model: {', '.join(left_out)}.")
    return "\n\n".join([head, *parts]), problems


class WorkspaceInstructions:
    """The `AGENTS.md` readings of each workspace, refreshed off the event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._readings: dict[str, Reading] = {}
        """The last reading of each file, by its path in its folder."""
        self._fresh: dict[str, str | None] = {}
        """The section of each workspace refreshed since the hook last took it."""
        self._warned: dict[str, tuple[Key | None, str] | None] = {}
        """The refusal last warned about, per file: one line per change, not per turn."""

    async def refresh(self, workspace: Path) -> None:
        """Look at the files and, only when one changed, read in a worker thread: a model
        step costs no thread hop while they stay the same."""
        places = agents_places(workspace)
        looked = self._look(places)
        if all(isinstance(seen, Reading) for seen in looked):
            readings = read_agents_files(places, looked)  # nothing to open
        else:
            readings = await anyio.to_thread.run_sync(read_agents_files, places, looked)
        section = self._keep(places, readings)
        with self._lock:
            self._fresh[str(workspace)] = section

    def text(self, workspace: Path) -> str | None:
        """The section for the system prompt, or None (no file, or only refused ones)."""
        with self._lock:
            if str(workspace) in self._fresh:
                return self._fresh.pop(str(workspace))
        places = agents_places(workspace)
        return self._keep(places, read_agents_files(places, self._look(places)))

    def _look(self, places: Sequence[Place]) -> list[Reading | Located]:
        with self._lock:
            known = [self._readings.get(place.path) for place in places]
        return [look_at(place, reading) for place, reading in zip(places, known, strict=True)]

    def _keep(self, places: Sequence[Place], readings: Sequence[Reading]) -> str | None:
        """Remember the readings and compose the section; warn once per new refusal."""
        section, problems = compose(places, readings)
        warn: list[tuple[str, str]] = []
        changed: list[str] = []
        with self._lock:
            for place, reading in zip(places, readings, strict=True):
                before = self._readings.get(place.path)
                if before is not None and before.text != reading.text and reading.text:
                    changed.append(place.path)
                self._readings[place.path] = reading
                problem = problems.get(place.path)
                marker = None if problem is None else (reading.key, problem)
                if problem is not None and self._warned.get(place.path) != marker:
                    warn.append((place.path, problem))
                self._warned[place.path] = marker
        for path, problem in warn:
            logger.warning("prompt.agents_md_skipped path=%s reason=%s; it is not sent to "
                           "the model", path, problem)
        for path in changed:  # what the agent wrote there, every later turn will read
            logger.warning("prompt.agents_md_changed path=%s: the model reads it as it is now "
                           "in every turn's system prompt; look at what changed (git diff)",
                           path)
        return section
