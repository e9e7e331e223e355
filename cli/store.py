"""`hookline store`: check and back up the SQLite tape store.

Both commands work on the file directly (the `tape_store` setting, or `--store PATH`) and
never open it as a store, so they neither migrate it nor recover interrupted runs: `check`
only reads, and `backup` only reads the source. Both are safe while a gateway or another
`hookline` process is using the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .output import fail

StoreOption = Annotated[
    Path | None,
    typer.Option("--store", help="The tape store file (default: the tape_store setting)."),
]

_SHOWN_PROBLEMS = 20


def store_commands() -> typer.Typer:
    """The `store` command group."""
    group = typer.Typer(name="store", help="Check and back up the tape store.",
                        no_args_is_help=True)
    group.command(name="check")(check)
    group.command(name="backup")(backup)
    return group


def check(store: StoreOption = None) -> None:
    """Run a full integrity check of the tape store; exit status 1 if it is damaged."""
    from hookline.builtins.store import check_database

    result = check_database(_store_path(store))
    if not result.ok:
        typer.echo(f"damaged: {result.path}", err=True)
        for problem in result.problems[:_SHOWN_PROBLEMS]:
            typer.echo(f"  {problem}", err=True)
        if len(result.problems) > _SHOWN_PROBLEMS:
            typer.echo(f"  ... {len(result.problems) - _SHOWN_PROBLEMS} more", err=True)
        typer.echo(
            "fix: restore the file from a backup, or move it aside together with its -wal "
            "and -shm files so that hookline creates a new store.", err=True)
        raise typer.Exit(1)
    typer.echo(f"ok: {result.path}: {_summary(result.tapes, result.entries)}, "
               f"schema version {result.schema_version}")
    if result.pending_runs:
        typer.echo(f"{result.pending_runs} run journal(s) pending: runs in progress, or left "
                   f"by a process that was killed (those are recovered, marked interrupted, "
                   f"the next time hookline opens the store)")


def backup(
    path: Annotated[Path, typer.Argument(help="The file to write (must not exist yet).")],
    store: StoreOption = None,
) -> None:
    """Copy the tape store to PATH with SQLite's online backup, then check the copy."""
    from hookline.builtins.store import backup_database

    source = _store_path(store)
    try:
        result = backup_database(source, path)
    except Exception as exc:  # a missing store, an existing target, a damaged source
        fail(exc)
    if not result.ok:
        fail(RuntimeError(f"the backup {result.path} failed its integrity check: "
                          f"{'; '.join(result.problems[:3])}"))
    typer.echo(f"backed up {source} to {result.path}: "
               f"{_summary(result.tapes, result.entries)}, integrity ok")


def _store_path(store: Path | None) -> Path:
    if store is not None:
        return store.expanduser()
    from hookline.builtins.settings import load_settings

    try:
        path = load_settings().tape_store
    except Exception as exc:  # an unreadable config file: one line
        fail(exc)
    assert path is not None  # Settings always fills it in
    return path


def _summary(tapes: int, entries: int) -> str:
    return f"{tapes} tape(s), {entries} entr{'y' if entries == 1 else 'ies'}"
