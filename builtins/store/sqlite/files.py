"""The SQLite store file itself: damage, its identity, checking it and backing it up.

Split out of `sqlite`: these work on a store file whether or not a store has it open
(`hookline store check` and `hookline store backup` use them), except `FileIdentity`,
which tells an open store whether its path still names the file it has open.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from hookline.kernel.errors import ErrorKind, HooklineError

from ...privacy.files import create_private_file

__all__ = ["StoreCheck", "backup_database", "check_database"]


class FileIdentity:
    """The device and inode of the file a store opened, to notice its path naming another.

    SQLite goes on writing to the file it opened after that file is deleted or another is
    renamed over its path, and every commit would be acknowledged, then lost with the
    unlinked file. Taken when the store opens; `problem()` asks again before and after
    each write transaction (one `stat`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        status = os.stat(path)
        self.device, self.inode = status.st_dev, status.st_ino

    def problem(self) -> str | None:
        """What became of the file at the path (`was deleted`, `was replaced by another
        file`), or None while it is the one open; another failure to look is `temporary`."""
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            return "was deleted"
        except OSError as exc:
            raise HooklineError(ErrorKind.temporary,
                                f"Tape store {self.path} cannot be looked up: {exc}") from exc
        if (status.st_dev, status.st_ino) != (self.device, self.inode):
            return "was replaced by another file"
        return None


def moved_error(path: Path, problem: str) -> HooklineError:
    """A `config` error: the store's file is no longer at its path; names the fix."""
    return HooklineError(
        ErrorKind.config,
        f"Tape store {path} {problem} while this process had it open. This process writes "
        f"nothing more to the store, so that no reply is acknowledged that the file at that "
        f"path would not hold. Fix: restart hookline, which opens the file now at {path} (or "
        f"creates a new, empty store there); put a backup in place only while hookline is "
        f"stopped.",
        {"path": str(path)},
    )


def is_damage(exc: sqlite3.DatabaseError) -> bool:
    """SQLITE_CORRUPT or SQLITE_NOTADB (any extended code): the file itself is damaged."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
    text = str(exc)
    return "malformed" in text or "not a database" in text


_TRANSIENT = ("database or disk is full", "disk i/o error", "database is locked",
              "unable to open database file")
"""SQLite's words for a failure that passes: the disk filled up or failed for a moment,
another process held the lock past the busy timeout."""


def transient_error(path: Path, exc: BaseException) -> BaseException:
    """`exc`, or for one of SQLite's passing failures a `temporary` HooklineError saying
    so (the gateway answers it 503 with `Retry-After`, never 500)."""
    if isinstance(exc, sqlite3.OperationalError) and any(
            words in str(exc).lower() for words in _TRANSIENT):
        fix = ("another process has held the store's write lock for longer than the wait "
               "(a long write, or a process suspended or stopped while it wrote): wait for "
               "it or end it" if "locked" in str(exc).lower()
               else "free disk space (or wait for the disk)")
        error = HooklineError(
            ErrorKind.temporary,
            f"Tape store {path} cannot be used now: {exc}. Nothing of this call was "
            f"written; {fix}, and try again.", {"path": str(path)})
        error.__cause__ = exc
        return error
    return exc


def damaged_error(path: Path, detail: str) -> HooklineError:
    """A `config` error naming the damaged file and what to do about it."""
    return HooklineError(
        ErrorKind.config,
        f"Tape store {path} is damaged: {detail}. hookline will not read or write it. Fix: "
        f"restore it from a backup (`hookline store backup` makes one), or move it aside with "
        f"its -wal and -shm files (`mv {path} {path}.damaged`) so that a new, empty store is "
        f"created; `hookline store check` lists the damage.",
        {"path": str(path)},
    )


def problem_lines(rows: list[tuple]) -> list[str]:
    """The lines of an integrity report, without SQLite's `*** in database ***` headers."""
    lines = [line.strip() for row in rows for line in str(row[0]).splitlines()]
    return [line for line in lines if line and not line.startswith("***")] or ["ok"]


@dataclass(frozen=True)
class StoreCheck:
    """The outcome of `check_database`: `problems` is empty when the file is sound. With
    `unreadable`, they say why it could not be read now (a full disk, an I/O error, a
    lock), which tells nothing of the file itself."""

    path: Path
    problems: list[str]
    schema_version: int | None = None
    tapes: int = 0
    entries: int = 0
    pending_runs: int = 0
    unreadable: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems


def check_database(path: str | PathLike[str]) -> StoreCheck:
    """A full `PRAGMA integrity_check` of a store file, plus what it holds; writes nothing."""
    target = Path(path).expanduser()
    if not target.is_file():
        return StoreCheck(target, [f"{target} does not exist or is not a file"])
    found = _check_opened(target, "?mode=ro")
    if found.problems and not os.access(target.parent, os.W_OK):
        # A folder this user may not write to (a read-only home): SQLite cannot make the
        # -shm file a reader needs, and nobody can be writing, so the file is read as it
        # lies.
        found = _check_opened(target, "?mode=ro&immutable=1")
    return found


def _check_opened(target: Path, options: str) -> StoreCheck:
    try:
        conn = sqlite3.connect(target.resolve().as_uri() + options, uri=True, timeout=30.0)
    except sqlite3.Error as exc:
        return StoreCheck(target, [f"cannot open {target}: {exc}"],
                          unreadable=not _damage(exc))
    try:
        problems = problem_lines(conn.execute("PRAGMA integrity_check").fetchall())
        if problems != ["ok"]:
            return StoreCheck(target, problems)
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        counts: dict[str, Any] = {}
        if _has_table(conn, "entries"):
            counts["tapes"], counts["entries"] = conn.execute(
                "SELECT COUNT(DISTINCT tape), COUNT(*) FROM entries"
            ).fetchone()
        if _has_table(conn, "journal_runs"):
            (counts["pending_runs"],) = conn.execute(
                "SELECT COUNT(*) FROM journal_runs"
            ).fetchone()
        return StoreCheck(target, [], version, **counts)
    except sqlite3.Error as exc:
        return StoreCheck(target, [str(exc)], unreadable=not _damage(exc))
    finally:
        conn.close()


_DAMAGE_CODES = frozenset({11, 26})
"""SQLITE_CORRUPT and SQLITE_NOTADB: what the file holds is wrong. Any other failure (a
full disk, an I/O error, a lock held, a file that cannot be opened) is of this moment."""


def _damage(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorcode", 11) & 0xFF in _DAMAGE_CODES


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    return conn.execute(query, (name,)).fetchone() is not None


def backup_database(source: str | PathLike[str], target: str | PathLike[str]) -> StoreCheck:
    """Copy a store file with SQLite's online backup API, then check the copy.

    Safe while other processes write to the source: the copy is one consistent snapshot
    (taken in a single step, so a concurrent write cannot restart it). The copy is written
    under a temporary name and renamed into place, so `target` is whole or absent. An
    existing `target` is refused (`invalid_input`); a missing source is `not_found`.
    """
    origin = Path(source).expanduser()
    goal = Path(target).expanduser()
    if not origin.is_file():
        raise HooklineError(ErrorKind.not_found, f"No tape store at {origin}.")
    if goal.exists():
        raise HooklineError(
            ErrorKind.invalid_input,
            f"{goal} already exists; choose a new file name or remove it first.",
        )
    partial = goal.with_name(goal.name + ".partial")
    create_private_file(partial, fresh=True)  # a backup is as private as the store
    src = sqlite3.connect(origin, timeout=30.0)
    try:
        dst = sqlite3.connect(partial)
        try:
            src.backup(dst)
            # A backup is a single file: no -wal beside it to lose when it is copied on.
            dst.execute("PRAGMA journal_mode = DELETE")
        finally:
            dst.close()
        with partial.open("rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(partial, goal)
    except sqlite3.DatabaseError as exc:
        partial.unlink(missing_ok=True)
        if is_damage(exc):
            raise damaged_error(origin, str(exc)) from exc
        raise HooklineError(ErrorKind.temporary, f"Backup of {origin} failed: {exc}") from exc
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        src.close()
    return check_database(goal)
