"""What fs.write and fs.edit may replace: a file a command could write (`>`), never a
read-only one nor another user's (its owner would lose it), and, for an edit, only the
content it read: another program's write since is kept and the edit refused."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_file_safety import refused, tool

from hookline.builtins.host.files import write_file
from hookline.kernel.errors import HooklineError

ROOT = os.geteuid() == 0
NOBODY = 65534


@pytest.mark.anyio
async def test_a_read_only_file_is_neither_written_nor_edited(tmp_path: Path) -> None:
    path = tmp_path / "generated.py"
    path.write_text("GENERATED = 1\n")
    path.chmod(0o444)
    for name, arguments in [("fs.write", {"content": "x"}),
                            ("fs.edit", {"old": "1", "new": "2", "replace_all": False})]:
        error = await refused(name, tmp_path, path="generated.py", **arguments)
        assert "'generated.py' is read-only (mode 0444)" in error.message, error.message
        assert "chmod u+w" in error.message
    assert path.read_text() == "GENERATED = 1\n" and stat.S_IMODE(path.stat().st_mode) == 0o444


@pytest.mark.anyio
@pytest.mark.skipif(not ROOT, reason="a file of another user is made by root")
async def test_root_keeps_another_user_s_file_theirs(tmp_path: Path) -> None:
    """Root writes what nobody let others write, and the file stays nobody's; what nobody
    kept to itself is refused, as a command without root's capabilities is."""
    shared, private = tmp_path / "shared.txt", tmp_path / "private.txt"
    for path, mode in ((shared, 0o666), (private, 0o600)):
        path.write_text("theirs\n")
        os.chown(path, NOBODY, NOBODY)
        path.chmod(mode)
    assert await tool("fs.write", tmp_path, path="shared.txt", content="ours\n")
    info = shared.stat()
    assert shared.read_text() == "ours\n" and (info.st_uid, info.st_gid) == (NOBODY, NOBODY)
    assert stat.S_IMODE(info.st_mode) == 0o666
    error = await refused("fs.write", tmp_path, path="private.txt", content="ours\n")
    assert f"belongs to another user (uid {NOBODY}, mode 0600)" in error.message, error.message
    assert private.read_text() == "theirs\n" and private.stat().st_uid == NOBODY


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder everyone may write in (as /tmp is), outside /tmp, holding root's 0666
    file; nobody may enter it."""
    folder = Path(tempfile.mkdtemp(prefix="hookline-shared-", dir="/var/tmp"))
    folder.chmod(0o777)
    (folder / "notes.txt").write_text("root's notes\n")
    (folder / "notes.txt").chmod(0o666)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(not ROOT or shutil.which("setpriv") is None,
                    reason="a second user is made by root with setpriv")
def test_a_second_user_does_not_take_over_a_file_it_may_write(shared_folder: Path) -> None:
    """nobody may write root's 0666 file, but replacing it would make it nobody's: the
    file tools refuse; a command (`>`) writes it in place, which is the user's to do."""
    code = ("import asyncio, sys; from hookline.builtins.host.environment import "
            "LocalEnvironment; env = LocalEnvironment(sys.argv[1]); "
            "asyncio.run(env.write_text('notes.txt', 'nobody was here'))")
    done = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           "--", "/usr/bin/python3", "-c", code, str(shared_folder)],
                          capture_output=True, text=True,
                          env={"PYTHONPATH": _readable_checkout(shared_folder)})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "belongs to another user (uid 0, mode 0666)" in done.stderr, done.stderr
    assert (shared_folder / "notes.txt").read_text() == "root's notes\n"
    assert (shared_folder / "notes.txt").stat().st_uid == 0


def _readable_checkout(folder: Path) -> str:
    """A copy of the hookline package nobody can import (with the environment's site
    packages after it), in `folder`."""
    import sysconfig

    import hookline

    package = folder / "lib" / "hookline"
    source = Path(hookline.__file__).parent
    shutil.copytree(source, package, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("kernel", "builtins", "cli", "testing"):
        real = Path(__import__(f"hookline.{name}", fromlist=["x"]).__file__ or "").parent
        shutil.copytree(real, package / name, ignore=shutil.ignore_patterns("__pycache__"),
                        dirs_exist_ok=True)
    for path in (folder / "lib", *(folder / "lib").rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return f"{folder / 'lib'}:{sysconfig.get_paths()['purelib']}"


def test_an_edit_keeps_what_another_program_wrote_since_it_read(tmp_path: Path) -> None:
    path = tmp_path / "app.log"
    path.write_bytes(b"header\nline 1\nline 2 (written after the edit read the file)\n")
    with pytest.raises(HooklineError) as caught:
        write_file(str(tmp_path), str(path), "app.log", b"HEADER\nline 1\n",
                   expected=b"header\nline 1\n")
    assert "'app.log' changed while it was being edited" in caught.value.message
    assert path.read_bytes().endswith(b"(written after the edit read the file)\n")
    assert [entry.name for entry in tmp_path.iterdir()] == ["app.log"], "no temporary left"
    write_file(str(tmp_path), str(path), "app.log", b"new\n", expected=path.read_bytes())
    assert path.read_bytes() == b"new\n"
