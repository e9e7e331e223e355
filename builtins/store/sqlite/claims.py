"""Claims on request keys between the processes that share one SQLite store.

Two gateways on one home, or a gateway restarted beside the old one still draining, each
take requests with an `Idempotency-Key`: the one that claims the key runs the request,
and a retry sent to the other waits for what it came to instead of running it again.
A claim is an exclusive `flock` on a file of `<database>-claims`, named by a hash of the
tape and the key, held until the request ends: it lapses with its process, killed or not,
as a PostgreSQL store's claims lapse with their connection.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from contextlib import suppress
from pathlib import Path

from ...privacy.files import make_private_dir

__all__ = ["KeyClaims"]


class KeyClaims:
    """The keys this process holds the claim of, by their file."""

    def __init__(self, database: Path) -> None:
        self.folder = database.with_name(database.name + "-claims")
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()
        self._swept = False

    def claim(self, tape: str, key: str) -> bool:
        """Claim the key of `tape`: True when this process holds it now; False while
        another process does, or this one does already (for a request of the key not
        ended yet, queued behind another turn, say)."""
        name = self._name(tape, key)
        with self._lock:
            if name in self._held:
                return False
            make_private_dir(self.folder)
            if not self._swept:
                self._swept = True
                self._remove_lapsed()
            path = self.folder / name
            while True:
                fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    return False
                # Its holder may have removed the file as this one opened it: a lock on
                # a file no longer at the path claims nothing.
                try:
                    same = os.path.samestat(os.fstat(fd), os.stat(path))
                except FileNotFoundError:
                    same = False
                if same:
                    self._held[name] = fd
                    return True
                os.close(fd)

    def release(self, tape: str, key: str) -> None:
        """Let go of the key's claim (its request ended); nothing if not held here."""
        name = self._name(tape, key)
        with self._lock:
            fd = self._held.pop(name, None)
            if fd is None:
                return
            with suppress(OSError):
                os.unlink(self.folder / name)  # while locked: no one holds it meanwhile
            os.close(fd)

    def _remove_lapsed(self) -> None:
        """Remove the files of claims that lapsed with their process (a killed gateway's):
        each that no one holds, taken first so that no one takes it meanwhile."""
        with suppress(OSError), os.scandir(self.folder) as entries:
            for entry in entries:
                try:
                    fd = os.open(entry.path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
                except OSError:
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    # Still the file at the path: not one released, removed and made
                    # anew (and claimed) by others meanwhile.
                    if os.path.samestat(os.fstat(fd), os.stat(entry.path)):
                        os.unlink(entry.path)
                except OSError:
                    pass  # held: a live claim
                finally:
                    os.close(fd)

    def close(self) -> None:
        with self._lock:
            held, self._held = self._held, {}
        for name, fd in held.items():
            with suppress(OSError):
                os.unlink(self.folder / name)
            os.close(fd)

    @staticmethod
    def _name(tape: str, key: str) -> str:
        return hashlib.sha256(f"{tape}\0{key}".encode()).hexdigest()
