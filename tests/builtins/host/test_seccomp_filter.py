"""The sandbox's seccomp filter, installed for real in a child process that then tries the
calls it must refuse and the ones it must leave alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hookline.builtins.host.jail import seccomp

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.uname().machine not in ("x86_64", "aarch64"),
    reason="the filter is written for Linux on x86_64 and aarch64")

PROBE = textwrap.dedent("""
    import ctypes, errno, json, os, signal, socket, sys
    sys.path.insert(0, os.path.dirname(sys.argv[1]))
    import seccomp
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # no_new_privs
    network, guarded, other, unix_sockets, ipc = json.loads(sys.argv[2])
    seccomp.install(network, guarded, unix_sockets, ipc)
    info = (ctypes.c_int * 32)(0, 0, -1)  # a siginfo_t: no signal, SI_QUEUE (as sigqueue)
    found = {}

    def attempt(name, action):
        try:
            action()
            found[name] = "allowed"
        except OSError as exc:
            found[name] = errno.errorcode.get(exc.errno, str(exc.errno))

    def call(number, *args):
        if libc.syscall(number, *args) < 0:
            raise OSError(ctypes.get_errno(), "")

    x86 = os.uname().machine == "x86_64"
    attempt("unix", lambda: socket.socket(socket.AF_UNIX).close())
    attempt("pair", lambda: [end.close() for end in socket.socketpair()])
    attempt("inet", lambda: socket.socket(socket.AF_INET).close())
    attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())
    attempt("mptcp", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262).close())
    attempt("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close())
    attempt("ptrace", lambda: call(101 if x86 else 117, 16, other, 0, 0))
    attempt("unshare", lambda: call(272 if x86 else 97, 0x10000000))
    for number, pid in enumerate(guarded):
        attempt(f"kill guarded {number}", lambda: os.kill(pid, 0))
        attempt(f"kill group {number}", lambda: os.kill(-pid, 0))
        attempt(f"sigqueue guarded {number}",
                lambda: call(129 if x86 else 138, pid, 0, info))
        attempt(f"tgsigqueue guarded {number}",
                lambda: call(297 if x86 else 240, pid, pid, 0, info))
        attempt(f"pidfd guarded {number}", lambda: os.close(os.pidfd_open(pid)))
    attempt("sigqueue other", lambda: call(129 if x86 else 138, other, 0, info))
    attempt("kill everyone", lambda: os.kill(-1, 0))
    attempt("kill other", lambda: os.kill(other, 0))
    attempt("fork", lambda: os.waitpid(os.fork() or os._exit(0), 0))

    def made(number, remove):  # a private object, removed at once when it was made
        made_id = libc.syscall(number, 0, 4096, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
        if made_id < 0:
            raise OSError(ctypes.get_errno(), "")
        remove(made_id)

    attempt("shm", lambda: made(29 if x86 else 194,
                                lambda shm: call(31 if x86 else 195, shm, 0, None)))
    attempt("msg", lambda: call(71 if x86 else 187, libc.syscall(68 if x86 else 186, 0,
                                                                 0o1600), 0, None))
    attempt("mq", lambda: call(240 if x86 else 180, b"hookline-probe-none", 0, 0, None))
    print(json.dumps(found))
""")


def probe(network: bool, guarded: list[int], unix_sockets: bool = True,
          ipc: bool = True) -> dict[str, str]:
    other = subprocess.Popen(["sleep", "30"])
    try:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, seccomp.__file__,
             json.dumps([network, guarded, other.pid, unix_sockets, ipc])],
            capture_output=True, text=True, timeout=60)
    finally:
        other.kill()
        other.wait()
    assert done.returncode == 0, done.stderr
    result: dict[str, str] = json.loads(done.stdout)
    return result


def test_the_closed_network_filter_refuses_what_it_lists() -> None:
    """Without a pid namespace the helper guards itself, its template and hookline: no
    call that signals by pid or group reaches them, sigqueue's included."""
    guarded = [subprocess.Popen(["sleep", "30"], start_new_session=True) for _ in range(2)]
    try:
        found = probe(network=False, guarded=[process.pid for process in guarded])
    finally:
        for process in guarded:
            process.kill()
            process.wait()
    signalling = {f"{call} {number}": "EPERM" for number in (0, 1) for call in (
        "kill guarded", "kill group", "sigqueue guarded", "tgsigqueue guarded",
        "pidfd guarded")}
    assert found == {
        "unix": "allowed", "pair": "allowed", "inet": "EPERM", "udp": "EPERM", "mptcp": "EPERM",
        "netlink": "EPERM", "ptrace": "EPERM", "unshare": "EPERM", **signalling,
        "sigqueue other": "allowed", "kill everyone": "EPERM", "kill other": "allowed",
        "fork": "allowed", "shm": "allowed", "msg": "allowed", "mq": "ENOENT"}


def test_the_open_network_filter_allows_tcp_and_udp_only() -> None:
    found = probe(network=True, guarded=[2**22 + 7])
    assert (found["unix"], found["inet"], found["udp"]) == ("allowed",) * 3
    assert (found["netlink"], found["ptrace"]) == ("EPERM", "EPERM")
    assert found["kill other"] == "allowed"


def test_without_unix_sockets_only_a_pair_is_made() -> None:
    """Where no mount masks the host's sockets, a command opens none (a pair reaches
    nothing, and pipes, asyncio and multiprocessing need it)."""
    found = probe(network=False, guarded=[2**22 + 7], unix_sockets=False)
    assert (found["unix"], found["pair"], found["inet"]) == ("EPERM", "allowed", "EPERM")


def test_without_an_ipc_namespace_no_system_v_object_or_message_queue_is_reached() -> None:
    """Without a namespace of its own a command would attach the host's shared memory by
    its id (an X server's images, say): making, attaching or opening one is refused."""
    found = probe(network=False, guarded=[2**22 + 7], ipc=False)
    assert (found["shm"], found["msg"], found["mq"]) == ("EPERM",) * 3
    assert (found["pair"], found["fork"]) == ("allowed", "allowed")


def test_every_denied_call_has_a_number_on_both_architectures() -> None:
    for machine in ("x86_64", "aarch64"):
        rows = seccomp.program(machine, network=False, guarded=(1234, 5678, 9012), ipc=False)
        assert rows[-1] == (0x06, 0, 0, 0x7FFF0000)  # the last row allows
        assert all(0 <= jt < 256 and 0 <= jf < 256 for _code, jt, jf, _k in rows)
    with pytest.raises(seccomp.SeccompUnavailable, match="x86_64 and aarch64"):
        seccomp.program("riscv64", network=False)


SET_ID_PROBE = textwrap.dedent("""
    import ctypes, errno, json, os, stat, sys
    sys.path.insert(0, os.path.dirname(sys.argv[1]))
    import seccomp
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # no_new_privs
    seccomp.install(False, [])
    os.chdir(sys.argv[2])
    x86 = os.uname().machine == "x86_64"
    found = {}

    def attempt(name, action, path):
        try:
            action()
        except OSError as exc:
            found[name] = errno.errorcode.get(exc.errno, str(exc.errno))
            return
        mode = stat.S_IMODE(os.stat(path).st_mode) if os.path.exists(path) else 0
        found[name] = "allowed" + (" with set-id" if mode & 0o6000 else "")

    def call(number, *args):
        if libc.syscall(number, *args) < 0:
            raise OSError(ctypes.get_errno(), "")

    open("plain", "w").close()
    attempt("chmod u+s", lambda: os.chmod("plain", 0o4755), "plain")
    attempt("chmod g+s", lambda: os.chmod("plain", 0o2755), "plain")
    attempt("chmod 755", lambda: os.chmod("plain", 0o755), "plain")
    attempt("fchmod u+s", lambda: os.fchmod(os.open("plain", os.O_RDONLY), 0o4755), "plain")
    attempt("create u+s", lambda: os.close(os.open("made", os.O_CREAT | os.O_WRONLY, 0o4755)),
            "made")
    attempt("create 644", lambda: os.close(os.open("fine", os.O_CREAT | os.O_WRONLY, 0o644)),
            "fine")
    # Without O_CREAT the mode is whatever the register held: never a reason to refuse.
    attempt("open, stray mode", lambda: os.close(libc.syscall(
        257 if x86 else 56, -100, b"plain", os.O_RDONLY, 0o4755)), "plain")
    attempt("tmpfile u+s", lambda: os.close(os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o4755)),
            "none")
    attempt("mknod u+s", lambda: os.mknod("node", stat.S_IFREG | 0o4755), "node")
    attempt("openat2", lambda: call(437, -100, b"plain", None, 0), "plain")
    print(json.dumps(found))
""")


def test_no_command_makes_a_set_user_or_group_id_file(tmp_path: Path) -> None:
    """A set-ID file a command leaves in the workspace would lend its owner's rights (root's,
    where hookline runs as root) to whoever runs it later: no call that gives a mode may set
    those bits, while every other mode works as before."""
    done = subprocess.run([sys.executable, "-c", SET_ID_PROBE, seccomp.__file__, tmp_path],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "chmod u+s": "EPERM", "chmod g+s": "EPERM", "chmod 755": "allowed",
        "fchmod u+s": "EPERM", "create u+s": "EPERM", "create 644": "allowed",
        "open, stray mode": "allowed", "tmpfile u+s": "EPERM", "mknod u+s": "EPERM",
        "openat2": "ENOSYS"}
