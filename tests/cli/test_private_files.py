"""What hookline writes stays private from the other users of the machine, through the
real console script: a second real user (`nobody`, through setpriv, since the tests run as
root) tries to read the home, the tape store with its -wal and -shm, backups, copies,
archives; a config file holding a secret that others can read is refused; an old home
and store that others could read are tightened with one warning line each.

Everything happens under a folder others may enter (0755), as a home folder usually is:
pytest's own temporary folders are 0700, where nobody could read anything anyway. Every
test first shows that `nobody` does read a world-readable file there.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookline.builtins.store import SQLiteTapeStore
from hookline.kernel.tape import TapeEntry

HOOKLINE = shutil.which("hookline", path=str(Path(sys.executable).parent))
SETPRIV = shutil.which("setpriv")

pytestmark = pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0 or SETPRIV is None,
    reason="needs root and setpriv to act as a second user")


def as_nobody(*command: str) -> subprocess.CompletedProcess[str]:
    assert SETPRIV
    return subprocess.run([SETPRIV, "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           "--", *command], capture_output=True, text=True, timeout=30)


def nobody_reads(path: Path) -> bool:
    """Whether user nobody can read the file (or list the folder) at `path`."""
    command = ("ls", str(path)) if path.is_dir() else ("head", "-c", "1", str(path))
    return as_nobody(*command).returncode == 0


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder every user may enter, with a world-readable file `nobody` can read."""
    folder = Path(tempfile.mkdtemp(prefix="hookline-private-"))
    folder.chmod(0o755)
    (folder / "public.txt").write_text("anyone\n")
    (folder / "public.txt").chmod(0o644)
    assert nobody_reads(folder / "public.txt"), "the second user must be able to read here"
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def hookline(*args: str, home: Path, cwd: Path, umask: int = 0o022,
             **variables: str) -> subprocess.CompletedProcess[str]:
    assert HOOKLINE, "the hookline console script is not installed in this environment"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    # The offline model chosen on purpose: stderr then holds only the lines under test.
    environ.update(HOOKLINE_HOME=str(home), HOOKLINE_MODEL="offline")
    environ.update(variables)
    cwd.mkdir(exist_ok=True)
    return subprocess.run([HOOKLINE, *args], capture_output=True, text=True, env=environ,
                          cwd=cwd, timeout=120, umask=umask)


def loosen(folder: Path) -> None:
    """Open every folder under `folder` to all users, so that only files' modes protect
    them (as if the user had made the home 0755 again)."""
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)


def test_another_user_reads_nothing_hookline_wrote(shared: Path) -> None:
    home, workspace = shared / "home", shared / "ws"
    out = hookline("run", "--session", "private", "my secret is hunter2", home=home,
                   cwd=workspace)
    assert out.returncode == 0, out.stderr
    assert "warning:" not in out.stderr, "a fresh home is private from its creation"
    assert mode(home) == 0o700 and not nobody_reads(home)
    assert mode(home / "tapes.db") == 0o600

    backup = shared / "backups" / "2024" / "tapes-backup.db"  # new folders: 0700 each
    out = hookline("store", "backup", str(backup), home=home, cwd=workspace)
    assert out.returncode == 0, out.stderr
    copy = shared / "tapes-copy.db"  # in a folder others may enter
    out = hookline("store", "copy", str(home / "tapes.db"), str(copy), home=home, cwd=workspace)
    assert out.returncode == 0, out.stderr
    out = hookline("sessions", "archive", "private", "--yes", home=home, cwd=workspace)
    assert out.returncode == 0, out.stderr
    archives = sorted((home / "archive").glob("*.jsonl"))
    assert archives and "hunter2" in archives[0].read_text()

    assert mode(backup.parent.parent) == mode(backup.parent) == 0o700
    assert not nobody_reads(backup.parent.parent)
    loosen(home)
    loosen(backup.parent.parent)
    written = [home / "tapes.db", backup, copy, *archives]
    for path in written:
        assert mode(path) == 0o600, path
        assert not nobody_reads(path), f"{path} can be read by another user"
    assert nobody_reads(shared / "public.txt")


def test_the_wal_and_shm_files_are_as_private_as_the_store(shared: Path) -> None:
    database = shared / "tapes.db"
    old = os.umask(0o022)  # SQLite would make 0644 files under it
    try:
        with SQLiteTapeStore(database) as store:
            store.append("t", TapeEntry(0, "message", {"content": "hunter2"}, {}, ""))
            side = [shared / "tapes.db-wal", shared / "tapes.db-shm"]
            assert all(path.is_file() for path in side), "the store is open in WAL mode"
            for path in [database, *side]:
                assert mode(path) == 0o600, path
                assert not nobody_reads(path), f"{path} can be read by another user"
    finally:
        os.umask(old)


def test_an_old_home_and_store_others_could_read_are_tightened_once(shared: Path) -> None:
    home, workspace = shared / "home", shared / "ws"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    sqlite3.connect(home / "tapes.db").close()
    (home / "tapes.db").chmod(0o644)
    assert nobody_reads(home / "tapes.db")

    out = hookline("run", "hello", home=home, cwd=workspace)
    assert out.returncode == 0, out.stderr
    warnings = [line for line in out.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: the hookline home {home} could be read by other users (mode 0755); it "
        f"is now private to its owner (mode 0700)",
        f"warning: the tape store {home}/tapes.db could be read by other users (mode "
        f"0644); it is now private to its owner (mode 0600)",
    ]
    assert (mode(home), mode(home / "tapes.db")) == (0o700, 0o600)
    assert not nobody_reads(home)
    again = hookline("run", "hello", home=home, cwd=workspace)
    assert again.returncode == 0 and "warning:" not in again.stderr


def test_a_home_of_another_user_that_others_can_read_is_refused(shared: Path) -> None:
    home, workspace = shared / "home", shared / "ws"
    home.mkdir()
    home.chmod(0o755)
    os.chown(home, 65534, 65534)  # nobody's
    out = hookline("run", "hello", home=home, cwd=workspace)
    assert out.returncode == 1
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"error: [config] the hookline home {home} can be read by other "
                           f"users (mode 0755) and belongs to another user")
    assert f"run `chmod 700 {home}` as its owner" in line
    assert mode(home) == 0o755 and not (home / "tapes.db").exists(), "nothing was written"


def test_a_device_or_a_shared_folder_is_refused_never_changed(shared: Path) -> None:
    """As root the owner check passes for everything: `tape_store = "/dev/null"` or a home
    like `/tmp` must be refused, not made private to root (which breaks them for everyone)."""
    device = shared / "null"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    device.chmod(0o666)
    sticky = shared / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    link = shared / "linked.db"
    link.symlink_to(device)
    for variables, message in (
            ({"HOOKLINE_TAPE_STORE": str(device)},
             f"the tape store {device} is a character device, not a file"),
            ({"HOOKLINE_TAPE_STORE": str(link)},
             f"the tape store {link} is a character device, not a file"),
            ({"HOOKLINE_TAPE_STORE": str(sticky)}, f"the tape store {sticky} is a folder"),
            ({"HOOKLINE_HOME": str(sticky)},
             f"the hookline home {sticky} is a folder other users may write in (mode 1777)")):
        out = hookline("run", "hello", home=shared / "home", cwd=shared / "ws", **variables)
        assert out.returncode == 1, out.stderr
        assert f"error: [config] {message}" in out.stderr
        assert "set HOOKLINE_HOME (or tape_store) to a place of your own" in out.stderr
    assert (mode(device), mode(sticky)) == (0o666, 0o1777), "nothing was changed"
    assert os.listdir(sticky) == []


def test_a_shared_folder_that_is_no_hookline_home_is_refused(shared: Path) -> None:
    """`HOOKLINE_HOME=/srv` (or `.`) as root: a folder others read, holding other things,
    is not closed to them; an old home (its tape store there) is still made private."""
    project = shared / "project"
    project.mkdir()
    project.chmod(0o755)
    (project / "notes.txt").write_text("mine\n")
    out = hookline("run", "hello", home=project, cwd=shared / "ws")
    assert out.returncode == 1
    assert out.stderr.startswith(
        f"error: [config] the hookline home {project} can be read by other users (mode 0755) "
        f"and holds files that are not hookline's, so hookline will not make it private")
    assert mode(project) == 0o755 and sorted(os.listdir(project)) == ["notes.txt"]
    from hookline.builtins.channels.http.guard import TOKEN_FILE_NAME
    from hookline.builtins.config.table import CONFIG_NAME, TAPES_NAME
    from hookline.builtins.plugin import PROCESS_RECORDS
    from hookline.builtins.privacy.files import HOME_MARKS

    assert {TAPES_NAME, TOKEN_FILE_NAME, PROCESS_RECORDS, CONFIG_NAME} == HOME_MARKS


def test_a_home_that_cannot_be_made_or_written_is_one_clear_error(
        shared: Path, nobody_python: list[str]) -> None:
    """A service account whose home is `/nonexistent`, or a home it may not write: the
    error names the home and the fix, before anything is written (no log line first)."""
    closed = shared / "closed"
    closed.mkdir(mode=0o500)
    os.chown(closed, 65534, 65534)
    (shared / "ws").mkdir()
    os.chown(shared / "ws", 65534, 65534)
    for home, why in ((Path("/nonexistent/hookline"), "cannot be made (Permission denied)"),
                      (closed, "cannot be written (Permission denied), and hookline writes "
                               "there even to read its sessions")):
        environ = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
        environ.update(HOOKLINE_HOME=str(home), HOOKLINE_MODEL="offline")
        for command in (["run", "hello"], ["sessions", "list"]):
            out = subprocess.run([*nobody_python, *command], capture_output=True, text=True,
                                 env=environ, cwd=shared / "ws", timeout=120)
            assert out.returncode == 1, out.stderr
            assert out.stderr.splitlines() == [
                f"error: [config] the hookline home {home} {why}: make it writable, or set "
                f"HOOKLINE_HOME to a folder you can write in"], out.stderr


@pytest.mark.parametrize("secret", [
    'api_key = "sk-live-123"',
    'http_token = "' + "t" * 40 + '"',
    'tape_store = "postgresql://hookline:pw@127.0.0.1:5432/tapes"',
    'tape_store = "postgresql://hookline@127.0.0.1/tapes?password=pw"',
    'tape_store = "postgresql://hookline@127.0.0.1/tapes?sslpassword=pw"',
    '[mcp_servers.gh]\nurl = "https://mcp.invalid/mcp"\n'
    'headers = { Authorization = "Bearer sk-live-9" }',
    '[mcp_servers.gh]\nurl = "https://bot:pw@mcp.invalid/mcp"',
    '[mcp_servers.gh]\ncommand = ["gh-mcp"]\nenv = { GITHUB_TOKEN = "ghp_sk-live-7" }',
])
def test_a_config_file_with_a_secret_others_can_read_is_refused(shared: Path,
                                                               secret: str) -> None:
    home, workspace = shared / "home", shared / "ws"
    home.mkdir(mode=0o700)
    config = home / "config.toml"
    config.write_text(f'model = "offline"\n{secret}\n')
    config.chmod(0o644)
    out = hookline("run", "hello", home=home, cwd=workspace)
    assert out.returncode == 1
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"error: [config] The config file {config} holds ")
    assert f"and other users can read it (mode 0644); run `chmod 600 {config}`." in line
    assert "sk-live" not in line and "pw" not in line.replace(str(config), "")

    config.chmod(0o600)  # the fix the line gives
    if "tape_store" not in secret and "mcp" not in secret:  # (no server needed for those)
        assert hookline("run", "hello", home=home, cwd=workspace).returncode == 0


def test_a_config_file_without_a_secret_may_be_readable(shared: Path) -> None:
    home, workspace = shared / "home", shared / "ws"
    home.mkdir(mode=0o700)
    config = home / "config.toml"
    config.write_text('model = "offline"\napi_key_env = "MY_KEY"\ntape_store = "t.db"\n')
    config.chmod(0o644)
    out = hookline("run", "hello", home=home, cwd=workspace)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize(("umask", "expected"), [(0o077, 0o600), (0o022, 0o644),
                                                  (0o002, 0o664)])
def test_fs_write_creates_files_under_the_umask(shared: Path, umask: int,
                                                expected: int) -> None:
    home, workspace = shared / "home", shared / "ws"
    tool = '/tool fs_write {"path": "notes/new.txt", "content": "hunter2"}'
    out = hookline("run", tool, home=home, cwd=workspace, umask=umask)
    assert out.returncode == 0, out.stderr
    assert (workspace / "notes" / "new.txt").read_text() == "hunter2"
    assert mode(workspace / "notes" / "new.txt") == expected
    assert nobody_reads(workspace / "notes" / "new.txt") is bool(expected & 0o004)

    # An existing file keeps its mode, through fs_write and fs_edit alike.
    (workspace / "kept.txt").write_text("old text")
    (workspace / "kept.txt").chmod(0o640)
    for tool in ('/tool fs_write {"path": "kept.txt", "content": "new text"}',
                 '/tool fs_edit {"path": "kept.txt", "old": "new", "new": "newer"}'):
        out = hookline("run", tool, home=home, cwd=workspace, umask=umask)
        assert out.returncode == 0, out.stderr
    assert (workspace / "kept.txt").read_text() == "newer text"
    assert mode(workspace / "kept.txt") == 0o640
