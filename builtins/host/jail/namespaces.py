"""Namespaces, mounts and capabilities for the sandbox helper, through ctypes.

`enter` moves the helper into new user, mount, pid, network and IPC namespaces (no root
needed where unprivileged user namespaces are allowed). `lay_out` then shapes what its
commands see: every mount read-only (so no mode, owner, time or extended attribute outside
the write set changes), the workspace and the session's private temporary folder writable
again (the other sessions' hidden), the protected paths inside them read-only (and the
folders that hold them pinned, so that none can be moved away and replaced), hidden
paths masked by an empty entry nobody may open, /dev the sandbox's own (no terminal, disk
or console of the host's), and with the network closed `/run` replaced and the sockets in
/tmp masked (no socket of the host's services stays reachable by its path).
`drop_capabilities` empties every set.

Standard library only: the helper program imports it (docs/sandbox-design.md).
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Iterable

TYPE_CHECKING = False  # not typing's: the helper imports no module it can do without
if TYPE_CHECKING:
    from typing import Final

__all__ = ["MountsUnavailable", "NamespacesUnavailable", "drop_capabilities", "enter",
           "folders_to_pin", "lay_out", "mount_proc", "pin", "protect"]

CLONE_NEWNS: Final = 0x00020000
CLONE_NEWIPC: Final = 0x08000000
CLONE_NEWUSER: Final = 0x10000000
CLONE_NEWPID: Final = 0x20000000
CLONE_NEWNET: Final = 0x40000000

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_BIND, _MS_REC, _MS_PRIVATE = 0x1000, 0x4000, 0x40000
_AT_FDCWD, _AT_EMPTY_PATH, _AT_RECURSIVE = -100, 0x1000, 0x8000
_MOUNT_ATTR_RDONLY: Final = 0x1
_OPEN_TREE_CLONE, _MOVE_MOUNT_F_EMPTY_PATH, _MOVE_MOUNT_T_EMPTY_PATH = 0x1, 0x4, 0x40
# The same numbers on every architecture (the syscall table shared since Linux 5.1).
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442

_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_CAPABILITY_VERSION_3: Final = 0x20080522

REPLACED: Final = ("/run",)
"""Folders shown empty (a fresh tmpfs, read-only) when the network is closed: host
sockets live there."""

DEVICES: Final = ("null", "zero", "full", "random", "urandom", "tty")
"""The host's devices a sandbox's own /dev shows: none holds a terminal's input or
screen, a disk or the kernel's log (`tty` is only the command's controlling terminal,
and commands have none)."""

DEVICE_LINKS: Final = (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                       ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"),
                       ("ptmx", "pts/ptmx"))

_libc = ctypes.CDLL(None, use_errno=True)


class NamespacesUnavailable(OSError):
    """This system does not let the helper make its namespaces; the message says why."""


class MountsUnavailable(OSError):
    """The namespaces were made but may not mount (Ubuntu's AppArmor default does that);
    nothing was changed."""


class _MountAttr(ctypes.Structure):
    _fields_ = (("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64))


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32))


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def enter(network: bool) -> None:
    """Unshare user, mount, pid and IPC namespaces (and network unless `network`); map
    the caller's own uid and gid. The pid namespace takes effect for children."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC
    if not network:
        flags |= CLONE_NEWNET
    if _libc.unshare(flags) != 0:
        code = ctypes.get_errno()
        raise NamespacesUnavailable(code, f"user namespaces are not allowed here "
                                          f"({os.strerror(code)})")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as file:
            file.write(text)


def _mount(source: str | None, target: str, kind: str | None, flags: int,
           data: str | None = None) -> None:
    encoded = [None if value is None else value.encode() for value in (source, target, kind, data)]
    _check(_libc.mount(*encoded[:3], ctypes.c_ulong(flags), encoded[3]), f"mount {target}")


def _set_read_only(path: str, read_only: bool, recursive: bool) -> None:
    attr = _MountAttr(_MOUNT_ATTR_RDONLY if read_only else 0,
                      0 if read_only else _MOUNT_ATTR_RDONLY, 0, 0)
    flags = _AT_RECURSIVE if recursive else 0
    _check(_libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, path.encode(), flags,
                         ctypes.byref(attr), ctypes.sizeof(attr)), f"mount_setattr {path}")


def _bind(source: str, target: str, read_only: bool) -> None:
    """Mount `source` (a path, or /proc/self/fd/N) at `target`, its own writability set."""
    _mount(source, target, None, _MS_BIND | _MS_REC)
    _set_read_only(target, read_only, recursive=True)


def lay_out(*, temporary: str, workspace: str, writable_workspace: bool,
            protected: Iterable[str], hidden: Iterable[str], service_sockets: Iterable[str],
            network: bool) -> None:
    """Shape the mount namespace (the caller is inside a new one, with its capabilities).

    Everything read-only; over the folder of every session's private temporary folder
    (`temporary`'s parent) a tmpfs showing only this one's, writable; the workspace
    writable again unless read-only, its `protected` paths read-only; `hidden` paths masked
    by an entry of mode 000 that nobody may open; /dev the sandbox's own; with the network
    closed, /run replaced and the sockets in the system's temporary folder masked too, and
    the `service_sockets` folders (container engines', the home folder's too) masked like
    hidden paths."""
    private_root = os.path.dirname(temporary)
    kept: list[int] = []

    def keep(path: str) -> str:
        kept.append(os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW))
        return f"/proc/self/fd/{kept[-1]}"

    try:
        own, work = keep(temporary), keep(workspace)
        devices = {name: keep(f"/dev/{name}") for name in DEVICES
                   if _is_device(f"/dev/{name}")}
        guarded = [(path, keep(path)) for path in protected if os.path.lexists(path)]
        roots = dict.fromkeys(("/tmp", os.path.dirname(private_root)))  # TMPDIR may differ
        sockets = [] if network else [
            *_socket_places(roots, workspace, private_root),
            *(place for place in service_sockets  # also in a workspace that holds the home
              if not any(_holds(place, kept) for kept in (workspace, private_root)))]
        try:
            _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
        except OSError as exc:
            raise MountsUnavailable(exc.errno, f"the namespaces may not mount ({exc})") from None
        _set_read_only("/", True, recursive=True)
        _private_dev(devices)
        for place in (private_root, workspace):  # in /dev/shm, they were left behind
            os.makedirs(place, exist_ok=True)
        # The sessions' folder shows this one's only, beside the masks: an empty folder
        # and an empty file of mode 000.
        _mount("tmpfs", private_root, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=16k,mode=0700")
        os.mkdir(f"{private_root}/.mask", 0)
        os.close(os.open(f"{private_root}/.mask-file", os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC,
                         0))
        masks = {True: keep(f"{private_root}/.mask"), False: keep(f"{private_root}/.mask-file")}
        os.mkdir(temporary, 0o700)  # in the fresh tmpfs: where this session's folder goes
        _bind(own, temporary, read_only=False)
        _set_read_only(private_root, True, recursive=False)
        if not network:
            for replaced in REPLACED:
                if os.path.isdir(replaced) and not os.path.islink(replaced):
                    _mount("tmpfs", replaced, "tmpfs", _MS_NOSUID | _MS_NODEV,
                           "size=64m,mode=1777")
        _bind(work, workspace, read_only=not writable_workspace)
        for folder in folders_to_pin(workspace, [path for path, _ in guarded]):
            pin(folder)
        for path, source in guarded:
            _bind(source, path, read_only=True)
        for path in [*hidden, *sockets]:
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if not stat.S_ISLNK(mode):  # hidden paths are resolved: a link is its own entry
                _bind(masks[stat.S_ISDIR(mode)], path, read_only=True)
        if not network and os.path.isdir("/run"):
            _set_read_only("/run", True, recursive=False)
    finally:
        for fd in kept:
            os.close(fd)


def protect(path: str) -> None:
    """Make `path` read-only from now on, for every process of the mount namespace (the
    caller is in it, with its capabilities, and the mounts are laid out). The entry opened
    is the one mounted over: a link a command swapped in meanwhile is refused, never
    followed."""
    _mount_over_itself(path, read_only=True)


def pin(folder: str) -> None:
    """Mount `folder` over itself as it is, submounts included: a mount point cannot be
    renamed or removed, so what lies in it stays at its path. Else a command could move a
    protected repository away with the folder that holds it and put a copy of its own, with
    hooks, at its path."""
    _mount_over_itself(folder, read_only=False)


def folders_to_pin(workspace: str, paths: Iterable[str]) -> list[str]:
    """The folders between `workspace` and each of `paths` that lies in it (neither end
    included), outermost first: pinned in that order, each pin holds the ones before."""
    inside = workspace.rstrip("/") + "/"
    found: dict[str, None] = {}
    for path in paths:
        parent = os.path.dirname(path)
        while parent.startswith(inside):
            found[parent] = None
            parent = os.path.dirname(parent)
    return sorted(found, key=lambda folder: folder.count("/"))


def _mount_over_itself(path: str, read_only: bool) -> None:
    entry = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if stat.S_ISLNK(os.fstat(entry).st_mode):
            raise OSError(errno.ELOOP, f"{path} is a link now, not what was found")
        tree = _libc.syscall(_SYS_OPEN_TREE, entry, b"", _OPEN_TREE_CLONE | os.O_CLOEXEC
                             | _AT_RECURSIVE | _AT_EMPTY_PATH)
        if tree < 0:
            _check(tree, f"open_tree {path}")
        try:
            if read_only:
                attr = _MountAttr(_MOUNT_ATTR_RDONLY, 0, 0, 0)
                _check(_libc.syscall(_SYS_MOUNT_SETATTR, tree, b"",
                                     _AT_EMPTY_PATH | _AT_RECURSIVE, ctypes.byref(attr),
                                     ctypes.sizeof(attr)), f"mount_setattr {path}")
            _check(_libc.syscall(_SYS_MOVE_MOUNT, tree, b"", entry, b"",
                                 _MOVE_MOUNT_F_EMPTY_PATH | _MOVE_MOUNT_T_EMPTY_PATH),
                   f"move_mount {path}")
        finally:
            os.close(tree)
    finally:
        os.close(entry)


def _private_dev(devices: dict[str, str]) -> None:
    """/dev as the sandbox's own: the harmless `devices` (name: a path to bind), the
    usual links, its own shared memory and its own pseudo-terminals. The host's /dev/pts
    would let a command read what you type into your terminal, its consoles and `vcs`
    what they show, as root."""
    _mount("tmpfs", "/dev", "tmpfs", _MS_NOSUID | _MS_NOEXEC, "size=64k,mode=0755")
    for name, source in devices.items():
        os.close(os.open(f"/dev/{name}", os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o666))
        _bind(source, f"/dev/{name}", read_only=False)
    for name, target in DEVICE_LINKS:
        os.symlink(target, f"/dev/{name}")
    os.mkdir("/dev/shm")
    _mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, "size=64m,mode=1777")
    os.mkdir("/dev/pts")
    try:
        _mount("devpts", "/dev/pts", "devpts", _MS_NOSUID | _MS_NOEXEC,
               "newinstance,ptmxmode=0666,mode=0620")
    except OSError:  # a system that refuses a devpts of the sandbox's own: no ptys
        os.unlink("/dev/ptmx")
    _set_read_only("/dev", True, recursive=False)


def _is_device(path: str) -> bool:
    """A character device itself (not a link to one, which a bind would not take)."""
    try:
        return stat.S_ISCHR(os.lstat(path).st_mode)
    except OSError:
        return False


def _socket_places(roots: Iterable[str], workspace: str, private_root: str) -> list[str]:
    """What to mask so that no path-named socket in `roots` (the system's temporary
    folder: ssh-agent, tmux and X11 keep theirs there) can be reached: a socket right in a
    root, else the folder that holds it (which also covers the ones made there later).
    Never the workspace or a place that holds it or the sessions' temporary folders
    (`private_root`), nor one in those: a folder holding either is looked into instead,
    so the sockets beside a workspace in /tmp are masked too; when the workspace holds a
    root (it is /tmp), the sockets in that root are masked as in any other."""
    places: dict[str, None] = {}
    folders = list(roots)
    while folders:
        try:
            entries = list(os.scandir(folders.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.path == workspace or _holds(private_root, entry.path):
                continue
            if _holds(entry.path, workspace) or _holds(entry.path, private_root):
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                continue
            try:
                if _is_socket(entry) or (entry.is_dir(follow_symlinks=False)
                                         and _holds_a_socket(entry.path)):
                    places[entry.path] = None
            except OSError:
                continue
    return list(places)


def _is_socket(entry: os.DirEntry[str]) -> bool:
    """Asks the file system only what the folder's listing does not say: a busy /tmp
    holds a hundred thousand files, and the first command of a session waits for this."""
    if (entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False)
            or entry.is_symlink()):
        return False
    return stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode)


def _holds_a_socket(folder: str) -> bool:
    with os.scandir(folder) as entries:
        return any(_is_socket(entry) for entry in entries)


def _holds(folder: str, path: str) -> bool:
    """`path` is `folder` or lies in it (masking `folder` would hide it)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def mount_proc() -> None:
    """A /proc of this pid namespace: the host's processes are not in it. The kernel's
    settings in it stay read-only: the host's root may write `/proc/sys` without any
    capability (`kernel.core_pattern` runs a program as root outside every namespace) and
    `/proc/sysrq-trigger`; `/proc/keys` and `/proc/key-users`, which list the names of the
    user's keys, read as empty."""
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    for path in ("/proc/sys", "/proc/sysrq-trigger"):
        if os.path.exists(path):
            _bind(path, path, read_only=True)
    for path in ("/proc/keys", "/proc/key-users"):
        if os.path.exists(path):
            _bind("/dev/null", path, read_only=True)


def drop_capabilities() -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable sets; raises when
    a capability is left, so nothing runs with one."""
    with open("/proc/sys/kernel/cap_last_cap") as file:
        last = int(file.read())
    for capability in range(last + 1):
        _libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)  # refused without CAP_SETPCAP
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")
    with open("/proc/self/status") as file:
        sets = dict(line.split(":", 1) for line in file if line.startswith("Cap"))
    left = [name for name in ("CapEff", "CapPrm", "CapInh", "CapAmb") if int(sets[name], 16)]
    if left:
        raise OSError(f"capabilities could not be dropped ({', '.join(left)} not empty)")
