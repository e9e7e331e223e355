"""The file tools and LocalEnvironment on files that could hang, exhaust memory or leak:
FIFOs, sockets and devices, huge files, hard links to files outside the workspace.

Everything here uses real files: a FIFO made with mkfifo, a bound Unix socket, the host's
/dev/null and /dev/zero, sparse 1 GiB files made with truncate. Memory and time of a read
are measured in a fresh subprocess (peak RSS from getrusage), against the limits the issue
names: 50 MB of extra memory and 1 s.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import socket
import stat
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookline.builtins.config.limits import MAX_EDIT_BYTES
from hookline.builtins.host import files as files_module
from hookline.builtins.host import tools as tools_module
from hookline.builtins.host.environment import LocalEnvironment
from hookline.builtins.host.files import read_line_slice
from hookline.builtins.host.tools import MAX_READ_CHARS, builtin_tools
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tools import ToolContext

pytestmark = pytest.mark.skipif(os.name != "posix", reason="FIFOs and sockets are POSIX")

GIB = 1024 ** 3
MEMORY_LIMIT_KIB = 50 * 1024
TIME_LIMIT = 1.0
HANG_LIMIT = 10.0
"""A refusal is immediate; this only keeps a regression from hanging the suite."""


@pytest.fixture
def mkfifo() -> Iterator[Callable[[Path], None]]:
    """mkfifo, with a guard: should a regression leave a reader blocked on one of these
    FIFOs, a writer comes and goes after HANG_LIMIT, so the reader sees the end of the
    file and the test fails instead of hanging (a worker thread cannot be cancelled)."""
    fifos: list[Path] = []
    finished = threading.Event()

    def release() -> None:
        if finished.wait(HANG_LIMIT):
            return
        while not finished.is_set():
            for fifo in fifos:
                with contextlib.suppress(OSError):  # ENXIO: nobody is reading it
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            finished.wait(0.05)

    threading.Thread(target=release, daemon=True).start()

    def make(path: Path) -> None:
        os.mkfifo(path)
        fifos.append(path)

    yield make
    finished.set()


async def tool(name: str, workspace: Path, **arguments: Any) -> str:
    tools = {item.name: item for item in builtin_tools()}
    context = ToolContext(state={"_runtime_workspace": str(workspace)})
    with anyio.fail_after(HANG_LIMIT):
        return await tools[name].invoke(arguments, context)


async def refused(name: str, workspace: Path, **arguments: Any) -> HooklineError:
    with pytest.raises(HooklineError) as caught:
        await tool(name, workspace, **arguments)
    return caught.value


# -- FIFOs, sockets, devices -------------------------------------------------------------


@pytest.mark.anyio
async def test_a_fifo_is_refused_by_every_file_tool(tmp_path: Path, mkfifo: Any) -> None:
    mkfifo(tmp_path / "f")
    for name, arguments, action in [
        ("fs.read", {}, "read"),
        ("fs.read", {"offset": 2, "limit": 1}, "read"),
        ("fs.edit", {"old": "a", "new": "b"}, "read"),
        ("fs.write", {"content": "x"}, "write"),
    ]:
        error = await refused(name, tmp_path, path="f", **arguments)
        assert error.kind is ErrorKind.invalid_input
        assert error.message == (
            f"cannot {action} 'f': it is a FIFO (named pipe), not a regular file; the file "
            f"tools only read and write regular files"
        )
    assert stat.S_ISFIFO(os.lstat(tmp_path / "f").st_mode), "fs.write left the FIFO alone"
    assert sorted(os.listdir(tmp_path)) == ["f"], "no temporary file left behind"


@pytest.mark.anyio
async def test_a_link_to_a_fifo_names_the_fifo(tmp_path: Path, mkfifo: Any) -> None:
    (tmp_path / "pipes").mkdir()
    mkfifo(tmp_path / "pipes" / "f")
    (tmp_path / "link").symlink_to(tmp_path / "pipes" / "f")
    env = LocalEnvironment(tmp_path)
    for read in (env.read_text, env.read_bytes, env.read_lines):
        with anyio.fail_after(HANG_LIMIT), pytest.raises(HooklineError) as caught:
            await read("link")
        assert "cannot read 'pipes/f': it is a FIFO (named pipe)" in caught.value.message
        assert caught.value.details == {"path": "pipes/f", "type": "a FIFO (named pipe)"}


@pytest.mark.anyio
async def test_a_socket_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a short relative address: Unix socket paths are limited
    with socket.socket(socket.AF_UNIX) as server:
        server.bind("s")
        error = await refused("fs.read", tmp_path, path="s")
        assert "cannot read 's': it is a socket, not a regular file" in error.message
        error = await refused("fs.write", tmp_path, path="s", content="x")
        assert "cannot write 's': it is a socket" in error.message
        assert stat.S_ISSOCK(os.lstat(tmp_path / "s").st_mode)


@pytest.mark.anyio
async def test_devices_are_refused() -> None:
    # /dev as the workspace: the host's own devices are inside it. Only reads are tried,
    # so that a regression could never replace a device node.
    for device in ("null", "zero"):
        error = await refused("fs.read", Path("/dev"), path=device, limit=1)
        assert error.message.startswith(
            f"cannot read {device!r}: it is a character device, not a regular file")


@pytest.mark.anyio
async def test_the_type_is_checked_on_the_opened_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mkfifo: Any
) -> None:
    """A FIFO swapped in after the first look is still refused: the look that decides is
    fstat on the descriptor that was opened (with O_NONBLOCK, so the open cannot hang)."""
    mkfifo(tmp_path / "f")
    (tmp_path / "decoy.txt").write_text("regular\n")
    real_lstat = os.lstat

    def swapped(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if os.fspath(path) == str(tmp_path / "f"):
            return real_lstat(tmp_path / "decoy.txt")  # it looked regular when checked
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(files_module.os, "lstat", swapped)
    error = await refused("fs.read", tmp_path, path="f")
    assert "it is a FIFO (named pipe), not a regular file" in error.message


@pytest.mark.anyio
async def test_a_symlink_swapped_in_after_resolving_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("secret\n")
    (workspace / "link").symlink_to(tmp_path / "secret.txt")
    env = LocalEnvironment(workspace)
    # As if "link" had been a regular file when resolved, and became a link just after.
    monkeypatch.setattr(env, "resolve_path", lambda path: str(workspace / "link"))
    with pytest.raises(HooklineError) as caught:
        await env.read_text("link")
    assert caught.value.kind is ErrorKind.temporary
    assert "its path was changed to a symbolic link after it was resolved; try again" in (
        caught.value.message)
    assert "secret" not in caught.value.message


@pytest.mark.anyio
async def test_a_folder_swapped_for_a_link_after_resolving_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race of test_sandbox_policy's swapping command, made certain: the path was
    resolved while `dir` was a folder, and it is a link to an outside folder now."""
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (workspace / "dir").symlink_to(outside)
    env = LocalEnvironment(workspace)
    monkeypatch.setattr(env, "resolve_path", lambda path: str(workspace / "dir" / path))
    for call in (env.read_text("secret.txt"), env.write_text("planted.txt", "x")):
        with pytest.raises(HooklineError) as caught:
            await call
        assert caught.value.kind is ErrorKind.temporary
        assert str(outside) not in caught.value.message
        assert "its path was changed to a symbolic link after it was resolved" in (
            caught.value.message)
    assert sorted(path.name for path in outside.iterdir()) == ["secret.txt"]


@pytest.mark.anyio
async def test_links_that_lead_in_a_loop_are_said_to_be_one(tmp_path: Path) -> None:
    """No file is there, now or later: not a race to try again."""
    (tmp_path / "self").symlink_to("self")
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    for path, name in [("self", "fs.read"), ("a", "fs.read"), ("self/x", "fs.read"),
                       ("self/x", "fs.write")]:
        arguments = {"content": "x"} if name == "fs.write" else {}
        error = await refused(name, tmp_path, path=path, **arguments)
        assert error.kind is ErrorKind.invalid_input, (path, error)
        assert "its symbolic links lead in a loop" in error.message, (path, error.message)


@pytest.mark.anyio
async def test_a_file_where_a_folder_should_be_is_said(tmp_path: Path) -> None:
    (tmp_path / "notes").write_text("a file\n")
    env = LocalEnvironment(tmp_path)
    with pytest.raises(NotADirectoryError, match="a parent path is a file"):
        await env.write_text("notes/today.txt", "x")
    with pytest.raises(NotADirectoryError):
        await env.read_text("notes/today.txt")


def test_a_fifo_named_agents_md_does_not_hang_the_system_prompt(tmp_path: Path,
                                                                mkfifo: Any) -> None:
    from hookline.kernel import Framework

    framework = Framework(tmp_path)
    framework.load_hooks()
    mkfifo(tmp_path / "AGENTS.md")
    prompts: list[str] = []
    worker = threading.Thread(target=lambda: prompts.append(framework.get_system_prompt(
        "hi", {"_runtime_workspace": str(tmp_path)})), daemon=True)
    worker.start()
    worker.join(HANG_LIMIT)
    assert prompts and "AGENTS.md" not in prompts[0]
    # A symbolic link to a regular file inside the workspace is still read.
    os.unlink(tmp_path / "AGENTS.md")
    (tmp_path / "CLAUDE.md").write_text("Use tabs.\n")
    (tmp_path / "AGENTS.md").symlink_to("CLAUDE.md")
    prompt = framework.get_system_prompt("hi", {"_runtime_workspace": str(tmp_path)})
    assert prompt.endswith("\n\nAGENTS.md:\nUse tabs.")


# -- hard links --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_hard_links_are_not_read_and_writes_keep_the_other_name(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("top secret\n")
    os.link(outside, workspace / "notes.txt")
    for name, arguments in [("fs.read", {}), ("fs.read", {"limit": 1}),
                            ("fs.edit", {"old": "top", "new": "no"})]:
        error = await refused(name, workspace, path="notes.txt", **arguments)
        assert error.kind is ErrorKind.invalid_input
        assert error.message.startswith(
            "cannot read 'notes.txt': it has 2 hard links, and a hard link may be a name "
            "for a file outside the workspace")
        assert error.message.endswith("read it with the shell tool")
        assert "top secret" not in error.message
    assert outside.read_text() == "top secret\n"
    # fs.write replaces the workspace's name only: the outside file keeps its content.
    assert await tool("fs.write", workspace, path="notes.txt", content="mine\n") == (
        "wrote 5 bytes to 'notes.txt'")
    assert outside.read_text() == "top secret\n" and outside.stat().st_nlink == 1
    assert await tool("fs.read", workspace, path="notes.txt") == "mine\n"


@pytest.mark.anyio
@pytest.mark.skipif(os.geteuid() != 0, reason="only root's rights reach past the modes")
async def test_as_root_the_file_tools_reach_no_more_than_a_command(tmp_path: Path) -> None:
    """A command run by root in the sandbox has no capabilities, so another user's private
    file or folder stays closed to it; the file tools, run with root's, keep to the same
    modes. A file open to others is read as before."""
    workspace = tmp_path / "ws"
    (workspace / "theirs").mkdir(parents=True)
    (workspace / "theirs" / "private.txt").write_text("their secret\n")
    (workspace / "theirs" / "shared.txt").write_text("for everyone\n")
    os.chmod(workspace / "theirs" / "private.txt", 0o600)
    for path in ("theirs", "theirs/private.txt", "theirs/shared.txt"):
        os.chown(workspace / path, 65534, 65534)
    for name, arguments in [("fs.read", {}), ("fs.edit", {"old": "their", "new": "my"})]:
        error = await refused(name, workspace, path="theirs/private.txt", **arguments)
        assert "Permission denied" in error.message, error.message
    for path in ("theirs/new.txt", "theirs/made/new.txt"):
        error = await refused("fs.write", workspace, path=path, content="x")
        assert "Permission denied" in error.message, error.message
    assert await tool("fs.read", workspace, path="theirs/shared.txt") == "for everyone\n"
    assert sorted(os.listdir(workspace / "theirs")) == ["private.txt", "shared.txt"]
    assert (workspace / "theirs" / "private.txt").read_text() == "their secret\n"


# -- reading slices, bad bytes -----------------------------------------------------------


@pytest.mark.anyio
async def test_bad_bytes_are_replaced_and_said_so(tmp_path: Path) -> None:
    (tmp_path / "mixed.txt").write_bytes(b"caf\xc3\xa9 ok\nbad \xff\xfe\nend")
    assert await tool("fs.read", tmp_path, path="mixed.txt") == (
        "café ok\nbad \ufffd\ufffd\nend\n"
        "[2 byte(s) that are not valid UTF-8 are shown as \ufffd]")
    assert await tool("fs.read", tmp_path, path="mixed.txt", limit=1) == (
        "café ok\n[lines 1-1 of 3 in 'mixed.txt']")


@pytest.mark.anyio
async def test_a_cut_inside_a_long_line_says_which_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools_module, "MAX_READ_CHARS", 8)
    (tmp_path / "long.txt").write_text("one\ntwo two two two\nthree\n")
    assert await tool("fs.read", tmp_path, path="long.txt", offset=1, limit=2) == (
        "one\ntwo \n[truncated at 8 characters in line 2; read 'long.txt' with offset 2 to "
        "see the rest]\n[lines 1-2 of 3 in 'long.txt']")


@pytest.mark.anyio
async def test_another_environment_gets_the_same_slices(tmp_path: Path) -> None:
    """An environment that is not local is read whole through its read_text, then sliced
    by the same code, so the notes are the same."""
    from hookline.kernel.environment import Environment

    class Memory(Environment):
        def __init__(self) -> None:
            super().__init__()
            self.files = {"a.txt": "one\ntwo\nthree\n"}

        async def spawn(self, command: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

        async def read_text(self, path: Any) -> str:
            return self.files[str(path)]

        async def write_text(self, path: Any, content: str) -> None:
            self.files[str(path)] = content

        async def run_code(self, code: str, **kwargs: Any) -> None:
            raise NotImplementedError

    tools = {item.name: item for item in builtin_tools()}
    context = ToolContext(state={"_runtime_environment": Memory()})
    text = await tools["fs.read"].invoke({"path": "a.txt", "offset": 2, "limit": 1}, context)
    assert text == "two\n[lines 2-2 of 3 in 'a.txt']"


def _reference(data: bytes, offset: int, limit: int | None, max_chars: int) -> tuple:
    """What a slice must be, computed the simple way: everything in memory."""
    lines = [line for line in re.split(b"(?<=\n)", data) if line]
    chosen = lines[offset - 1:] if limit is None else lines[offset - 1:offset - 1 + limit]
    text = b"".join(chosen).decode("utf-8", "surrogateescape")
    truncated = len(text) > max_chars
    text, replaced = re.subn("[\udc80-\udcff]", "\ufffd", text[:max_chars])
    return text, len(lines), truncated, replaced


@settings(max_examples=300, deadline=None)
@given(
    data=st.lists(st.sampled_from([b"a", b"\n", b"\xc3\xa9", b"\xe2\x82\xac", b"\xff",
                                   b"\xc3", b"\r", b"\x00"]), max_size=60).map(b"".join),
    offset=st.integers(1, 12),
    limit=st.none() | st.integers(1, 12),
    max_chars=st.integers(0, 40),
    chunk=st.integers(1, 9),
)
def test_slices_match_an_in_memory_reference(data: bytes, offset: int, limit: int | None,
                                             max_chars: int, chunk: int) -> None:
    """Chunks as small as one byte split lines, characters and invalid sequences anywhere:
    the streamed slice is still exactly the in-memory one."""
    original = files_module._SLICE_CHUNK
    files_module._SLICE_CHUNK = chunk
    try:
        piece = read_line_slice(io.BytesIO(data), offset, limit, max_chars)
    finally:
        files_module._SLICE_CHUNK = original
    text, lines, truncated, replaced = _reference(data, offset, limit, max_chars)
    assert (piece.text, piece.replaced, piece.truncated) == (text, replaced, truncated)
    assert (piece.first, piece.lines, piece.complete) == (offset, lines, True)
    shown = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    assert piece.last == offset - 1 + shown


# -- huge files: memory and time independent of the size ---------------------------------

MEASURE = textwrap.dedent('''
    import asyncio, json, resource, sys, time
    from hookline.builtins.host.tools import builtin_tools
    from hookline.kernel.tools import ToolContext

    workspace, name, arguments = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    tools = {tool.name: tool for tool in builtin_tools()}
    context = ToolContext(state={"_runtime_workspace": workspace})

    async def main():
        await tools["fs.read"].invoke({"path": "warm.txt"}, context)  # imports, threads
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        try:
            text, error = await tools[name].invoke(arguments, context), None
        except Exception as exc:
            text, error = "", getattr(exc, "message", repr(exc))
        seconds = time.perf_counter() - start
        extra = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(json.dumps({"seconds": seconds, "extra_kib": extra, "chars": len(text),
                          "head": text[:40], "tail": text[-400:], "error": error}))

    asyncio.run(main())
''')


@pytest.fixture(scope="module")
def huge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with 1 GiB sparse files: all zero bytes, and lines then zero bytes."""
    root = tmp_path_factory.mktemp("huge")
    (root / "warm.txt").write_text("warm\n")
    with open(root / "sparse.bin", "wb") as handle:
        handle.truncate(GIB)
    with open(root / "lines.txt", "wb") as handle:
        handle.write(b"".join(b"line %d\n" % number for number in range(1, 500_001)))
        handle.truncate(GIB)
    return root


def measure(workspace: Path, name: str, **arguments: Any) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", MEASURE, str(workspace), name,
                           json.dumps(arguments)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("fs.read", {"path": "sparse.bin", "limit": 1},
         f"[truncated at {MAX_READ_CHARS} characters in line 1, which is longer than that"),
        ("fs.read", {"path": "sparse.bin"}, f"[truncated at {MAX_READ_CHARS} characters"),
        ("fs.read", {"path": "lines.txt", "limit": 2}, "[lines 1-2 of at least "),
        ("fs.read", {"path": "lines.txt", "offset": 400_000, "limit": 2},
         "[lines 400000-400001 of at least "),
    ],
    ids=["sparse-limit-1", "sparse-whole", "text-2-lines", "text-far-offset"],
)
def test_reading_a_slice_of_a_1_gib_file_is_cheap(huge: Path, name: str,
                                                  arguments: dict[str, Any],
                                                  expected: str) -> None:
    figures = measure(huge, name, **arguments)
    assert figures["error"] is None, figures
    assert expected in figures["tail"], figures
    assert figures["extra_kib"] < MEMORY_LIMIT_KIB, figures
    assert figures["seconds"] < TIME_LIMIT, figures
    if arguments["path"] == "lines.txt":
        first = arguments.get("offset", 1)
        assert figures["head"].startswith(f"line {first}\nline {first + 1}\n[lines"), figures
    else:
        assert figures["chars"] > MAX_READ_CHARS, "the cap, then the notes"


def test_editing_a_huge_file_is_refused_and_writing_over_it_is_cheap(huge: Path) -> None:
    figures = measure(huge, "fs.edit", path="sparse.bin", old="a", new="b")
    assert figures["error"] == (
        f"fs.edit: 'sparse.bin' is {GIB:,} bytes, more than the {MAX_EDIT_BYTES:,} bytes "
        f"fs.edit works on; change a file this large with the shell tool (sed -i, a script), "
        f"which does not load it whole")
    assert figures["extra_kib"] < MEMORY_LIMIT_KIB and figures["seconds"] < TIME_LIMIT
    target = huge / "replace-me.bin"
    with open(target, "wb") as handle:
        handle.truncate(GIB)
    figures = measure(huge, "fs.write", path="replace-me.bin", content="small\n")
    assert figures["error"] is None and figures["head"] == "wrote 6 bytes to 'replace-me.bin'"
    assert figures["extra_kib"] < MEMORY_LIMIT_KIB and figures["seconds"] < TIME_LIMIT
    assert target.read_bytes() == b"small\n"


@pytest.mark.anyio
async def test_edit_works_up_to_the_limit_and_notices_growth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools_module, "MAX_EDIT_BYTES", 10)
    (tmp_path / "ten.txt").write_text("0123456789")
    assert await tool("fs.edit", tmp_path, path="ten.txt", old="0", new="x") == (
        "replaced 1 occurrence in 'ten.txt'")
    (tmp_path / "eleven.txt").write_text("0123456789A")
    error = await refused("fs.edit", tmp_path, path="eleven.txt", old="0", new="x")
    assert "'eleven.txt' is 11 bytes, more than the 10 bytes fs.edit works on" in error.message
    # The environment reads one byte past the limit, so a file that grew after its fstat
    # is refused as well instead of being read whole.
    env = LocalEnvironment(tmp_path)
    assert await env.read_bytes("ten.txt", max_bytes=10) == b"x123456789"
    with pytest.raises(HooklineError, match="more than the 9 bytes this read allows"):
        await env.read_bytes("ten.txt", max_bytes=9)


@pytest.mark.anyio
async def test_an_edit_cannot_make_a_file_larger_than_it_may_edit(tmp_path: Path) -> None:
    # 100 KB and a 200-character `new`: replace_all would write 20 MB, past the 16 MiB.
    (tmp_path / "many.txt").write_text("a" * 100_000)
    error = await refused("fs.edit", tmp_path, path="many.txt", old="a", new="b" * 200,
                          replace_all=True)
    assert error.message == (
        f"fs.edit: the edit would make 'many.txt' 20,000,000 bytes, more than the "
        f"{MAX_EDIT_BYTES:,} bytes fs.edit writes; make the change with the shell tool (sed, "
        f"a script), or write a smaller file with fs.write")
    assert (tmp_path / "many.txt").read_text() == "a" * 100_000, "nothing was written"


@pytest.mark.anyio
async def test_the_edit_result_cap_counts_utf8_bytes_up_to_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools_module, "MAX_EDIT_BYTES", 10)
    (tmp_path / "five.txt").write_text("aaaaa")
    assert await tool("fs.edit", tmp_path, path="five.txt", old="a", new="\u00e9",
                      replace_all=True) == "replaced 5 occurrences in 'five.txt'"
    assert (tmp_path / "five.txt").read_text() == "\u00e9" * 5  # 10 bytes: allowed
    error = await refused("fs.edit", tmp_path, path="five.txt", old="\u00e9", new="ab\u00e9",
                          replace_all=True)
    assert "would make 'five.txt' 20 bytes, more than the 10 bytes" in error.message
    assert (tmp_path / "five.txt").read_text() == "\u00e9" * 5


@pytest.mark.anyio
async def test_file_writes_replace_the_file_whole(tmp_path: Path) -> None:
    """fs.write used to truncate the file before writing; now a sibling is renamed over it."""
    target = tmp_path / "notes.txt"
    target.write_text("old")
    os.chmod(target, 0o640)
    environment = LocalEnvironment(tmp_path)
    await environment.write_text("notes.txt", "new")
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o640, "the file keeps its mode"
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"], "no temporary left behind"


@pytest.mark.anyio
async def test_a_rewritten_file_loses_its_set_id_bits(tmp_path: Path) -> None:
    """The written file is hookline's user's: keeping a set-user-ID bit it had would lend
    that user's rights (root's, say) to whoever runs the model's content."""
    target = tmp_path / "tool"
    target.write_text("#!/bin/sh\n")
    os.chmod(target, 0o6755)
    await LocalEnvironment(tmp_path).write_text("tool", "#!/bin/sh\nid\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
