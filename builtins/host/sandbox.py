"""Confining the processes tools start: the sandbox policy, its helper, a filtered environment.

The default (`sandbox = "workspace-write"`) starts every command through a helper process
of the workspace's own (`confined`, `jail/`): in its own user, pid, mount, network and IPC
namespaces, under Landlock and seccomp, with no capability. A command may read the file
system but the hidden paths (the hookline home and its tape store, `sandbox_deny_read`),
write only the workspace (not its git repositories or `.hookline`) and its private
`TMPDIR`, reach no network and nothing of hookline. `read-only` also refuses the workspace;
`sandbox_network = true` allows TCP and UDP; `off` gives commands the user's full rights.
Where a layer cannot be applied the others hold and a warning says what is left open; with
too few of them commands are refused with the reason. See docs/security.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hookline.kernel.errors import ErrorKind, HooklineError

from ..config import (
    DEFAULT_DENY_READ,
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_PROCESSES,
    DEFAULT_PROTECT,
    setting_env,
)
from ..privacy import HOME_ENV
from .files import is_inside
from .protection import watch_for
from .toolenv import EnvironmentPolicy

if TYPE_CHECKING:
    from ..config import Settings
    from .confined import Spawner

__all__ = ["Confinement", "SandboxPolicy", "check_exposure", "private_temp_root"]

logger = logging.getLogger(__name__)  # every command shows its warnings (cli ALWAYS_WARN)

_STORE_SUFFIXES = ("", "-wal", "-shm", "-journal", "-owners", "-claims")
"""The SQLite store's file and those beside it: SQLite's, and the folders of its writers'
locks (a command that held or removed one would stop a dead run's recovery or end a live
one) and of request keys' claims."""
SERVICE_SOCKETS = ("~/.docker/desktop", "~/.colima", "~/.lima", "~/.rd", "/var/snap/lxd/common/lxd",
                   "/var/lib/lxd", "/var/lib/incus")
"""Folders outside /run and /tmp where a service keeps the socket of a container engine
(Docker Desktop, colima, Lima, Rancher Desktop; LXD, Incus): whoever connects to it runs
containers, with the host's root as a volume. Masked when the network is closed, as
/run is."""


def _terminal_server_folder() -> str:
    """Where tmux keeps its server's socket (`$TMUX_TMPDIR/tmux-<uid>`), to which `tmux
    send-keys` types into your shells. Made here when missing, mode 0700 as tmux makes it
    (and takes it), so that a sandbox masks it (with the network closed, as it does the
    other `SERVICE_SOCKETS`) even when the server starts after the sandbox did."""
    base = os.path.realpath(os.environ.get("TMUX_TMPDIR") or "/tmp")
    folder = os.path.join(base, f"tmux-{os.getuid()}")
    with contextlib.suppress(OSError):  # there already, or /tmp not writable: as it is
        os.mkdir(folder, 0o700)
    return folder  # not resolved: a link another user put there is not followed


def _default_home_too(workspace: str, hidden: tuple[str, ...]) -> tuple[str, ...]:
    """`~/.hookline` when this hookline runs with another home (a gateway's, a project's):
    its config and tapes, an API key among them, are no less secret. Left out when it is
    not there, or is one with the workspace (where the home in use would be refused)."""
    default = os.path.realpath(os.path.join(os.path.expanduser("~"), ".hookline"))
    if (default in hidden or not os.path.isdir(default) or is_inside(default, workspace)
            or is_inside(workspace, default)):
        return ()
    return (default,)


@dataclass(frozen=True)
class SandboxPolicy:
    """How the processes of tools are confined (settings `sandbox`, `sandbox_network`,
    `tool_env*`); `hidden` are paths no command may read or write."""

    mode: str = "workspace-write"
    network: bool = False
    hidden: tuple[str, ...] = ()
    environment: EnvironmentPolicy = field(default_factory=EnvironmentPolicy)
    deny_read: tuple[str, ...] = DEFAULT_DENY_READ
    protect: tuple[str, ...] = DEFAULT_PROTECT
    max_processes: int = DEFAULT_MAX_PROCESSES
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    without: tuple[str, ...] = ()
    """Layers to leave out (`sandbox_without`): what a system lacking them gets, to try
    the fallback; warned like a lack."""
    home: str | None = None
    """The hookline home, where what the workspace's searches found is kept."""

    @classmethod
    def from_settings(cls, settings: Settings) -> SandboxPolicy:
        hidden = [str(settings.home)]
        store = settings.tape_store
        if store is not None and not isinstance(store, str):  # a file, not a URL
            hidden += [f"{store}{suffix}" for suffix in _STORE_SUFFIXES]
        if settings.http_keyfile is not None:
            hidden.append(str(settings.http_keyfile))
        # The variable `api_key_env` names holds the provider key whatever its name.
        key_variable = (settings.api_key_env,) if settings.api_key_env else ()
        environment = EnvironmentPolicy(inherit=settings.tool_env == "inherit",
                                        keep=settings.tool_env_keep,
                                        drop=(*settings.tool_env_drop, *key_variable))
        return cls(settings.sandbox, settings.sandbox_network, tuple(hidden), environment,
                   settings.sandbox_deny_read, settings.sandbox_protect,
                   settings.sandbox_max_processes, settings.sandbox_max_file_bytes,
                   settings.sandbox_without, str(settings.home))

    @property
    def confined(self) -> bool:
        return self.mode != "off"

    def warn(self) -> None:
        """Say, at a start, each way this policy is weaker than the default."""
        for line in self.warnings():
            logger.warning("%s", line)

    def warnings(self) -> list[str]:
        """What to say at every start about a weakened setting (empty by default)."""
        lines = []
        if not self.confined:
            lines.append("the shell sandbox is OFF (sandbox = off): commands the model asks "
                         "for run with your full rights; remove sandbox = off to confine them")
        elif self.network:
            lines.append("sandboxed commands may open network connections "
                         "(sandbox_network = true)")
        if self.environment.inherit:
            lines.append("tool processes inherit hookline's whole environment, secrets "
                         "included (tool_env = inherit); remove it to filter them out")
        opened = [name for name in DEFAULT_PROTECT if name not in self.protect]
        if self.mode == "workspace-write" and opened:
            lines.append(f"commands may change {', '.join(opened)} (sandbox_protect leaves "
                         f"them out): an editor or agent you open there later runs what "
                         f"they name; add them back to sandbox_protect to keep them")
        return lines


def check_exposure(settings: Settings, address: str, loopback: bool) -> None:
    """Refuse to serve other machines with an unconfined shell, unless told twice."""
    if loopback or settings.sandbox != "off" or settings.http_allow_unsandboxed:
        return
    raise RuntimeError(
        f"refusing to listen on {address} with sandbox = off: whoever holds the token could "
        f"run commands with your full rights from another machine; remove sandbox = off, "
        f"or also set http_allow_unsandboxed = true if that is what you want")


class Confinement:
    """One workspace's sandbox: its private temporary folder and its helper process.

    The helper (`confined.Spawner`) is started on first use and again when a folder its
    Landlock rules enumerated changes (a new entry beside a hidden path needs its own rule;
    only without namespaces), when it ended (killed), or when it failed to protect in place
    what commands made (`watch`, shared with the workspace's other sandboxes); a helper
    replaced stays while a command it started runs. `close()` ends each one (and with it
    every process it started) and removes the folder.
    """

    def __init__(self, policy: SandboxPolicy, workspace: str,
                 owner: str = "this session") -> None:
        self.policy = policy
        self.workspace = os.path.realpath(workspace)
        self.owner = owner
        """Whose sandbox this is, as its warnings name it."""
        hidden = tuple(os.path.realpath(path) for path in policy.hidden)
        self.hidden = (*hidden, *_default_home_too(self.workspace, hidden))
        self._deny_read = policy.deny_read
        self.private = tuple(_resolved(("/proc", private_temp_path())))
        """What the sandbox shows a command only of its own: the processes (hookline's
        environment and memory, in `/proc`) and the sessions' temporary folders."""
        self.services = () if policy.network else tuple(_resolved(("/run", *SERVICE_SOCKETS)))
        """What the sandbox masks with the network closed: `/run` (services' sockets, a
        container's secrets) and the container engines' folders (a VM's ssh key)."""
        self.watch = watch_for(self.workspace, policy.protect,
                               Path(policy.home) if policy.home else None)
        """What commands made, shared with every other sandbox of the workspace here."""
        self.protected = self.watch.protected
        self.watch.join(self._protect_in_place)
        self._lock = threading.Lock()
        self._temporary: PrivateFolder | None = None
        self._spawner: Spawner | None = None
        self._replaced: list[Spawner] = []
        self._unprotected = False
        """A command made something to protect that the current helper failed to protect
        in place: the next command gets a new helper, which does."""

    @property
    def denied(self) -> tuple[str, ...]:
        """The credentials of `sandbox_deny_read`, hidden like `hidden`: resolved at each
        use, so one that became a link since (dotfiles kept with stow) is hidden where it
        points, for each new helper and for the file tools."""
        return tuple(_resolved(self._deny_read))

    def kept_from_tools(self, path: str) -> tuple[str, str] | None:
        """Where the resolved `path` lies in what the sandbox keeps from commands, and so
        from the file tools too, with why; None when it lies in none."""
        for paths, why in (
                (self.hidden, "is the hookline home or its tape store"),
                (self.denied, "sandbox_deny_read hides (credentials)"),
                (self.private, "shows hookline's own processes or other sessions' temporary "
                               "files"),
                (self.services, "the sandbox masks while the network is closed (services, "
                                "container engines)")):
            within = next((kept for kept in paths if is_inside(path, kept)), None)
            if within is not None:
                return within, why
        return None

    def prepare(self, extra: Mapping[str, str] | None = None
                ) -> tuple[dict[str, str], Spawner | None]:
        """The complete environment for a new process (hookline's, filtered, plus `extra`)
        and the helper that must start it (None when the sandbox is off), reserved for it:
        `release` it once the process started, or failed to. Blocking (it may start the
        helper): call it from a worker thread."""
        environ = self.policy.environment.apply(os.environ)
        self.watch.started()
        if not self.policy.confined:
            return {**environ, **(extra or {})}, None
        self._check_layout()
        with self._lock:
            spawner = self._current_spawner()
            spawner.reserve()  # replaced meanwhile, it is kept until released
        for name in ("TMPDIR", "TMP", "TEMP"):
            environ[name] = spawner.report.tmpdir
        return {**environ, **(extra or {})}, spawner

    def close(self) -> None:
        with self._lock:
            folder, self._temporary = self._temporary, None
            spawners = [*self._replaced, *([self._spawner] if self._spawner else [])]
            self._spawner, self._replaced = None, []
        for spawner in spawners:
            spawner.close()
        if folder is not None:
            folder.remove()
        self.watch.started()  # a background command may have made one since
        self.watch.say_what_made()

    def _check_layout(self) -> None:
        """Landlock grants whole hierarchies: a workspace that holds the hookline home
        cannot be writable without the home being changeable too, so refuse it."""
        writable = self.policy.mode == "workspace-write"
        for path in self.hidden:
            home_inside = writable and is_inside(path, self.workspace)
            if is_inside(self.workspace, path) or home_inside:
                # Reads are granted file by file: read-only can hide a home in the workspace.
                other = ', or set sandbox = "read-only"' if home_inside else ""
                raise HooklineError(
                    ErrorKind.config,
                    f"the sandbox cannot confine commands here: the workspace and {path} "
                    f"(the hookline home or its tape store, which commands must not read or "
                    f"change) are one inside the other. Keep {HOME_ENV} outside the "
                    f"workspace (the default is ~/.hookline){other}")

    def _current_spawner(self) -> Spawner:
        if self._temporary is None or not os.path.isdir(self._temporary.path):
            if self._temporary is not None:
                self._temporary.remove()
            self._temporary = PrivateFolder("hookline-tool-")
            if self._spawner is not None:  # its mounts and rules name the old folder
                self._replaced.append(self._spawner)
                self._spawner = None
        if self._spawner is not None and self._spawner.ended():
            logger.warning(
                "the sandbox of %s ended (its helper was killed: out of memory, or by a "
                "signal), and every process it ran with it, background ones too; a new one "
                "starts now", self.owner)
            self._spawner.close()
            self._spawner = None
        if self._spawner is not None and not self._unprotected and all(
                _mtime(path) == seen for path, seen in self._spawner.report.watched):
            return self._spawner
        from .confined import Spawner

        try:
            found = self._found_to_protect()
            spawner = Spawner(self._helper_policy(self._temporary.path, found))
        except OSError as exc:
            raise HooklineError(ErrorKind.config, _refusal(self.policy.mode, str(exc))) from None
        _check_layers(self.policy.mode, spawner)
        if self.policy.mode == "workspace-write" and not spawner.report.mounted:
            self.watch.unkept(found)  # what runs later stays writable: its changes are named
        if self._spawner is not None:  # its commands keep running until they end
            self._replaced.append(self._spawner)
        self._spawner, self._unprotected = spawner, False
        for old in [old for old in self._replaced if old.idle()]:
            self._replaced.remove(old)
            old.close()
        return spawner

    def _helper_policy(self, temporary: str, found: list[str]) -> dict[str, object]:
        policy = self.policy
        protected = dict.fromkeys([*self.protected, *found])
        return {"mode": policy.mode, "network": policy.network, "workspace": self.workspace,
                "temporary": temporary, "protected": list(protected),
                "hidden": [*self.hidden, *self.denied],
                "service_sockets": [*_resolved(SERVICE_SOCKETS), _terminal_server_folder()],
                "max_processes": policy.max_processes, "max_file_bytes": policy.max_file_bytes,
                "without": list(policy.without), "guarded": [os.getpid(), os.getpgrp()]}

    def _found_to_protect(self) -> list[str]:
        """What the workspace's search finds to protect (nothing to look for in
        read-only), searched again for each helper so that what was made since is kept
        too."""
        return [] if self.policy.mode == "read-only" else self.watch.search()

    def busy(self) -> bool:
        """A command this sandbox started is still running (a background one, say): it
        may make a repository at any time."""
        with self._lock:
            spawners = [*self._replaced, *([self._spawner] if self._spawner else [])]
        return not all(spawner.idle() for spawner in spawners)

    def _protect_in_place(self, paths: list[str]) -> None:
        """Protect `paths` in every running helper now, for the commands still running
        there too; where the current one failed, the next command gets a new helper."""
        with self._lock:
            current, replaced = self._spawner, list(self._replaced)
        for old in replaced:
            old.protect(paths)
        if current is not None and not current.protect(paths):
            with self._lock:
                if self._spawner is current:
                    self._unprotected = True


def _refusal(mode: str, reason: str) -> str:
    return (f"the shell is sandboxed (sandbox = {mode}), but the sandbox cannot be applied "
            f"here: {reason}. Nothing was run. To run commands with your full rights "
            f"instead, set sandbox = \"off\" ({setting_env('sandbox')}=off); hookline then "
            f"warns at every start")


WARNED: set[tuple[str, ...]] = set()
"""The weaker sandboxes already warned about: each is said once per process."""


def _check_layers(mode: str, spawner: Spawner) -> None:
    """Refuse a helper too weak to hold; say once what a weaker one leaves open."""
    missing = spawner.report.missing
    lost = {line.split(":", 1)[0] for line in missing}
    files_open = "landlock" in lost and bool(lost & {"namespaces", "mounts"})
    processes_open = {"namespaces", "seccomp"} <= lost
    if files_open or processes_open:
        spawner.close()
        raise HooklineError(ErrorKind.config, _refusal(mode, "; ".join(missing)))
    if missing and missing not in WARNED:
        WARNED.add(missing)
        logger.warning("the sandbox is weaker here: %s. %s", "; ".join(missing),
                       " ".join(LEFT_OPEN[name] for name in sorted(lost)))


LEFT_OPEN = {
    "namespaces": (
        "Without namespaces, commands can change the modes and times of your files outside "
        "the workspace, see every process of the machine and, before Linux 6.12, signal "
        "your other ones; the workspace's .git and its other protected paths stay writable "
        "to them (what they change of what runs later outside the sandbox is named after "
        "each turn). Nothing masks the host's Unix sockets (a D-Bus session bus, "
        "docker.sock) or its System V IPC, so commands may open no Unix socket (a "
        "socketpair works) and use no shared memory segment or message queue of that kind. "
        "Allow unprivileged user namespaces (sysctl user.max_user_namespaces, or "
        "kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu) to close that."),
    "mounts": (
        "The namespaces may not mount (Ubuntu 24.04's AppArmor default does this): commands "
        "still run in their own pid and network namespaces, under Landlock and seccomp, but "
        "can change the modes and times of your files outside the workspace and see the "
        "machine's processes; the workspace's .git and its other protected paths stay "
        "writable to them (what they change of what runs later outside the sandbox is named "
        "after each turn). Nothing masks the host's Unix sockets, so commands may open no "
        "Unix socket (a socketpair works). Allow unprivileged user namespaces to mount (sysctl "
        "kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for the "
        "Python running hookline) to close that."),
    "landlock": (
        "Without Landlock, only the mounts keep commands in the workspace; a kernel with "
        "Landlock enabled (lsm=landlock) adds the second layer."),
    "seccomp": (
        "Without seccomp, commands may use ptrace, io_uring, bpf and every socket family "
        "inside their namespaces."),
}
"""What a missing layer leaves open, and the fix, said once at start."""


def private_temp_path() -> str:
    """`<tmp>/hookline-<uid>`: where this user's private temporary folders are."""
    return os.path.join(tempfile.gettempdir(), f"hookline-{os.getuid()}")


def private_temp_root() -> str:
    """`private_temp_path()`, the one folder of this user's private temporary folders,
    made 0700 and checked (owned by this user, not a link, open to nobody else)."""
    root = private_temp_path()
    with contextlib.suppress(FileExistsError):
        os.mkdir(root, 0o700)
    info = os.lstat(root)
    if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid()
            or info.st_mode & 0o077):
        raise HooklineError(ErrorKind.config, (
            f"{root} is not a private folder of this user (it must be a folder owned by "
            f"uid {os.getuid()} with mode 0700); another user may have made it. Remove it, "
            f"or set TMPDIR to a folder of your own"))
    return root


ABANDONED_AFTER = 600.0
"""Seconds a folder nobody holds is left before it counts as abandoned: the moment
between making a folder and holding it, and a hookline of a version without the hold."""


class PrivateFolder:
    """A new folder under `private_temp_root()`, held (an exclusive `flock`) until
    `remove()`. Making one first removes the folders nobody holds any more: a process
    killed (SIGKILL, a crash) before removing its own leaves them, with what its commands
    wrote."""

    def __init__(self, prefix: str) -> None:
        root = private_temp_root()
        _remove_abandoned(root)
        self.path = tempfile.mkdtemp(prefix=prefix, dir=root)
        self._held = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fcntl.flock(self._held, fcntl.LOCK_EX)

    def remove(self) -> None:
        _remove_tree(self.path)
        held, self._held = self._held, -1
        if held >= 0:
            os.close(held)


def _remove_abandoned(root: str) -> None:
    now = time.time()
    with os.scandir(root) as entries:
        folders = [entry for entry in entries
                   if entry.name.startswith("hookline-") and entry.is_dir(follow_symlinks=False)]
    for folder in folders:
        try:
            if now - folder.stat(follow_symlinks=False).st_mtime < ABANDONED_AFTER:
                continue
            held = os.open(folder.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
                           | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its process is alive
        else:
            _remove_tree(folder.path)
        finally:
            os.close(held)


def _remove_tree(path: str) -> None:
    """Remove a private folder whatever its commands left: folders they closed to everyone
    (mode 000: opened to their owner first; root needs no such step) and trees deeper than
    a recursive walk or a path name allows (a removal that fails would keep what they
    wrote on disk, and break every later start). Folder by folder through descriptors,
    two held at a time, never following a link; each folder listed once. Going up, the
    folder reached must be the one come down from: a process still running may have moved
    the folder being emptied, and the names left to remove must never be applied to
    another folder (`/tmp`, say), so the removal stops there."""
    parent, name = os.path.split(path)
    try:
        folder = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    levels = [(_identity(folder), [name])]
    """For each folder entered, from `parent` down: its device and inode, and its
    subfolders still to remove, the last one being the folder entered next."""
    try:
        while True:
            if levels[-1][1]:
                entered = _emptied_of_files(folder, levels[-1][1][-1])
                if entered is None:  # gone, or not ours to open
                    levels[-1][1].pop()
                    continue
                os.close(folder)
                folder, subfolders = entered
                levels.append((_identity(folder), subfolders))
                continue
            levels.pop()
            if not levels:
                return
            above = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=folder)
            os.close(folder)
            folder = above
            identity, names = levels[-1]
            if _identity(folder) != identity:
                logger.warning("sandbox.remove_moved path=%s: a folder in it was moved while "
                               "it was removed; what is left stays", path)
                return
            with contextlib.suppress(OSError):
                os.rmdir(names.pop(), dir_fd=folder)
    except OSError:
        logger.warning("sandbox.remove_failed path=%s", path, exc_info=True)
    finally:
        os.close(folder)


def _identity(folder: int) -> tuple[int, int]:
    info = os.fstat(folder)
    return info.st_dev, info.st_ino


def _emptied_of_files(folder: int, name: str) -> tuple[int, list[str]] | None:
    """Open the folder `name` of `folder` (to its owner first), remove what in it is not
    a folder, and return its descriptor and subfolders; None if it cannot be opened."""
    try:
        handle = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=folder)
    except OSError:
        return None
    try:
        with contextlib.suppress(OSError):
            os.chmod(f"/proc/self/fd/{handle}", 0o700)
        opened = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=handle)
    except OSError:
        return None
    finally:
        os.close(handle)
    subfolders = []
    try:
        with os.scandir(opened) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    subfolders.append(entry.name)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.name, dir_fd=opened)
    except OSError:
        os.close(opened)
        return None
    return opened, subfolders


def _resolved(paths: tuple[str, ...]) -> list[str]:
    return [os.path.realpath(os.path.expanduser(path)) for path in paths]


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1
