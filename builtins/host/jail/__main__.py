"""The sandbox helper: a process of its own that confines itself, then starts commands.

hookline starts this program once (`python -E -s -S <this file> <fd>`, an empty
environment, a socket) as the template: for each sandbox hookline sends it the policy with
one end of each of two new sockets, and the template forks a helper (a fork of a small
process costs about a millisecond where a new interpreter costs tens), which reports on
the first. The template holds nothing of hookline's and is in no sandbox's namespaces.
The helper enters new namespaces where the system allows them and forks the first process
of the new pid namespace, which serves from then on (its parent waits, and on the second
socket makes read-only what commands made that needs protecting). That process lays out
the mounts, mounts a /proc of its own, sets no_new_privs and resource limits, applies
Landlock, drops every capability, becomes non-dumpable and installs the seccomp filter.
Each start request then carries the command's three streams and a status pipe; the helper
starts the command in a session of its own (`posix_spawn`; `subprocess` alone would
double the program's start-up), answers with a pidfd, and writes the exit status to the
pipe once it has reaped it.

Nothing of hookline's process is in the helper: not its memory, descriptors, environment
or Landlock domain. When the socket closes (hookline closed the sandbox, or died), the
helper ends: with a pid namespace the kernel then kills every process in it; without
one, the helper (a subreaper) kills every descendant it has.

Standard library only, imported as top-level modules (this folder is `sys.path[0]`).
"""

from __future__ import annotations

import ctypes
import os
import resource
import select
import signal
import socket
import struct
import sys

import landlock  # type: ignore[import-not-found]
import namespaces  # type: ignore[import-not-found]
import seccomp  # type: ignore[import-not-found]
import wire  # type: ignore[import-not-found]

TYPE_CHECKING = False  # not typing's: the helper imports no module it can do without
if TYPE_CHECKING:
    from typing import Any

_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 1, 4, 36
_IGNORED = (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ)
"""The signals the helper ignores (Python ignores the last two at start), which a spawned
program would inherit ignored."""
_libc = ctypes.CDLL(None, use_errno=True)


def main() -> int:
    """The template: fork one helper per request, until hookline closes the socket."""
    control = socket.socket(fileno=int(sys.argv[1]))
    control.set_inheritable(False)  # no command may hold it
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    signal.signal(signal.SIGCHLD, _reap_helpers)
    while (received := wire.receive(control)) is not None:
        config, fds = received
        if os.fork() == 0:  # the new helper: nothing of the template's but its code
            control.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            code = 1
            try:
                keeper = socket.socket(fileno=fds[1]) if len(fds) > 1 else None
                code = helper(socket.socket(fileno=fds[0]), config, keeper)
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
    return 0


def _reap_helpers(*_: object) -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        return


def helper(channel: socket.socket, config: dict[str, Any],
           keeper: socket.socket | None) -> int:
    """One sandbox: confine, report, then start commands until `channel` closes (and, with
    mounts of its own, protect on `keeper`'s requests what commands made since)."""
    # The template's non-dumpable mark would make /proc/self/uid_map root's: a user could
    # not map itself. The helper takes the mark again once confined.
    _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    isolated = False
    if "namespaces" not in config["without"]:
        try:
            namespaces.enter(config["network"])
            isolated = True
        except OSError as exc:
            config["missing_reason"] = str(exc)
    if isolated:
        child = os.fork()
        if child:  # the parent stays outside the pid namespace: it waits, and mounts
            channel.close()
            return keep(child, keeper, config)
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if keeper is not None:
        keeper.close()
    try:
        report = confine(config, isolated)
    except Exception as exc:  # whatever failed, hookline runs nothing and says why
        wire.send(channel, {"error": f"{type(exc).__name__}: {exc}"})
        return 1
    wire.send(channel, report)
    serve(channel, isolated)
    return 0


def confine(config: dict[str, Any], isolated: bool) -> dict[str, Any]:
    """Apply every layer this system allows; the report names the ones missing."""
    missing: list[str] = []
    temporary, workspace = config["temporary"], config["workspace"]
    writable_workspace = config["mode"] == "workspace-write"
    mounted = False  # the file system shaped by mounts: else Landlock alone keeps files
    if isolated:
        try:
            namespaces.lay_out(
                temporary=temporary, workspace=workspace,
                writable_workspace=writable_workspace, protected=config["protected"],
                hidden=config["hidden"], service_sockets=config["service_sockets"],
                network=config["network"])
            namespaces.mount_proc()
            mounted = True
        except namespaces.MountsUnavailable as exc:  # the pid and network ones still hold
            missing.append(f"mounts: {exc.strerror}")
    else:
        reason = config.get("missing_reason", "turned off by sandbox_without")
        missing.append(f"namespaces: {reason}")
        _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    for name, limit in (("RLIMIT_NPROC", config["max_processes"]),
                        ("RLIMIT_FSIZE", config["max_file_bytes"])):
        if limit:
            resource.setrlimit(getattr(resource, name), (limit, limit))
    _ended_first_out_of_memory()
    if _libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "could not set no_new_privs")
    watched: list[tuple[str, int]] = []
    if "landlock" in config["without"]:
        missing.append("landlock: turned off by sandbox_without")
    else:
        try:
            ruleset = landlock.build(
                workspace=workspace if writable_workspace else None,
                temporary=temporary,
                extra_writable=["/dev/shm", "/dev/pts"] if mounted else [],
                # Without mounts /dev is the host's: only its harmless devices are granted.
                # With them, what is hidden is masked, but a mask needs something to cover:
                # a credential made later (`aws configure` while a chat runs) is kept by
                # Landlock, outside the workspace (in it, commands may make it anyway).
                hidden=([path for path in config["hidden"] if not os.path.lexists(path)
                         and not landlock.inside(path, workspace)] if mounted else
                        [*config["hidden"], os.path.dirname(temporary), "/dev"]),
                network=config["network"], watched=watched)
            ruleset.confine()
            ruleset.close()
        except OSError as exc:
            missing.append(f"landlock: {exc}")
    namespaces.drop_capabilities()
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    if "seccomp" in config["without"]:
        missing.append("seccomp: turned off by sandbox_without")
    else:
        try:
            # Without a pid namespace the helper is a process like its commands: no signal
            # of theirs may reach it, its template (whose group it is in) or hookline
            # (Landlock keeps signals in the sandbox only from Linux 6.12). With one, they
            # cannot name a process outside it, and the kernel keeps them from its init.
            guarded = (os.getpid(), os.getpgrp(), os.getppid(), *config["guarded"])
            # Without mounts the host's Unix sockets (a D-Bus session bus, docker.sock) are
            # not masked, and nothing tells them from one a command made: none is opened.
            # Without an IPC namespace the host's System V objects are in reach: none is.
            seccomp.install(config["network"], guarded=() if isolated else guarded,
                            unix_sockets=mounted or config["network"], ipc=isolated)
        except OSError as exc:
            missing.append(f"seccomp: {exc}")
    return {"ready": True, "missing": missing, "tmpdir": temporary,
            "watched": watched, "mounted": mounted}


def keep(child: int, keeper: socket.socket | None, config: dict[str, Any]) -> int:
    """The helper's parent, until the helper ends: in its user and mount namespaces with
    every capability there, but outside its pid namespace, where no command can name it.
    On hookline's request it makes paths read-only (a repository a command made): a mount
    in this namespace reaches every command at once, the running ones too."""
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    workspace = config["workspace"]
    pinned = set(namespaces.folders_to_pin(  # by the layout, as this finds them
        workspace, [path for path in config["protected"] if os.path.lexists(path)]))
    if keeper is not None:
        ended = os.pidfd_open(child)
        poll = select.poll()
        poll.register(keeper, select.POLLIN)
        poll.register(ended, select.POLLIN)
        while all(fd != ended for fd, _events in poll.poll()):
            received = wire.receive(keeper)
            if received is None:
                break
            request, fds = received
            for fd in fds:
                os.close(fd)
            wire.send(keeper, protect(request.get("protect", []), workspace, pinned))
        keeper.close()
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


def protect(paths: list[str], workspace: str, pinned: set[str]) -> dict[str, Any]:
    """Mount each of `paths` read-only over itself (one gone since is left), then pin the
    folders of the workspace that hold it and are not `pinned` yet (after: a command
    whose folder is in one still sees the path read-only). The errors name what could not
    be done (hookline then starts a new helper, which does)."""
    errors: list[str] = []
    for path in paths:
        try:
            namespaces.protect(path)
            for folder in namespaces.folders_to_pin(workspace, [path]):
                if folder not in pinned:
                    namespaces.pin(folder)
                    pinned.add(folder)
        except FileNotFoundError:
            continue
        except OSError as exc:
            errors.append(str(exc))
    return {"errors": errors}


def _ended_first_out_of_memory() -> None:
    """When memory runs out, the kernel ends the process with the highest score: make it a
    command (this helper's children inherit the score), not hookline or your editor. A
    process may raise its own score without privilege."""
    try:
        with open("/proc/self/oom_score_adj", "w") as file:
            file.write("1000")
    except OSError:  # no /proc to say it through: the kernel chooses as usual
        return


def serve(channel: socket.socket, isolated: bool) -> None:
    """Start commands on request until the channel closes; report each exit status."""
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    # A pid namespace's first process gets only the signals it handles from inside: not
    # Python's SIGINT, whose KeyboardInterrupt would end the helper and every command.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    running: dict[int, int] = {}  # pid -> the status pipe of a command hookline started
    poll = select.poll()
    poll.register(channel, select.POLLIN)
    poll.register(wake_read, select.POLLIN)
    while True:
        for fd, _events in poll.poll():
            if fd == channel.fileno():
                received = wire.receive(channel)
                if received is None:
                    if not isolated:
                        end_descendants()
                    return
                request, fds = received
                start(channel, request, fds, running)
            else:
                _drain(wake_read)
        reap(running)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        return


def start(channel: socket.socket, request: dict[str, Any], fds: list[int],
          running: dict[int, int]) -> None:
    """Start one command with the streams it came with; answer with its pidfd."""
    if len(fds) != 4:
        for fd in fds:
            os.close(fd)
        wire.send(channel, {"errno": 22, "message": "a start request carries four streams"})
        return
    status = fds[3]
    try:
        pid = spawn(request, fds[:3])
    except OSError as exc:
        os.close(status)
        wire.send(channel, {"errno": exc.errno, "message": exc.strerror,
                            "filename": exc.filename})
        return
    finally:
        for fd in fds[:3]:
            os.close(fd)
    running[pid] = status
    pidfd = os.pidfd_open(pid)
    try:
        wire.send(channel, {"pid": pid}, [pidfd])
    finally:
        os.close(pidfd)
    # Nothing is reaped before hookline has read, through the pidfd, the number its pid
    # namespace gives the command (it signals the command's group by it): it says so.
    wire.receive(channel)


def spawn(request: dict[str, Any], streams: list[int]) -> int:
    """Start the command as the leader of a new session, its three streams as 0, 1 and 2
    and no other descriptor (every one the helper holds is close-on-exec), and the signals
    Python or the helper ignore back to their defaults (`yes | head` ends by SIGPIPE, as
    in a terminal). `posix_spawn` starts it the way `vfork` does: a `fork` of the helper
    would copy its memory first."""
    argv = ["/bin/sh", "-c", request["argv"]] if request["shell"] else request["argv"]
    env = request["env"]
    if request["cwd"] is not None:  # the child starts where the helper is
        os.chdir(request["cwd"])
    try:
        return os.posix_spawn(
            _executable(argv[0], env), argv, env, setsid=True, setsigdef=_IGNORED,
            file_actions=[(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(streams)])
    finally:
        os.chdir("/")


def _executable(name: str, env: dict[str, str]) -> str:
    """`name` found on the command's own PATH (a name with a slash is taken as it is)."""
    if "/" in name:
        return name
    for folder in env.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(2, "No such file or directory", name)


def reap(running: dict[int, int]) -> None:
    """Collect every exited child (orphans too) and report the ones hookline started."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = running.pop(pid, None)
        if fd is not None:
            try:  # noqa: SIM105 - contextlib would cost the helper's start-up
                os.write(fd, struct.pack("<i", os.waitstatus_to_exitcode(status)))
            except OSError:
                pass  # hookline stopped listening
            os.close(fd)


def end_descendants() -> None:
    """Without a pid namespace: kill every child until none is left (descendants come back
    to this subreaper as their parents die, and are killed in the next round)."""
    me = str(os.getpid())
    while True:
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat") as file:
                    parent = file.read().rsplit(")", 1)[1].split()[1]
                if parent == me:
                    os.kill(int(entry), signal.SIGKILL)
            except (OSError, IndexError, ValueError):
                continue  # not a process, or gone already
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


if __name__ == "__main__":
    sys.exit(main())
