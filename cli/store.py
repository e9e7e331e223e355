"""`hookline store`: check, back up and copy the tape store.

`check` and `backup` work on a SQLite file directly (the `tape_store` setting, or
`--store`) and never open it as a store, so they neither migrate it nor recover
interrupted runs: `check` only reads, and `backup` only reads the source. Both are safe
while a gateway or another `hookline` process is using the store. On a PostgreSQL URL,
`check` connects and reports the schema version and what the database holds (read only);
`backup` refuses (use `pg_dump`). `copy` opens both stores, like any command using them.
"""

from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from .output import fail

StoreOption = Annotated[
    str | None,
    typer.Option("--store", metavar="FILE|URL",
                 help="The tape store: a SQLite file or a postgresql:// URL (default: the "
                      "tape_store setting)."),
]

_SHOWN_PROBLEMS = 20


def store_commands() -> typer.Typer:
    """The `store` command group."""
    group = typer.Typer(name="store", help="Check, back up and copy the tape store.",
                        no_args_is_help=True)
    group.command(name="check")(check)
    group.command(name="backup")(backup)
    group.command(name="copy")(copy)
    return group


def check(store: StoreOption = None) -> None:
    """Run a full integrity check of the tape store (PostgreSQL: connectivity and schema
    version); exit status 1 if it is damaged or unreachable."""
    location = _store_location(store)
    if isinstance(location, str):
        _check_postgres(location)
        return
    from hookline.builtins.store import check_database

    if not location.exists():  # a new home, or a path mistyped: nothing to be damaged
        typer.echo(f"no store at {location}: hookline creates it with the first turn "
                   f"(check the path if one should be there)", err=True)
        raise typer.Exit(1)
    result = check_database(location)
    if result.unreadable:
        typer.echo(f"cannot read now: {result.path}: {'; '.join(result.problems)}", err=True)
        typer.echo("this says nothing of the file: free disk space, or wait for the other "
                   "process or the disk, and check again.", err=True)
        raise typer.Exit(1)
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
    _pending_note(result.pending_runs)


def _check_postgres(url: str) -> None:
    import anyio

    from hookline.builtins.store import check_postgres

    try:
        result = anyio.run(check_postgres, url)
    except Exception as exc:  # the driver is missing
        fail(exc)
    if not result.ok:
        typer.echo(f"unusable: {result.display}", err=True)
        for problem in result.problems[:_SHOWN_PROBLEMS]:
            typer.echo(f"  {problem}", err=True)
        raise typer.Exit(1)
    if not result.schema_version:
        typer.echo(f"ok: {result.display}: reachable, no hookline tables yet (created when a "
                   f"gateway or command first opens the store)")
        return
    typer.echo(f"ok: {result.display}: {_summary(result.tapes, result.entries)}, "
               f"schema version {result.schema_version}, {result.owners} open store(s)")
    _pending_note(result.pending_runs)


def _pending_note(pending: int) -> None:
    if pending:
        typer.echo(f"{pending} run journal(s) pending: runs in progress, or left by a process "
                   f"that was killed (those are recovered, marked interrupted, the next time "
                   f"hookline opens the store)")


def backup(
    path: Annotated[Path, typer.Argument(metavar="PATH", show_default=False,
                                      help="The file to write (must not exist yet).")],
    store: StoreOption = None,
) -> None:
    """Copy the SQLite tape store to PATH with SQLite's online backup, then check the copy."""
    from hookline.builtins.store import backup_database

    source = _store_location(store)
    if isinstance(source, str):
        fail(RuntimeError("backup copies a SQLite file; back up a PostgreSQL store with "
                          "pg_dump (see docs/deployment.md), or copy it into a SQLite file "
                          "with `hookline store copy URL FILE`"))
    try:
        result = backup_database(source, path)
    except Exception as exc:  # a missing store, an existing target, a damaged source
        fail(exc)
    if not result.ok:
        fail(RuntimeError(f"the backup {result.path} failed its integrity check: "
                          f"{'; '.join(result.problems[:3])}"))
    typer.echo(f"backed up {source} to {result.path}: "
               f"{_summary(result.tapes, result.entries)}, integrity ok")


def copy(
    source: Annotated[str, typer.Argument(metavar="SRC",
                                          help="The store to read: a SQLite file or a URL.")],
    target: Annotated[str, typer.Argument(metavar="DST",
                                          help="The store to write: a SQLite file or a URL.")],
    into_existing: Annotated[bool, typer.Option(
        "--into-existing",
        help="Allow a destination that already holds tapes: add the missing ones; tapes it "
             "holds must be identical to the source's (resumes an interrupted copy).")] = False,
) -> None:
    """Copy every tape (sidecars included) from SRC to DST and verify the copy."""
    import anyio

    from hookline.builtins.store import copy_store, shown

    def progress(line: str) -> None:
        typer.echo(line, err=True)

    try:
        report = anyio.run(partial(copy_store, _location(source), _location(target),
                                   into_existing=into_existing, progress=progress))
    except Exception as exc:
        fail(exc)
    skipped = f", {report.skipped} already there" if report.skipped else ""
    typer.echo(f"copied {shown(source)} to {shown(target)}: "
               f"{_summary(report.tapes, report.entries)}{skipped}, verified")
    if report.pending_runs:
        typer.echo(f"{report.pending_runs} run(s) still in progress in the source were not "
                   f"copied: stop the gateways and copy again with --into-existing")


def _location(text: str) -> Path | str:
    from hookline.builtins.store import StoreURL, is_postgres_url

    return StoreURL(text.strip()) if is_postgres_url(text) else Path(text).expanduser()


def _store_location(store: str | None) -> Path | str:
    if store is not None:
        return _location(store)
    from hookline.builtins.config import load_settings

    try:
        location = load_settings().tape_store
    except Exception as exc:  # an unreadable config file: one line
        fail(exc)
    assert location is not None  # Settings always fills it in
    return location


def _summary(tapes: int, entries: int) -> str:
    return f"{tapes} tape(s), {entries} entr{'y' if entries == 1 else 'ies'}"
