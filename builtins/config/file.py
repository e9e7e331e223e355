"""The config file: where it is, reading it (a regular file, small, private when it holds
a secret) and writing or updating it atomically, readable by its owner only."""

from __future__ import annotations

import contextlib
import copy
import fcntl
import os
import stat
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..privacy.files import HOME_ENV, make_private_dir, shared_secret_problem, write_private_file
from .table import SettingsError
from .toml import dumps_toml, rewritten

__all__ = [
    "MAX_CONFIG_BYTES",
    "config_lock",
    "default_home",
    "merge_config",
    "parse_toml",
    "read_config_file",
    "update_config",
    "write_config",
]

MAX_CONFIG_BYTES = 1 << 20
"""A larger config file is refused rather than read."""


def default_home(environ: Mapping[str, str] | None = None) -> Path:
    """`HOOKLINE_HOME` when set, else `~/.hookline`."""
    env = os.environ if environ is None else environ
    value = env.get(HOME_ENV, "").strip()
    return Path(value).expanduser().absolute() if value else Path.home() / ".hookline"


def _unreadable_config(path: Path, exc: OSError) -> SettingsError:
    return SettingsError(
        f"Cannot read the config file {path}: {exc.strerror or exc}. "
        f"Fix its permissions, or set {HOME_ENV} to another directory.",
        key="config",
        source=f"file:{path}",
    )


def parse_toml(raw: bytes) -> dict[str, Any]:
    """The TOML document in `raw`; a `ValueError` says what is wrong: tomllib's message,
    bad UTF-8, or nesting deeper than Python recurses (a file a command wrote may)."""
    import tomllib  # only with a file to parse

    try:
        return tomllib.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ValueError("it nests too deep") from None


def read_config_file(path: Path) -> dict[str, Any]:
    """The config file's tables ({} when there is none); SettingsError, naming the file
    and the fix, when it cannot be read or is not TOML, is not a regular file (a FIFO
    would block every command) or is over `MAX_CONFIG_BYTES`."""
    found = _read_raw(path)
    if found is None:
        return {}
    raw, mode = found
    try:
        data = parse_toml(raw)
    except ValueError as exc:
        raise SettingsError(
            f"The config file {path} is not valid TOML: {exc}. "
            "Fix the file (see the hookline settings documentation) or remove it.",
            key="config",
            source=f"file:{path}",
        ) from exc
    if shared := shared_secret_problem(path, mode, data):  # as libpq's .pgpass
        raise SettingsError(shared, key="config", source=f"file:{path}")
    return data


def _read_raw(path: Path) -> tuple[bytes, int] | None:
    """The config file's bytes and mode (None when there is none), read as
    `read_config_file` says."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _unreadable_config(path, exc) from exc
    try:
        info = os.fstat(fd)
        problem = ("is not a regular file" if not stat.S_ISREG(info.st_mode) else
                   f"is over {MAX_CONFIG_BYTES} bytes" if info.st_size > MAX_CONFIG_BYTES
                   else None)
        if problem:
            raise SettingsError(
                f"The config file {path} {problem}. Replace it with a TOML file, or set "
                f"{HOME_ENV} to another directory.", key="config", source=f"file:{path}")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise _unreadable_config(path, exc) from exc
    finally:
        os.close(fd)
    return raw, info.st_mode


def write_config(path: str | os.PathLike[str], data: Mapping[str, Any]) -> Path:
    """Write `data` as TOML to `path` atomically, readable by the owner only (it may hold
    keys). A file already there keeps its comments and layout where its values stay
    (`toml.rewritten`). A link (dotfiles kept with stow) stays a link: the file it
    points to is written."""
    target = Path(path).expanduser()
    if target.is_symlink():
        target = target.resolve()
    try:
        found = _read_raw(target)
    except SettingsError:
        found = None
    text = rewritten(found[0], data) if found is not None else None
    write_private_file(target, text if text is not None else dumps_toml(data))
    return target


def merge_config(data: Mapping[str, Any], updates: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `data` with `updates` merged in: tables merge key by key, None removes a
    key, anything else replaces. `data` is left as it was."""
    merged = copy.deepcopy(dict(data))

    def merge(base: dict[str, Any], changes: Mapping[str, Any]) -> None:
        for key, value in changes.items():
            if value is None:
                base.pop(key, None)
            elif isinstance(value, Mapping) and isinstance(base.get(key), dict):
                merge(base[key], value)
            else:
                base[key] = copy.deepcopy(dict(value)) if isinstance(value, Mapping) else value

    merge(merged, updates)
    return merged


def update_config(path: str | os.PathLike[str], updates: Mapping[str, Any]) -> dict[str, Any]:
    """Merge `updates` into the config file at `path` (None removes a key), under
    `config_lock`; returns the result."""
    target = Path(path).expanduser()
    with config_lock(target):
        data = merge_config(read_config_file(target), updates)
        write_config(target, data)
    return data


_held: dict[Path, int] = {}
"""The config locks this process holds, with how deep (`config_lock` is re-entrant)."""
_held_guard = threading.Lock()


@contextlib.contextmanager
def config_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the config file's lock (`flock` on `<file>.lock` beside it, 0600) while a
    command reads, changes and writes it: two `hookline mcp add` at once must not each
    write what it read, losing the other's table. Re-entrant within a process."""
    target = Path(path).expanduser().resolve()
    with _held_guard:
        depth = _held.get(target, 0)
        _held[target] = depth + 1
    fd = None
    try:
        if depth == 0:
            make_private_dir(target.parent)  # a new home: the config comes with the lock
            fd = os.open(target.with_name(target.name + ".lock"),
                         os.O_CREAT | os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd is not None:
            os.close(fd)  # closing lets the lock go
        with _held_guard:
            _held[target] -= 1
            if not _held[target]:
                del _held[target]
