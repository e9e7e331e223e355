"""The private folders of the sandbox (a session's TMPDIR, a background command's): a root
another user made is refused, the folders of killed processes are removed by the next one
made, and what commands closed in theirs does not keep it on disk."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hookline.builtins.host import sandbox
from hookline.kernel.errors import HooklineError


def test_a_private_root_made_by_someone_else_is_refused_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user who makes /tmp/hookline-<uid> first (or a folder others may enter)
    would read every session's files there: refused, never used."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    squatted = tmp_path / f"hookline-{os.getuid()}"
    squatted.mkdir(mode=0o755)
    squatted.chmod(0o755)
    with pytest.raises(HooklineError, match="is not a private folder of this user") as caught:
        sandbox.private_temp_root()
    assert "Remove it, or set TMPDIR" in caught.value.message
    squatted.chmod(0o700)
    assert sandbox.private_temp_root() == str(squatted)


def test_folders_of_killed_processes_are_removed_when_another_is_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process killed by SIGKILL cannot remove its private folder: the next one made
    removes it, once old enough, while a folder a live process holds stays."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nfrom hookline.builtins.host.sandbox import "
         "PrivateFolder\nfolder = PrivateFolder('hookline-tool-')\n"
         "open(folder.path + '/written', 'w').write('a secret')\nprint(folder.path, "
         "flush=True)\ntime.sleep(60)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert child.stdout is not None
    killed = Path(child.stdout.readline().strip())
    live = sandbox.PrivateFolder("hookline-bg-")
    recent = Path(sandbox.private_temp_root()) / "hookline-tool-recent"
    recent.mkdir()
    try:
        child.send_signal(signal.SIGKILL)
        child.wait()
        old = time.time() - sandbox.ABANDONED_AFTER - 1
        for folder in (killed, Path(live.path)):
            os.utime(folder, (old, old))
        assert (killed / "written").exists()
        made = sandbox.PrivateFolder("hookline-tool-")
        assert not killed.exists()
        assert os.path.isdir(live.path) and recent.is_dir() and os.path.isdir(made.path)
        made.remove()
        made.remove()  # a second time is harmless
        assert not os.path.exists(made.path)
    finally:
        live.remove()
        child.stdout.close()


def test_a_private_folder_whose_commands_closed_its_folders_is_removed(tmp_path: Path) -> None:
    """`chmod 000` on folders of the private TMPDIR kept them, with what they hold, from a
    user other than root: they are opened to their owner first. A link among them leads
    nowhere: what it points to keeps its mode."""
    base = Path(tempfile.mkdtemp(dir="/var/tmp"))  # a place `nobody` may enter
    try:
        base.chmod(0o755)
        outside = tmp_path / "outside"
        outside.mkdir(mode=0o755)
        outside.chmod(0o755)
        private = base / "hookline-tool-x"
        inner = private / "k" / "i"
        inner.mkdir(parents=True)
        (inner / "secret").write_text("left behind")
        (private / "k" / "out").symlink_to(outside)
        user = 65534 if os.getuid() == 0 else os.getuid()
        for path in (base, private, *private.rglob("*")):
            os.chown(path, user, user, follow_symlinks=False)
        pid = os.fork()
        if pid == 0:  # the removal as a user without root's override
            try:
                if os.getuid() == 0:
                    os.setgroups([])
                    os.setgid(65534)
                    os.setuid(65534)
                inner.chmod(0)
                (private / "k").chmod(0)
                sandbox._remove_tree(str(private))
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        assert not private.exists()
        assert outside.stat().st_mode & 0o777 == 0o755
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_tree_deeper_than_a_path_name_is_removed_and_starts_stay_possible(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that makes 3,000 nested folders in its TMPDIR (deeper than a recursive
    removal or PATH_MAX allows) and dates the folder back: the next start removes it, and
    the start itself does not fail."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    left = Path(sandbox.private_temp_root()) / "hookline-tool-deep"
    left.mkdir()
    folder = os.open(left, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(3000):
        os.mkdir("a", dir_fd=folder)
        os.close(os.open("f", os.O_CREAT | os.O_WRONLY, dir_fd=folder))
        inner = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=folder)
        os.close(folder)
        folder = inner
    os.close(os.open("secret", os.O_CREAT | os.O_WRONLY, dir_fd=folder))
    os.close(folder)
    old = time.time() - sandbox.ABANDONED_AFTER - 1
    os.utime(left, (old, old))
    made = sandbox.PrivateFolder("hookline-tool-")
    try:
        assert not left.exists()
    finally:
        made.remove()
        if left.exists():  # pytest's own removal of tmp_path cannot
            sandbox._remove_tree(str(left))
    assert not os.path.exists(made.path)


def test_a_folder_moved_while_it_is_removed_stops_the_removal_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process still running moves the folder being emptied two levels up: going up from
    it would reach other folders, and the names left to remove (queued from the folders
    above it) must never be applied there."""
    private = tmp_path / "hookline-tool-x"
    deep = private / "a" / "b" / "f"
    deep.mkdir(parents=True)
    (deep / "file").write_text("x")
    for sibling in (private / "a" / "victim", private / "victim", tmp_path / "victim"):
        sibling.mkdir(exist_ok=True)
        (sibling / "kept").write_text("kept")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "victim").mkdir()
    (tmp_path / "a" / "victim" / "kept").write_text("kept")
    real = sandbox._emptied_of_files

    def moved_meanwhile(folder: int, name: str) -> tuple[int, list[str]] | None:
        entered = real(folder, name)
        if entered is None:
            return None
        if name == "f" and deep.exists():
            os.rename(deep, private / "f")  # now `..` of it is `private`, not `b`
        opened, subfolders = entered  # each `victim` queued behind the way down to `f`
        return opened, sorted(subfolders, key=lambda sub: sub != "victim")

    monkeypatch.setattr(sandbox, "_emptied_of_files", moved_meanwhile)
    sandbox._remove_tree(str(private))
    assert (tmp_path / "victim" / "kept").read_text() == "kept"
    assert (tmp_path / "a" / "victim" / "kept").read_text() == "kept"
