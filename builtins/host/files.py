"""Regular files on the host: opened without blocking, read in slices, written atomically.

These are the file operations under `LocalEnvironment` (which first resolves the path and
confines it to the workspace) and under the builtin plugin's `AGENTS.md` read:

- only regular files are opened: every open uses `O_NONBLOCK` and `O_NOFOLLOW` (the path
  is already resolved) and checks the opened descriptor with `fstat`, so a FIFO, a device
  or a socket is refused with a clear error instead of blocking a worker thread, and
  nothing can be swapped in between the check and the open (`open_regular_file`);
- with a `root` (the workspace), the path is opened one folder at a time from the root,
  never through a link: a sandboxed command may swap a folder of the resolved path for a
  link to `~/.ssh` while a file tool works, and the tool, which runs with the user's
  rights, must then fail rather than follow it (`_open_folder`);
- a file with more than one hard link is not read, since it may be a name for a file
  outside the workspace (`open_single_link`);
- `read_line_slice` reads a slice of lines in bounded memory and time, whatever the
  file's size;
- `write_file` writes a sibling file and renames it over the name, so a failure never
  leaves a half-written file and other hard links keep the old content; the file keeps
  its mode, and a new one gets 0666 masked by the process umask, as `open` would give.

Everything here blocks: call it from a worker thread. `name` arguments are how errors name
the file (the workspace-relative path), so messages never show where the workspace is.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import os
import re
import secrets
import stat
from dataclasses import dataclass
from typing import IO, BinaryIO

from hookline.kernel.errors import ErrorKind, HooklineError

from ..privacy.files import process_umask

__all__ = [
    "FileTooLarge",
    "LineSlice",
    "ReadBudget",
    "file_start",
    "is_inside",
    "open_regular_file",
    "open_single_link",
    "read_file",
    "read_file_lines",
    "read_line_slice",
    "write_file",
]

def is_inside(path: str, root: str) -> bool:
    """Whether the resolved `path` is `root` or below it (both absolute and resolved)."""
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives on Windows
        return False


_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)  # opening a FIFO or a device must never wait
    | getattr(os, "O_NOFOLLOW", 0)  # the path is resolved: a link now is a swap, refuse it
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)

_FOLDER_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC

_SLICE_CHUNK = 65536

_COUNT_AHEAD = 8 * 1024 * 1024
"""Bytes `read_line_slice` reads past a slice to count the file's lines; a longer file is
reported as having "at least" the lines counted, so a slice never costs the whole file."""

_ESCAPED = re.compile("[\udc80-\udcff]")


class FileTooLarge(HooklineError):
    """A whole-file read was refused because the file is larger than the caller allows."""

    def __init__(self, name: str, size: int, limit: int) -> None:
        super().__init__(
            ErrorKind.invalid_input,
            f"cannot read {name!r}: it is {size:,} bytes, more than the {limit:,} bytes "
            f"this read allows",
            {"path": name, "size": size, "max_bytes": limit},
        )
        self.size = size
        self.limit = limit


def _file_type(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "a special file"


def _check_regular(mode: int, path: str, name: str, action: str) -> None:
    # A resolved path that is a link now was swapped after resolving: an open with
    # O_NOFOLLOW refuses it, and a write's rename replaces the link, not what it points to.
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    what = _file_type(mode)
    raise HooklineError(
        ErrorKind.invalid_input,
        f"cannot {action} {name!r}: it is {what}, not a regular file; the file tools only "
        f"read and write regular files",
        {"path": name, "type": what},
    )


def _as_a_command(fd: int, want: int, name: str) -> None:
    """Refuse what only root's capabilities reach of the file `fd` (`want`: `os.R_OK`,
    `os.W_OK`, `os.X_OK`, or'ed): the sandbox's commands run without them, and the file
    tools, which run with them, must reach no more than a command. For any other user
    the kernel checks as it opens."""
    if os.geteuid() != 0:
        return
    info = os.fstat(fd)
    if info.st_uid == 0:
        granted = info.st_mode >> 6
    elif info.st_gid == os.getegid() or info.st_gid in os.getgroups():
        granted = info.st_mode >> 3
    else:
        granted = info.st_mode
    if granted & want != want:
        raise PermissionError(errno.EACCES, "Permission denied (to a command run by root "
                              "without its capabilities, so to the file tools too)", name)


def _missing(name: str, folder: int) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return True
    return False


def _open_folder(root: str, folder: str, *, name: str, create: bool = False) -> int:
    """A descriptor of `folder` (resolved, inside `root`), opened from `root` one name at
    a time without following a link, each missing one made first with `create`. A link
    met on the way was swapped in since the path was resolved: a `HooklineError` saying
    to try again; a file where a folder should be is `NotADirectoryError`. Each folder is
    entered, and made, only as a command could (`_as_a_command`)."""
    fd = os.open(root, _FOLDER_FLAGS)
    try:
        _as_a_command(fd, os.X_OK, name)
        relative = os.path.relpath(folder, root)
        here = root
        for part in [] if relative == os.curdir else relative.split(os.sep):
            here = os.path.join(here, part)
            if create and _missing(part, fd):
                _as_a_command(fd, os.W_OK | os.X_OK, name)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
            try:
                inner = os.open(part, _FOLDER_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except NotADirectoryError as exc:
                if stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise _swapped(name, here) from exc
                raise NotADirectoryError(
                    errno.ENOTDIR, "a parent path is a file, not a directory", name) from exc
            os.close(fd)
            fd = inner
            _as_a_command(fd, os.X_OK, name)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _swapped(name: str, path: str, action: str = "open") -> HooklineError:
    """A link met where the resolved path had none: swapped in since, or links that lead
    in a loop, which resolving leaves as they are (no file is there: trying again is no
    use)."""
    try:
        os.path.realpath(path, strict=True)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return HooklineError(
                ErrorKind.invalid_input,
                f"cannot {action} {name!r}: its symbolic links lead in a loop (a link to "
                f"itself, or to a link back to it), so there is no file there",
                {"path": name})
    return HooklineError(
        ErrorKind.temporary,
        f"cannot {action} {name!r}: its path was changed to a symbolic link after it was "
        f"resolved; try again",
        {"path": name})


def open_regular_file(
    path: str, *, name: str | None = None, action: str = "read", root: str | None = None
) -> tuple[BinaryIO, os.stat_result]:
    """Open `path` for reading, only if it is a regular file; return it and its `fstat`.

    Never blocks: the open uses `O_NONBLOCK`, so a FIFO with no writer or a device cannot
    hold the calling thread, and the type is checked with `fstat` on the opened descriptor,
    so a file swapped in after a check cannot slip through. `O_NOFOLLOW` refuses a final
    symbolic link: pass a path that is already resolved; with `root`, no link on the way
    from it is followed either (`_open_folder`). A FIFO, device or socket is a
    `HooklineError(invalid_input)` naming `name` (default `path`) and what it is; a
    directory is `IsADirectoryError`, other failures the usual `OSError`.
    """
    shown = path if name is None else name
    # A cheap look first, so that a FIFO or a device is normally not even opened (opening
    # some devices has side effects); the fstat below is what makes the check race-free.
    with contextlib.suppress(OSError):  # the open reports a missing file properly
        _check_regular(os.lstat(path).st_mode, path, shown, action)
    try:
        if root is None:
            fd = os.open(path, _OPEN_FLAGS)
        else:
            folder = _open_folder(root, os.path.dirname(path), name=shown)
            try:
                fd = os.open(os.path.basename(path), _OPEN_FLAGS, dir_fd=folder)
            finally:
                os.close(folder)
            try:
                _as_a_command(fd, os.R_OK, shown)
            except BaseException:
                os.close(fd)
                raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _swapped(shown, path, action) from exc
        raise
    try:
        info = os.fstat(fd)
        _check_regular(info.st_mode, path, shown, action)
        if os.name == "posix":
            os.set_blocking(fd, True)  # no effect on regular files; plain reads from here on
        return os.fdopen(fd, "rb"), info
    except BaseException:
        os.close(fd)
        raise


@dataclass(frozen=True)
class LineSlice:
    """Lines `first` to `last` of a file, as `read_line_slice` found them."""

    text: str
    """The lines, decoded as UTF-8 with bytes that are not valid UTF-8 shown as U+FFFD."""
    first: int
    """Number of the first line asked for (from 1)."""
    last: int
    """Number of the last line in `text` (partly, when `truncated`); `first - 1` if none."""
    lines: int
    """Lines in the whole file when `complete`, else the lines counted (a lower bound)."""
    complete: bool
    """The end of the file was reached, so `lines` is its exact line count."""
    truncated: bool
    """`text` was cut at the character cap."""
    replaced: int
    """Bytes that were not valid UTF-8 and show as U+FFFD in `text`."""

    @property
    def empty(self) -> bool:
        """The file has no content at all."""
        return self.complete and self.lines == 0


class _CountingReader:
    """Reads fixed chunks and counts every newline it hands out, and the last byte."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.newlines = 0
        self.tail = b""
        self.ended = False

    def read(self) -> bytes:
        data = self.stream.read(_SLICE_CHUNK) or b""
        if data:
            self.newlines += data.count(b"\n")
            self.tail = data[-1:]
        else:
            self.ended = True
        return data

    def lines(self) -> int:
        return self.newlines + (1 if self.tail not in (b"", b"\n") else 0)


def _after_newline(data: bytes, count: int) -> int:
    """The index just after the `count`-th newline of `data` (which has that many)."""
    position = -1
    for _ in range(count):
        position = data.index(b"\n", position + 1)
    return position + 1


def read_line_slice(
    stream: IO[bytes], offset: int = 1, limit: int | None = None, max_chars: int = 100_000
) -> LineSlice:
    """Read `limit` lines (all when None) from line `offset` of a binary stream.

    Lines end with "\n". The stream is read in chunks and reading stops at the end of the
    slice or at `max_chars` characters, then counts lines for at most a few more megabytes:
    memory stays around `max_chars` and time depends on where the slice is, not on the
    size of the file (skipping to a far `offset` reads what it skips, without keeping it).
    Bytes that are not valid UTF-8 become U+FFFD and are counted in `replaced`.
    """
    reader = _CountingReader(stream)
    skip, data = offset - 1, b""
    while skip and not reader.ended:
        before = reader.newlines
        data = reader.read()
        found = reader.newlines - before
        if found < skip:
            skip, data = skip - found, b""
        else:
            data, skip = data[_after_newline(data, skip):], 0
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    pieces: list[str] = []
    chars, wanted, truncated = 0, limit, False
    while not skip:
        data = data or reader.read()
        done = not data
        if wanted is not None and data:
            found = data.count(b"\n")
            if found >= wanted:
                data, done = data[: _after_newline(data, wanted)], True
            else:
                wanted -= found
        text = decoder.decode(data, final=not data)
        if chars + len(text) > max_chars:
            text, truncated, done = text[: max_chars - chars], True, True
        pieces.append(text)
        chars += len(text)
        data = b""
        if done:
            break
    budget = _COUNT_AHEAD
    while budget > 0 and not reader.ended:
        budget -= len(reader.read())
    text, replaced = _ESCAPED.subn("\ufffd", "".join(pieces))
    last = offset - 1 + text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    return LineSlice(
        text=text,
        first=offset,
        last=last,
        lines=reader.lines(),
        complete=reader.ended,
        truncated=truncated,
        replaced=replaced,
    )


# -- whole files -----------------------------------------------------------------------


class ReadBudget:
    """The bytes one look at the workspace may still read with `file_start` (git config,
    `.envrc` and mise files, hooks' first lines): a command may write thousands of large
    ones, or have many repositories include the same one, and reading them all would hold
    up the first command and the end of every turn for minutes. Once `spent`, nothing
    more is read."""

    def __init__(self, limit: int) -> None:
        self.left = limit

    @property
    def spent(self) -> bool:
        return self.left < 0


def file_start(path: str, size: int, budget: ReadBudget | None = None) -> bytes:
    """The first `size` bytes of a regular file (opened without blocking, so a FIFO a
    command put there cannot hold hookline), else none: for a look at what a program run
    later reads, where missing or odd is nothing to look at. What is read is taken from
    `budget`; nothing is, once it is spent."""
    if budget is not None and budget.spent:
        return b""
    try:
        handle, _info = open_regular_file(path)
    except (OSError, HooklineError):
        return b""
    with handle:
        data = handle.read(size)
    if budget is not None:
        budget.left -= len(data)
    return data


def open_single_link(target: str, name: str, root: str | None = None
                     ) -> tuple[BinaryIO, os.stat_result]:
    """Open a regular file for reading (from `root`, see `open_regular_file`); refuse one
    with more than one hard link.

    A second hard link may be a name for a file outside the workspace, and nothing in the
    file says where its other names are, so such a file is not read at all.
    """
    handle, info = open_regular_file(target, name=name, root=root)
    if info.st_nlink > 1:
        handle.close()
        raise HooklineError(
            ErrorKind.invalid_input,
            f"cannot read {name!r}: it has {info.st_nlink} hard links, and a hard link "
            f"may be a name for a file outside the workspace, so the file tools do not "
            f"read it; if it belongs to the workspace (a package manager's hard-linked "
            f"install, say), read it with the shell tool",
            {"path": name, "links": info.st_nlink},
        )
    return handle, info


def read_file(target: str, name: str, max_bytes: int | None = None, *,
              root: str | None = None) -> bytes:
    """The whole file; with `max_bytes`, a larger file is refused with `FileTooLarge`."""
    handle, info = open_single_link(target, name, root)
    with handle:
        if max_bytes is None:
            return handle.read()
        if info.st_size > max_bytes:
            raise FileTooLarge(name, info.st_size, max_bytes)
        data = handle.read(max_bytes + 1)  # the file may have grown since the fstat
        if len(data) > max_bytes:
            raise FileTooLarge(name, os.fstat(handle.fileno()).st_size, max_bytes)
        return data


def read_file_lines(
    target: str, name: str, offset: int, limit: int | None, max_chars: int, *,
    root: str | None = None,
) -> LineSlice:
    """`limit` lines from line `offset` of the file; see `read_line_slice`."""
    handle, _info = open_single_link(target, name, root)
    with handle:
        return read_line_slice(handle, offset, limit, max_chars)


def _replaceable(folder: int, leaf: str, existing: os.stat_result, name: str) -> None:
    """Refuse to replace a file a command could not write (`>` opens it for writing):
    a read-only one (generated, or kept from changes on purpose), or, for any user but
    root (whose copy gets the owner back), another user's, which would become ours."""
    mode = f"mode {stat.S_IMODE(existing.st_mode):04o}"
    others = os.geteuid() not in (0, existing.st_uid)
    try:
        handle = os.open(leaf, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=folder)
        try:
            _as_a_command(handle, os.W_OK, name)
        finally:
            os.close(handle)
    except PermissionError:
        others = True
        if existing.st_uid == os.geteuid():
            raise HooklineError(
                ErrorKind.tool,
                f"{name!r} is read-only ({mode}): it may be generated, or kept from changes "
                f"on purpose; nothing was written. The user can make it writable (chmod "
                f"u+w) if it should change", {"path": name}) from None
    if others:
        raise HooklineError(
            ErrorKind.tool,
            f"{name!r} belongs to another user (uid {existing.st_uid}, {mode}): writing "
            f"it would replace it with a file of hookline's user, which its owner could "
            f"lose; nothing was written", {"path": name})


def _current(folder: int, leaf: str) -> bytes | None:
    """What the file holds now (None: it is gone)."""
    try:
        handle = os.open(leaf, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=folder)
    except FileNotFoundError:
        return None
    with os.fdopen(handle, "rb") as stream:
        return stream.read()


def write_file(root: str, target: str, name: str, data: bytes,
               expected: bytes | None = None) -> None:
    """Write `data` as the whole file `target` (resolved, inside `root`), creating missing
    parent directories; every folder is opened from `root` without following a link
    (`_open_folder`), and the file is made and renamed in the folder so opened.

    A FIFO, socket or device under the name is refused, never replaced by a file. An
    existing file is replaced only where a command could write it (`_replaceable`: not a
    read-only one, nor another user's), keeps its owner and permissions but not its
    set-user-ID and set-group-ID bits (the written file is hookline's user's, which those
    bits would lend to whoever runs it), and, with `expected` (what an edit read), only
    while it still holds that: another program's write since is kept, and the edit is
    refused. A new file gets 0666 masked by the process umask.
    """
    folder = _open_folder(root, os.path.dirname(target), name=name, create=True)
    leaf = os.path.basename(target)
    try:
        _as_a_command(folder, os.W_OK | os.X_OK, name)
        try:
            existing: os.stat_result | None = os.stat(leaf, dir_fd=folder,
                                                      follow_symlinks=False)
        except FileNotFoundError:
            existing = None
        if existing is not None:
            # Replacing a FIFO or a device by a file is never what was meant.
            _check_regular(existing.st_mode, target, name, "write")
            if stat.S_ISREG(existing.st_mode):  # a link swapped in is replaced, not followed
                _replaceable(folder, leaf, existing, name)
        # Write a sibling file and rename it over the target: a failure part way leaves
        # the old file intact instead of truncated. The rename replaces this name only,
        # so other hard links to the old file (inside the workspace or not) keep its
        # content.
        temporary = f".hookline-{secrets.token_hex(8)}.tmp"
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600, dir_fd=folder)
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
                stream.flush()
                # A new file (or one replacing a link swapped in) gets what open(name,
                # 0o666) would, under the process umask; an existing one keeps its mode.
                mode = (stat.S_IMODE(existing.st_mode) & ~(stat.S_ISUID | stat.S_ISGID)
                        if existing is not None and stat.S_ISREG(existing.st_mode)
                        else 0o666 & ~process_umask())
                os.fchmod(stream.fileno(), mode)
                if existing is not None and os.geteuid() == 0:  # root's copy: the owner's
                    os.fchown(stream.fileno(), existing.st_uid, existing.st_gid)
                os.fsync(stream.fileno())
            if expected is not None and _current(folder, leaf) != expected:
                raise HooklineError(
                    ErrorKind.tool,
                    f"{name!r} changed while it was being edited (another program wrote to "
                    f"it): nothing was written, and its change is kept; read it again and "
                    f"redo the edit", {"path": name})
            os.replace(temporary, leaf, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=folder)
            raise
    finally:
        os.close(folder)
