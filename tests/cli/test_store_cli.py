"""`hookline store check` and `hookline store backup`, and damaged stores, through the real
console script on real SQLite files."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import test_cli
from store_files import damage, fill_store

from hookline.builtins.store import SQLiteTapeStore
from hookline.kernel.tape import TapeQuery

env = test_cli.env  # the fixture: an environment with a fresh hookline home
hookline = test_cli.hookline



def test_check_a_sound_store_and_back_it_up(env: dict[str, str], tmp_path: Path) -> None:
    assert hookline("run", "hello", env=env, cwd=tmp_path).returncode == 0
    store = tmp_path / "home" / "tapes.db"
    checked = hookline("store", "check", env=env, cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines() == [
        f"ok: {store}: 1 tape(s), 4 entries, schema version 2"]

    target = tmp_path / "backups" / "tapes-copy.db"
    backup = hookline("store", "backup", str(target), env=env, cwd=tmp_path)
    assert backup.returncode == 0, backup.stderr
    assert backup.stdout.strip() == (
        f"backed up {store} to {target}: 1 tape(s), 4 entries, integrity ok")
    again = hookline("store", "check", "--store", str(target), env=env, cwd=tmp_path)
    assert again.returncode == 0 and "4 entries" in again.stdout
    refused = hookline("store", "backup", str(target), env=env, cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"error: [invalid_input] {target} already exists; choose a new file name or remove "
        f"it first.")
    missing = hookline("store", "check", "--store", str(tmp_path / "none.db"), env=env,
                       cwd=tmp_path)
    # Not made yet (a new home) or mistyped: said so, with no advice to restore a backup.
    assert missing.returncode == 1 and "damaged" not in missing.stderr
    assert missing.stderr.startswith(f"no store at {tmp_path / 'none.db'}: hookline creates")


def test_a_damaged_store_is_reported_and_never_written(
    env: dict[str, str], tmp_path: Path
) -> None:
    store = tmp_path / "home" / "tapes.db"
    store.parent.mkdir(mode=0o700)  # private, as hookline makes it: no warning to show
    fill_store(store)
    damaged = damage(store)

    checked = hookline("store", "check", env=env, cwd=tmp_path)
    assert checked.returncode == 1
    lines = checked.stderr.splitlines()
    assert lines[0] == f"damaged: {store}" and len(lines) >= 3
    assert lines[-1].startswith("fix: restore the file from a backup")

    run = hookline("run", "hello", env=env, cwd=tmp_path)
    assert run.returncode == 1
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith(f"error: [config] Tape store {store} is damaged: ")
    assert "hookline store backup" in line and f"mv {store} {store}.damaged" in line

    # The gateway refuses to start on it instead of serving (and writing) into it.
    gateway = hookline("gateway", "--port", "0", env=env, cwd=tmp_path)
    assert gateway.returncode == 1
    assert f"Tape store {store} is damaged" in gateway.stderr
    assert store.read_bytes() == damaged


FULL_DISK = """
import os, subprocess, sys
store, hookline = sys.argv[1], sys.argv[2]
writer = (f"import os, sqlite3; conn = sqlite3.connect({store!r}); "
          "conn.execute('PRAGMA journal_mode=wal'); conn.execute('CREATE TABLE t(a)'); "
          "conn.execute('INSERT INTO t VALUES (1)'); conn.commit(); os._exit(0)")
subprocess.run([sys.executable, "-c", writer], check=True)  # its -wal stays, as if killed
os.unlink(store + "-shm")  # a reader must make it again, on a full disk
with open(os.path.join(os.path.dirname(store), "filler"), "wb") as filler:
    try:
        while True:
            filler.write(bytes(65536))
    except OSError:
        pass
done = subprocess.run([hookline, "store", "check", "--store", store], capture_output=True,
                      text=True)
print(done.returncode, done.stderr, sep="\\n", end="")
"""


def test_a_store_that_cannot_be_read_now_is_not_called_damaged(
        env: dict[str, str], tmp_path: Path) -> None:
    """On a full disk (a real one: a 2 MB tmpfs in a mount namespace of the test's own) the
    check cannot read a sound store: it says so, never "damaged" with advice to restore a
    backup, which would lose every turn since."""
    disk = tmp_path / "disk"
    disk.mkdir()
    hookline_script = str(Path(sys.executable).parent / "hookline")
    done = subprocess.run(
        ["unshare", "--map-root-user", "--mount", "sh", "-c",
         'mount -t tmpfs -o size=2m tmpfs "$1" && exec "$2" -c "$3" "$1/tapes.db" "$4"',
         "sh", str(disk), sys.executable, FULL_DISK, hookline_script],
        capture_output=True, text=True, env=env, timeout=120)
    status, *lines = done.stdout.splitlines()
    assert status == "1", done.stdout + done.stderr
    assert lines == [f"cannot read now: {disk}/tapes.db: disk I/O error",
                     "this says nothing of the file: free disk space, or wait for the other "
                     "process or the disk, and check again."]


WRITER = """
import sys
from hookline.builtins.store import SQLiteTapeStore
from hookline.kernel.tape import TapeEntry

store = SQLiteTapeStore(sys.argv[1])
n = 0
while True:
    n += 1
    store.append_many("live", [TapeEntry.new("event", {"n": n, "half": h}) for h in (1, 2)])
    print(n, flush=True)
"""


def test_backup_of_a_store_another_process_is_writing(env: dict[str, str], tmp_path: Path) -> None:
    store = tmp_path / "home" / "tapes.db"
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(WRITER), str(store)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None
        written = 0
        while written < 200:
            line = writer.stdout.readline()
            assert line, writer.stderr.read() if writer.stderr else ""
            written = int(line)
        target = tmp_path / "live-copy.db"
        backup = hookline("store", "backup", str(target), env=env, cwd=tmp_path)
        assert backup.returncode == 0, backup.stderr
        assert writer.poll() is None, "the writer kept going during the backup"
    finally:
        writer.kill()
        writer.communicate(timeout=30)
    with SQLiteTapeStore(target) as copy:
        entries = list(copy.fetch_all(TapeQuery("live")))
    # One consistent snapshot: whole batches, in order, at least what was acknowledged.
    count = len(entries) // 2
    assert count >= 200 and len(entries) == 2 * count
    assert [(e.payload["n"], e.payload["half"]) for e in entries] == [
        (n, h) for n in range(1, count + 1) for h in (1, 2)]


def test_a_store_url_on_a_closed_port_shows_no_password(env: dict[str, str],
                                                        tmp_path: Path) -> None:
    """Every spelling of a PostgreSQL password, given to the real commands with a port
    nobody listens on: the errors name the store, never the password (nor a piece of it
    the driver took for a host name)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"127.0.0.1:{port}/tapes"
    urls = [f"postgresql://u:s3cr%t!@{base}", f"postgresql://u:s3 cret@{base}",
            f"postgresql://u:pa@ssw0rd@{base}", f"postgresql://u:s3cret@{base}",
            f"postgresql://u@{base}?sslpassword=s3cret&sslmode=disable",
            f"postgresql://u@{base}?PASSWORD=s3cret", f"postgresql://u@{base}?passwd=s3cret"]
    for url in urls:
        for args, extra in ((["store", "check", "--store", url], {}),
                            (["run", "hi"], {"HOOKLINE_TAPE_STORE": url})):
            out = hookline(*args, env={**env, **extra}, cwd=tmp_path)
            assert out.returncode == 1, (url, out.stdout, out.stderr)
            shown = out.stdout + out.stderr
            assert "127.0.0.1" in shown, shown
            for secret in ("s3cr", "cret", "ssw0rd"):
                assert secret not in shown, (url, shown)
