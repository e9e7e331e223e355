"""A seccomp filter for sandboxed commands, assembled as classic BPF through ctypes.

Landlock confines files and TCP; it leaves out the calls that reach other processes or the
kernel's wider surface (`ptrace`, `process_vm_*`, `pidfd_getfd`, `io_uring`, `bpf`, new
namespaces and mounts) and every socket family but TCP, and a mode with a set-ID bit. This
filter refuses those with EPERM, so a command sees "Operation not permitted". With the
network closed only AF_UNIX sockets may be made; with it open, AF_UNIX, AF_INET and
AF_INET6 (no netlink, no packet sockets). A `clone` that asks for a new namespace is
refused; `clone3` answers ENOSYS, which makes the C library fall back to `clone`, whose
flags the filter can read.

Standard library only: the sandbox helper (`jail/__main__.py`) imports it as a program.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Sequence

TYPE_CHECKING = False  # not typing's: the helper imports no module it can do without
if TYPE_CHECKING:
    from typing import Final

__all__ = ["SeccompUnavailable", "install", "program"]

_AUDIT_ARCH: Final = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
"""The architecture word seccomp reports, per `os.uname().machine`."""

_X32_BIT: Final = 0x40000000

# System call numbers: x86_64, then the generic table that aarch64 uses.
_CALLS: Final[dict[str, tuple[int, int | None]]] = {  # docs/security.md names each
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "process_madvise": (440, 440),
    "pidfd_getfd": (438, 438),
    "kcmp": (312, 272),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "open_tree_attr": (467, 467),
    "unshare": (272, 97),
    "setns": (308, 268),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "syslog": (103, 116),
    "acct": (163, 89),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "quotactl": (179, 60),
    "iopl": (172, None),  # x86 only
    "ioperm": (173, None),
    "uselib": (134, None),
}
_IPC_CALLS: Final[dict[str, tuple[int, int]]] = {
    "shmget": (29, 194), "shmat": (30, 196), "shmctl": (31, 195),
    "semget": (64, 190), "semop": (65, 193), "semtimedop": (220, 192), "semctl": (66, 191),
    "msgget": (68, 186), "msgsnd": (69, 189), "msgrcv": (70, 188), "msgctl": (71, 187),
    "mq_open": (240, 180), "mq_unlink": (241, 181),
}
"""System V IPC and POSIX message queues: without an IPC namespace of its own a command
would reach the host's objects by key, id (listed in /proc/sysvipc) or name, an X
server's shared images among them. Refused there (`ipc=False`); `shmdt` and the calls on
a queue already open reach nothing more."""
_CLONE: Final = (56, 220)
_CLONE3: Final = (435, 435)
_SOCKET: Final = (41, 198)
_SOCKETPAIR: Final = (53, 199)
_IOCTL: Final = (16, 29)
_FCNTL: Final = (72, 25)
_SIGNALLING: Final = ((62, 129), (200, 130), (234, 131), (129, 138), (297, 240), (434, 434))
"""kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo, pidfd_open: their first
argument names the process (or, negative, its group)."""
_PIDFD_SEND_SIGNAL: Final = (424, 424)
"""Signals through a pidfd, which `open("/proc/<pid>")` makes too: with guarded processes
refused whole, since its first argument is a descriptor, not a pid."""
_SET_OWNER: Final = (8, 15)
"""fcntl's F_SETOWN and F_SETOWN_EX: the process a descriptor's I/O signals go to (with
F_SETSIG, any signal, SIGKILL too); with guarded processes refused."""

_SET_ID_BITS: Final = 0o6000
"""S_ISUID and S_ISGID. A file a command marks so lends its owner's rights to whoever runs
it later, outside the sandbox: root's (to any local user) where hookline runs as root,
yours to other users otherwise. No mode a command gives may carry them."""
_MODE_SETTERS: Final[dict[str, tuple[tuple[int, int | None], int]]] = {
    # name: ((x86_64, aarch64) numbers, the mode's argument)
    "chmod": ((90, None), 1), "fchmod": ((91, 52), 1), "fchmodat": ((268, 53), 2),
    "fchmodat2": ((452, 452), 2), "creat": ((85, None), 1), "mknod": ((133, None), 1),
    "mknodat": ((259, 33), 2),
}
_OPENS: Final[dict[str, tuple[tuple[int, int | None], int]]] = {
    "open": ((2, None), 1), "openat": ((257, 56), 2)}
"""Calls whose mode counts only with O_CREAT or O_TMPFILE among their flags (the flags'
argument, the mode's is the next): otherwise it is whatever the register held."""
_MAKES_A_FILE: Final = 0o100 | 0o20000000
"""O_CREAT and O_TMPFILE's own bit, the same on x86_64 and aarch64."""
_OPENAT2: Final = (437, 437)
"""openat2 keeps its mode in a structure a filter cannot read: ENOSYS, so a program falls
back to openat, as on a kernel before 5.6."""

_NAMESPACE_FLAGS: Final = (0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
                           | 0x20000000 | 0x40000000 | 0x00000080)
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME."""

_AF_UNIX, _AF_INET, _AF_INET6 = 1, 2, 10
_REFUSED_IOCTLS: Final = (0x5412, 0x8901, 0x8902)
"""TIOCSTI pushes characters into a terminal's input (refused, so nothing types into the
user's shell once hookline exits); FIOSETOWN and SIOCSPGRP set a socket's signal owner,
as F_SETOWN does."""

# Classic BPF and seccomp constants.
_LD_W_ABS, _JEQ_K, _JSET_K, _JA, _RET_K = 0x20, 0x15, 0x45, 0x05, 0x06
_RET_ALLOW: Final = 0x7FFF0000
_RET_KILL_PROCESS: Final = 0x80000000
_RET_ERRNO: Final = 0x00050000
_OFFSET_NR, _OFFSET_ARCH, _OFFSET_ARG0, _OFFSET_ARG1 = 0, 4, 16, 24  # little endian: low word
_ARGUMENT_BYTES: Final = 8
_SECCOMP_SET_MODE_FILTER: Final = 1
_SYS_SECCOMP: Final = {"x86_64": 317, "aarch64": 277}


class SeccompUnavailable(OSError):
    """No filter could be installed here; the message says why."""


class _Filter(ctypes.Structure):
    _fields_ = (("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32))


class _Program(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Filter)))


_Row = tuple[int, int, int, int]
"""One instruction: code, jump if true, jump if false, constant."""


def _errno(code: int) -> _Row:
    return (_RET_K, 0, 0, _RET_ERRNO | code)


def program(machine: str, network: bool, guarded: Sequence[int] = (),
            unix_sockets: bool = True, ipc: bool = True) -> list[_Row]:
    """The filter as (code, jt, jf, k) rows; `machine` is `os.uname().machine`. With
    `guarded` (pids), no signal reaches those processes or the groups they lead: not by
    pid, by group, by -1, through a pidfd or as a descriptor's signal owner. Without
    `unix_sockets`, `socket(AF_UNIX)` is refused too (a pair, which reaches nothing, is
    still made); without `ipc`, the `_IPC_CALLS`."""
    if machine not in _AUDIT_ARCH:
        raise SeccompUnavailable(f"no seccomp filter is written for {machine} "
                                 f"(x86_64 and aarch64 are)")
    column = 0 if machine == "x86_64" else 1
    allowed = {_AF_UNIX} | ({_AF_INET, _AF_INET6} if network else set())
    calls = [*_CALLS.values(), *(() if ipc else _IPC_CALLS.values()),
             *((_PIDFD_SEND_SIGNAL,) if guarded else ())]
    denied = sorted(number for numbers in calls if (number := numbers[column]) is not None)
    rows: list[_Row] = [
        (_LD_W_ABS, 0, 0, _OFFSET_ARCH),
        (_JEQ_K, 1, 0, _AUDIT_ARCH[machine]),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),  # another ABI's numbers mean other calls
        (_LD_W_ABS, 0, 0, _OFFSET_NR),
    ]
    if machine == "x86_64":  # the x32 ABI reuses the table with a bit set: refuse it
        rows += [(_JSET_K, 0, 1, _X32_BIT), _errno(errno.ENOSYS)]
    for number in denied:
        rows += [(_JEQ_K, 0, 1, number), _errno(errno.EPERM)]
    rows += [(_JEQ_K, 0, 1, _CLONE3[column]), _errno(errno.ENOSYS)]
    rows += [(_JEQ_K, 0, 1, _OPENAT2[column]), _errno(errno.ENOSYS)]
    for numbers, mode in _MODE_SETTERS.values():
        if (number := numbers[column]) is not None:
            rows += _on_bits(number, mode)
    for numbers, flags in _OPENS.values():
        if (number := numbers[column]) is not None:
            rows += _on_bits(number, flags + 1, flags)
    # Each argument check: jump over it unless this is its call; it reloads the number after.
    rows += [(_JEQ_K, 0, 4, _CLONE[column]), (_LD_W_ABS, 0, 0, _OFFSET_ARG0),
             (_JSET_K, 0, 1, _NAMESPACE_FLAGS), _errno(errno.EPERM),
             (_LD_W_ABS, 0, 0, _OFFSET_NR)]
    rows += _on_argument(_IOCTL[column], _OFFSET_ARG1, _REFUSED_IOCTLS, refuse_listed=True)
    if guarded:
        targets = sorted({0xFFFFFFFF, *guarded, *(-pid & 0xFFFFFFFF for pid in guarded)})
        for numbers in _SIGNALLING:
            rows += _on_argument(numbers[column], _OFFSET_ARG0, targets, refuse_listed=True)
        rows += _on_argument(_FCNTL[column], _OFFSET_ARG1, _SET_OWNER, refuse_listed=True)
    sockets = sorted(allowed - (set() if unix_sockets else {_AF_UNIX}))
    rows += _on_argument(_SOCKET[column], _OFFSET_ARG0, sockets, refuse_listed=False)
    rows += _on_argument(_SOCKETPAIR[column], _OFFSET_ARG0, sorted(allowed),
                         refuse_listed=False)
    rows.append((_RET_K, 0, 0, _RET_ALLOW))
    return rows


def _on_argument(call: int, offset: int, values: Sequence[int], refuse_listed: bool
                 ) -> list[_Row]:
    """Rows that refuse `call` when its argument at `offset` (its low word) is one of
    `values` (`refuse_listed`) or none of them, then load the call number again for the
    rows after."""
    check: list[_Row] = [(_LD_W_ABS, 0, 0, offset)]
    for index, value in enumerate(values):  # a match jumps over the rest of the list
        check.append((_JEQ_K, len(values) - index, 0, value))
    if refuse_listed:  # no match: over the refusal
        check.append((_JA, 0, 0, 1))
    check += [_errno(errno.EPERM), (_LD_W_ABS, 0, 0, _OFFSET_NR)]
    return [(_JEQ_K, 0, len(check), call), *check]


def _on_bits(call: int, mode: int, flags: int | None = None) -> list[_Row]:
    """Rows that refuse `call` when its argument number `mode` has a set-ID bit, where
    given only when its argument number `flags` makes a file; then load the call number
    again for the rows after."""
    check: list[_Row] = []
    if flags is not None:  # no file made: over the mode's three rows
        check += [(_LD_W_ABS, 0, 0, _argument(flags)), (_JSET_K, 0, 3, _MAKES_A_FILE)]
    check += [(_LD_W_ABS, 0, 0, _argument(mode)), (_JSET_K, 0, 1, _SET_ID_BITS),
              _errno(errno.EPERM), (_LD_W_ABS, 0, 0, _OFFSET_NR)]
    return [(_JEQ_K, 0, len(check), call), *check]


def _argument(number: int) -> int:
    """The offset of an argument's low word in seccomp's data."""
    return _OFFSET_ARG0 + number * _ARGUMENT_BYTES


def install(network: bool, guarded: Sequence[int] = (), unix_sockets: bool = True,
            ipc: bool = True) -> None:
    """Filter the calling thread and what it starts from now on (no_new_privs must be set).
    Raises `SeccompUnavailable` when the kernel refuses, so nothing runs unfiltered."""
    machine = os.uname().machine
    rows = program(machine, network, guarded, unix_sockets, ipc)
    array = (_Filter * len(rows))(*(_Filter(*row) for row in rows))
    prog = _Program(len(rows), ctypes.cast(array, ctypes.POINTER(_Filter)))
    libc = ctypes.CDLL(None, use_errno=True)
    result = libc.syscall(_SYS_SECCOMP[machine], _SECCOMP_SET_MODE_FILTER, 0, ctypes.byref(prog))
    if result != 0:
        code = ctypes.get_errno()
        raise SeccompUnavailable(code, f"the kernel refused the seccomp filter: "
                                       f"{errno.errorcode.get(code, code)}")

