"""The run journal's shared parts: the ops a run records, and which processes own runs.

Split out of `sqlite`: the op format is shared with the PostgreSQL store, and the owner
files are how a SQLite store tells a run of a live process from one left by a dead one.
"""

from __future__ import annotations

import os
import threading
import uuid
from contextlib import suppress
from pathlib import Path
from typing import Any, Final, TypeAlias

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import TapeEntry

from ...privacy.files import make_private_dir
from ..entries import check_batch, check_entry, check_tape_name

try:  # POSIX: an exclusive flock on its owner file marks a process as alive
    import fcntl
except ImportError:  # pragma: no cover - Windows: an open file cannot be deleted instead
    fcntl = None  # type: ignore[assignment]

__all__ = ["ACTIONS", "JournalOp", "Owner", "check_journal_op", "owners_folder"]

JournalOp: TypeAlias = tuple[str, str, TapeEntry | None]
"""One write of a run: `(tape, action, entry)`; action `append` (entry), `bootstrap` (an
anchor appended only when the tape has no anchor yet) or `reset` (entry None)."""

ACTIONS: Final = ("append", "bootstrap", "reset")


def check_journal_op(op: Any) -> tuple[str, str, TapeEntry | None]:
    """One journal op checked: `(tape, action, entry)`, the entry None for a reset.
    Shared by every store with a run journal (SQLite, PostgreSQL)."""
    tape: str
    action: str
    entry: Any
    try:
        tape, action, entry = op
    except (TypeError, ValueError):
        raise HooklineError(
            ErrorKind.invalid_input, f"A journal op is (tape, action, entry), got {op!r}."
        ) from None
    check_tape_name(tape)
    if action not in ACTIONS:
        raise HooklineError(
            ErrorKind.invalid_input,
            f"Unknown journal action {action!r}; expected one of {', '.join(ACTIONS)}.",
        )
    if action == "reset":
        return tape, action, None
    if action == "bootstrap":
        check_batch([], entry)
    return tape, action, check_entry(entry)


class Owner:
    """This store's owner file: `<database>-owners/<name>`, exclusively locked while open.

    A journal row names its owner; another process finding that file missing or unlocked
    knows the run's process is gone. Acquired at the first journal write, released on close.
    """

    def __init__(self, database: Path) -> None:
        self.name = uuid.uuid4().hex
        self.folder = owners_folder(database)
        self._fd: int | None = None
        self._lock = threading.Lock()  # journal writes come from several worker threads

    def acquire(self) -> None:
        with self._lock:
            if self._fd is not None:
                return
            make_private_dir(self.folder)
            fd = os.open(self.folder / self.name, os.O_CREAT | os.O_RDWR, 0o600)
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd

    def release(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is None:
            return
        with suppress(OSError):
            os.unlink(self.folder / self.name)
        os.close(fd)

    @staticmethod
    def alive(database: Path, name: str) -> bool:
        """Whether the owner `name` still holds its file (and so its process still runs)."""
        path = owners_folder(database) / name
        if fcntl is None:  # pragma: no cover - Windows
            try:
                os.unlink(path)
            except FileNotFoundError:
                return False
            except OSError:
                return True
            return False
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        with suppress(OSError):
            os.unlink(path)  # the dead owner's file
        return False


def owners_folder(database: Path) -> Path:
    return database.with_name(database.name + "-owners")
