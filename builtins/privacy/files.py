"""What hookline keeps from the other users of the machine.

The hookline home and every file hookline writes that holds conversation data or a
secret (the SQLite tape store with its -wal and -shm, backups and copies of it, tape
archives, process records, the folders' current sessions, the chat history, the config
file) are private to their owner from the first byte, whatever the umask: directories
0700 (`make_private_dir`), files 0600 (`create_private_file`, `write_private_file`).

What an older hookline (or a `cp`) left readable is tightened when hookline starts
(`secure_home`, `secure_store`): one warning line names each path whose mode changed. A
path that cannot be tightened, because another user owns it or `chmod` fails, is refused
with an error naming it and the fix: hookline does not write conversations where others
can read them.

A config file that holds a secret and that group or others can read is refused
(`shared_secret_problem`), as libpq refuses such a `.pgpass` and OpenSSH such a key.

`process_umask` reads the umask without changing it, for the file tools, which create the
user's files as any other program would (mode 0666 masked by the umask).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, Final

from hookline.kernel._identity import ENV_PREFIX
from hookline.kernel.errors import ErrorKind, HooklineError

__all__ = [
    "HOME_ENV",
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "create_private_file",
    "make_private_dir",
    "process_umask",
    "replacing_private_file",
    "secure_home",
    "secure_store",
    "shared_secret_problem",
    "tighten",
    "write_private_file",
]

logger = logging.getLogger(__name__)

HOME_ENV = ENV_PREFIX + "HOME"
"""The variable naming the hookline home (default `~/.hookline`), the folder kept private."""
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
_SHARED = 0o077
"""The group and other permission bits: none of them may be set on a private path."""

SQLITE_SIDE_FILES = ("-wal", "-shm")
"""SQLite's files beside a WAL database; they hold recent writes, so they are as private."""


def make_private_dir(path: str | os.PathLike[str]) -> Path:
    """Create the directory, and every missing parent, with mode 0700 (`mkdir -p` would
    give the parents the umask's mode: `<home>/processes` made first would leave the home
    open); an existing one is left as it is (`tighten` is for that)."""
    folder = Path(path)
    missing = []
    for candidate in (folder, *folder.parents):
        if candidate.is_dir():
            break
        missing.append(candidate)
    for candidate in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            candidate.mkdir(mode=PRIVATE_DIR_MODE)
    if not folder.is_dir():
        folder.mkdir()  # a file in the way: raise what mkdir says about it
    return folder


def create_private_file(path: str | os.PathLike[str], *, fresh: bool = False) -> None:
    """Create an empty file with mode 0600 unless one exists (`fresh`: remove it first).

    For files another library then opens: SQLite gives a new database the mode 0644
    masked by the umask, and its -wal and -shm the database file's mode, so a database
    file made 0600 here keeps all three private."""
    target = Path(path)
    make_private_dir(target.parent)
    if fresh:
        target.unlink(missing_ok=True)
    with contextlib.suppress(FileExistsError):  # it exists, or another process made it
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | getattr(os, "O_CLOEXEC", 0), PRIVATE_FILE_MODE))


def write_private_file(path: str | os.PathLike[str], data: str | bytes, *,
                       durable: bool = True) -> None:
    """Replace the file with `data` (text as UTF-8), mode 0600, all or nothing
    (`replacing_private_file`)."""
    with replacing_private_file(path, durable=durable) as handle:
        handle.write(data.encode("utf-8") if isinstance(data, str) else data)


@contextlib.contextmanager
def replacing_private_file(path: str | os.PathLike[str], *,
                           durable: bool = True) -> Iterator[BinaryIO]:
    """A file to write that replaces `path`, mode 0600, all or nothing, when the block
    ends without an exception: for data written a piece at a time.

    Written under a temporary name in the same folder (0600 from its creation), flushed
    (and fsynced when `durable`), then renamed over the name: a failure leaves the old
    file as it was, never a half-written one, and no reader ever sees other modes."""
    target = Path(path)
    make_private_dir(target.parent)
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                     dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def tighten(path: str | os.PathLike[str], what: str, folder: bool = False) -> bool:
    """Take the group and other permissions off an existing `path`, a folder where
    `folder` says so and a regular file otherwise (one warning line naming it); False when
    there is no such path or it was private already.

    Refused with a `config` error naming the path and the fix when it is of another kind
    (a device, say: `/dev/null`), a folder other users may write in (`/tmp`), or belongs to
    another user (its owner decides who reads it), or when `chmod` fails: none of them is
    hookline's to change, even as root."""
    target = Path(path)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        return False
    place = f"set {HOME_ENV} (or tape_store) to a place of your own"
    if stat.S_ISDIR(info.st_mode) != folder or not (folder or stat.S_ISREG(info.st_mode)):
        raise HooklineError(
            ErrorKind.config,
            f"{what} {target} is {_kind(info.st_mode)}, not {'a folder' if folder else 'a file'}"
            f": {place}", {"path": str(target)})
    mode = stat.S_IMODE(info.st_mode)
    if folder and mode & (stat.S_ISVTX | stat.S_IWOTH):
        raise HooklineError(
            ErrorKind.config,
            f"{what} {target} is a folder other users may write in (mode {mode:04o}), shared "
            f"with them, and hookline keeps conversations and secrets private: {place}",
            {"path": str(target), "mode": f"{mode:04o}"})
    if not mode & _SHARED:
        return False
    private = mode & ~_SHARED
    shown = shlex.quote(str(target))
    fix = f"run `chmod {private:o} {shown}` as its owner, or {place}"
    if folder and not _holds_a_home(target):
        raise HooklineError(
            ErrorKind.config,
            f"{what} {target} can be read by other users (mode {mode:04o}) and holds files "
            f"that are not hookline's, so hookline will not make it private: set {HOME_ENV} "
            f"to a folder of its own (a new one is made private), or run `chmod "
            f"{private:o} {shown}` yourself", {"path": str(target), "mode": f"{mode:04o}"})
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        raise HooklineError(
            ErrorKind.config,
            f"{what} {target} can be read by other users (mode {mode:04o}) and belongs to "
            f"another user (uid {info.st_uid}), so hookline cannot make it private: {fix}",
            {"path": str(target), "mode": f"{mode:04o}"})
    try:
        os.chmod(target, private)
    except OSError as exc:
        raise HooklineError(
            ErrorKind.config,
            f"{what} {target} can be read by other users (mode {mode:04o}) and hookline "
            f"cannot make it private ({exc.strerror or exc}): {fix}",
            {"path": str(target), "mode": f"{mode:04o}"}) from exc
    logger.warning("%s %s could be read by other users (mode %04o); it is now private to "
                   "its owner (mode %04o)", what, target, mode, private)
    return True


def _kind(mode: int) -> str:
    """What a file of this mode is, in words."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a file"


HOME_MARKS: Final = frozenset({"tapes.db", "http_token", "processes", "config.toml"})
"""Entries a hookline home holds (the default tape store, the gateway's token, the process
records, the config file, which a newcomer may write into a folder made by hand): an
existing folder others can read is made private only when it is empty or holds one of
them, so that `HOOKLINE_HOME=/srv` is refused rather than closed to every other user."""


def secure_home(home: str | os.PathLike[str]) -> Path:
    """The hookline home, created 0700, or tightened to its owner when it exists; refused
    with the fix when it cannot be made or written (hookline writes there even to read
    its tapes: a store opens in WAL mode and finishes interrupted runs)."""
    folder = Path(home)
    fix = f"make it writable, or set {HOME_ENV} to a folder you can write in"
    try:
        if not tighten(folder, "the hookline home", folder=True):
            make_private_dir(folder)
    except OSError as exc:
        raise HooklineError(
            ErrorKind.config, f"the hookline home {folder} cannot be made "
                              f"({exc.strerror or exc}): {fix}", {"path": str(folder)}) from exc
    if not os.access(folder, os.W_OK | os.X_OK):
        raise HooklineError(
            ErrorKind.config, f"the hookline home {folder} cannot be written "
                              f"({_why_not_writable(folder)}), and hookline writes there even "
                              f"to read its sessions: {fix}", {"path": str(folder)})
    return folder


def _holds_a_home(folder: Path) -> bool:
    """Whether `folder` is empty or holds one of `HOME_MARKS`: a hookline home, not a
    folder of other things (`/srv`) that making private would close to everyone."""
    with os.scandir(folder) as entries:
        names = {entry.name for entry in entries}
    return not names or bool(names & HOME_MARKS)


def _why_not_writable(folder: Path) -> str:
    try:
        probe = tempfile.mkstemp(dir=folder)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(probe[0])
    os.unlink(probe[1])
    return "permission denied"


def secure_store(database: str | os.PathLike[str]) -> None:
    """Before SQLite opens a tape store: tighten the file and its -wal and -shm when they
    exist, else create the database file 0600 (in a 0700 folder when that is new)."""
    target = Path(database)
    if _holds_other_data(target):  # a mistyped tape_store: SQLite refuses it, unchanged
        return
    for suffix in ("", *SQLITE_SIDE_FILES):
        tighten(target.with_name(target.name + suffix), "the tape store")
    create_private_file(target)


_SQLITE_HEADER = b"SQLite format 3\0"


def _holds_other_data(target: Path) -> bool:
    """Whether the file is there, not empty, and no SQLite database (a mistyped
    `tape_store` naming someone's notes): its mode is not hookline's to change."""
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False  # missing, a link, unreadable: the checks that follow say what
    try:
        info = os.fstat(fd)
        head = os.read(fd, len(_SQLITE_HEADER)) if stat.S_ISREG(info.st_mode) else b""
    finally:
        os.close(fd)
    return bool(head) and head != _SQLITE_HEADER


# -- secrets in the config file ------------------------------------------------------------


def _url_password(value: Any) -> bool:
    """Whether a postgresql:// URL carries a password (user info, or a password-like
    query key), by the rules the redaction of such URLs uses."""
    if not isinstance(value, str) or "://" not in value:
        return False
    from .redact import url_secrets

    return bool(url_secrets(value))


def shared_secret_problem(path: Path, mode: int, data: Mapping[str, Any]) -> str | None:
    """Why a config file whose permission bits are `mode` must be refused, or None.

    It must be when it holds a secret (`api_key`, `http_token`, a `tape_store` URL with a
    password, an MCP server's `headers`, which carry its token, its `env`, how a server is
    given its key, or its URL's password) and group or others may read it: the message
    names the file and the fix."""
    if not mode & 0o044:
        return None
    held = [key for key in ("api_key", "http_token")
            if isinstance(data.get(key), str) and data[key].strip()]
    if _url_password(data.get("tape_store")):
        held.append("a tape_store URL with a password")
    servers = data.get("mcp_servers")
    for name, server in (servers.items() if isinstance(servers, dict) else ()):
        if isinstance(server, dict) and (server.get("headers") or server.get("env")
                                         or _url_password(server.get("url"))):
            held.append(f"the headers, env or URL password of [mcp_servers.{name}]")
    if not held:
        return None
    return (f"The config file {path} holds {' and '.join(held)} and other users can read it "
            f"(mode {stat.S_IMODE(mode):04o}); run `chmod 600 {shlex.quote(str(path))}`.")


# -- the umask -----------------------------------------------------------------------------


def process_umask() -> int:
    """The process's umask, without changing it where the system says it (Linux 4.7+:
    `Umask:` in /proc/self/status); elsewhere set and restored at once, which a thread
    creating a file at that very moment could see."""
    with contextlib.suppress(OSError, ValueError), \
            open("/proc/self/status", encoding="ascii", errors="replace") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split(":", 1)[1].strip(), 8)
    mask = os.umask(0o077)
    os.umask(mask)
    return mask
