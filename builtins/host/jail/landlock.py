"""Linux Landlock through ctypes: probe the ABI, build a ruleset, confine the caller.

Landlock lets an unprivileged process give up rights for itself and the processes it
starts later. The sandbox helper (`jail/__main__.py`) builds its ruleset (`build`) and
applies it to itself (`Ruleset.confine`) before it starts any command; hookline itself is
never confined. Standard library only: the helper imports it as a program.

Why not the `landlock` package from the index: it is a pre-release (1.0.0.dev5) and the
three system calls plus their structures fit in this module, which also covers the network
rules and scopes that confinement needs. See docs/security.md, "The sandboxed shell".
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
from collections.abc import Callable

TYPE_CHECKING = False  # not typing's: the helper imports no module it can do without
if TYPE_CHECKING:
    from typing import Final

__all__ = [
    "FS_DIRECTORY_ONLY",
    "FS_READ",
    "FS_WRITE",
    "WRITABLE_DEVICES",
    "LandlockUnavailable",
    "Ruleset",
    "abi_version",
    "build",
    "inside",
]

# System call numbers: the same on every architecture (they came after the tables merged).
_SYS_CREATE_RULESET: Final = 444
_SYS_ADD_RULE: Final = 445
_SYS_RESTRICT_SELF: Final = 446
_CREATE_RULESET_VERSION: Final = 1
_RULE_PATH_BENEATH: Final = 1
_PR_SET_NO_NEW_PRIVS: Final = 38

EXECUTE: Final = 1 << 0
WRITE_FILE: Final = 1 << 1
READ_FILE: Final = 1 << 2
READ_DIR: Final = 1 << 3
REMOVE_DIR: Final = 1 << 4
REMOVE_FILE: Final = 1 << 5
MAKE_CHAR: Final = 1 << 6
MAKE_DIR: Final = 1 << 7
MAKE_REG: Final = 1 << 8
MAKE_SOCK: Final = 1 << 9
MAKE_FIFO: Final = 1 << 10
MAKE_BLOCK: Final = 1 << 11
MAKE_SYM: Final = 1 << 12
REFER: Final = 1 << 13  # ABI 2
TRUNCATE: Final = 1 << 14  # ABI 3

NET_BIND_TCP: Final = 1 << 0  # ABI 4
NET_CONNECT_TCP: Final = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET: Final = 1 << 0  # ABI 6
SCOPE_SIGNAL: Final = 1 << 1

FS_READ: Final = EXECUTE | READ_FILE | READ_DIR
"""Reading files and folders, and running programs."""
FS_WRITE: Final = (
    WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK
    | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM | REFER | TRUNCATE
)
"""Every change to a file hierarchy that Landlock can refuse (up to ABI 3)."""
FS_DIRECTORY_ONLY: Final = (
    READ_DIR | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK
    | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM | REFER
)
"""Rights that only a folder rule can grant (the kernel refuses them on a file)."""

_FS_BY_ABI: Final = {1: (1 << 13) - 1, 2: (1 << 14) - 1}
"""Filesystem rights each early ABI knows; ABI 3 and later know all of the above."""

WRITABLE_DEVICES: Final = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
"""Devices a sandboxed command may write: discarding output must keep working."""


class LandlockUnavailable(OSError):
    """Landlock cannot confine processes here; the message says why."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


_libc: ctypes.CDLL | None = None


def _syscall() -> Callable[..., int]:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    function: Callable[..., int] = _libc.syscall
    return function


def abi_version() -> int:
    """The kernel's Landlock ABI version; raises `LandlockUnavailable` with the reason."""
    if not sys.platform.startswith("linux"):
        raise LandlockUnavailable(f"Landlock is a Linux feature; this system is {sys.platform}")
    version = _syscall()(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                         ctypes.c_uint32(_CREATE_RULESET_VERSION))
    if version < 0:
        code = ctypes.get_errno()
        reason = {
            errno.ENOSYS: "this kernel was built without Landlock",
            errno.EOPNOTSUPP: "Landlock is built in but not enabled at boot (lsm=)",
            errno.EPERM: "a seccomp filter (a container runtime) forbids Landlock",
        }.get(code, os.strerror(code))
        raise LandlockUnavailable(f"Landlock is not available: {reason}")
    return int(version)


class Ruleset:
    """A Landlock ruleset held open in this process, applied to children by `confine`.

    Rights not "handled" by the ruleset stay allowed; handled ones are refused except where
    a rule grants them. The descriptor is closed by `close()` (or when the object is
    collected); children get their own copy of the policy, not of the descriptor.
    """

    def __init__(self, abi: int, *, fs: int, net: int = 0, scoped: int = 0) -> None:
        self.abi = abi
        self.fs_known = _FS_BY_ABI.get(abi, FS_READ | FS_WRITE)
        attr = _RulesetAttr(fs & self.fs_known, net if abi >= 4 else 0,
                            scoped if abi >= 6 else 0)
        # Older kernels know a shorter structure: pass only the fields they read.
        size = ctypes.sizeof(attr) if abi >= 6 else 16 if abi >= 4 else 8
        fd = _syscall()(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                        ctypes.c_uint32(0))
        if fd < 0:
            code = ctypes.get_errno()
            raise LandlockUnavailable(f"could not create a Landlock ruleset: {os.strerror(code)}")
        self.fd: int | None = int(fd)

    def allow(self, path: str, access: int) -> bool:
        """Grant `access` beneath `path` (a folder) or on it (a file); False when `path`
        is gone. Rights a file cannot carry are dropped for a file."""
        if self.fd is None:
            raise ValueError("the ruleset is closed")
        try:
            target = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            if not stat.S_ISDIR(os.fstat(target).st_mode):
                access &= ~FS_DIRECTORY_ONLY
            rule = _PathBeneathAttr(access & self.fs_known, target)
            result = _syscall()(_SYS_ADD_RULE, self.fd, _RULE_PATH_BENEATH,
                                ctypes.byref(rule), ctypes.c_uint32(0))
            if result < 0:
                code = ctypes.get_errno()
                raise OSError(code, f"could not add a Landlock rule for {path}: "
                                    f"{os.strerror(code)}")
        finally:
            os.close(target)
        return True

    def confine(self) -> None:
        """Restrict the calling thread (and what it starts) to the ruleset, for good.
        Raises when the kernel refuses, so nothing runs unconfined by mistake."""
        call = _syscall()
        if _libc is None or _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "could not set no_new_privs")
        if self.fd is None or call(_SYS_RESTRICT_SELF, self.fd, ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __del__(self) -> None:
        self.close()


def build(*, workspace: str | None, temporary: str, extra_writable: list[str],
          hidden: list[str], network: bool, watched: list[tuple[str, int]]) -> Ruleset:
    """The sandbox's ruleset: read everything but `hidden`, write the workspace (None: read
    only), the temporary folder, `extra_writable` and the harmless devices; no TCP unless
    `network`; no signal or abstract socket outside the domain. `watched` receives the
    folders listed to go around hidden paths, with their mtimes (a new entry needs a rule)."""
    abi = abi_version()
    ruleset = Ruleset(abi, fs=FS_READ | FS_WRITE,
                      net=0 if network else NET_BIND_TCP | NET_CONNECT_TCP,
                      scoped=SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET)
    try:
        # Listing folders stays possible everywhere (names, as `stat` shows them anyway);
        # reading, running and writing files only where granted below.
        ruleset.allow("/", READ_DIR)
        _grant_except(ruleset, "/", FS_READ, hidden, watched)
        if workspace is not None:
            _grant_except(ruleset, workspace, FS_READ | FS_WRITE, hidden, watched)
        for path in (temporary, *extra_writable):
            ruleset.allow(path, FS_READ | FS_WRITE)
        for device in WRITABLE_DEVICES:
            ruleset.allow(device, FS_READ | WRITE_FILE | TRUNCATE)
    except BaseException:
        ruleset.close()
        raise
    return ruleset


def inside(path: str, root: str) -> bool:
    """Whether `path` is `root` or lies beneath it (both absolute and resolved)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def _grant_except(ruleset: Ruleset, root: str, access: int, hidden: list[str],
                  watched: list[tuple[str, int]]) -> None:
    """Grant `access` beneath `root` except beneath the hidden paths: a folder that holds
    one is not granted itself; each of its other entries is, recursively."""
    inner = [path for path in hidden if inside(path, root)]
    if not inner:
        ruleset.allow(root, access)
        return
    if root in inner:
        return
    try:
        watched.append((root, os.stat(root).st_mtime_ns))
        with os.scandir(root) as entries:
            for entry in entries:
                if not entry.is_symlink():  # a link's target is granted through its own path
                    _grant_except(ruleset, entry.path, access, hidden, watched)
    except (FileNotFoundError, NotADirectoryError):
        pass
