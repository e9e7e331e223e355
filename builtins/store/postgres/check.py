"""`hookline store check` on a PostgreSQL store: connectivity, the schema version and what
the database holds, without writing anything."""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from ..url import redact_url
from .conn import _import_driver, split_url
from .sql import SCHEMA_VERSION

__all__ = ["check_postgres"]


@dataclass(frozen=True)
class PostgresCheck:
    """What `check_postgres` found: `problems` is empty when the database is usable."""

    display: str
    problems: list[str]
    schema_version: int | None = None
    tapes: int = 0
    entries: int = 0
    pending_runs: int = 0
    owners: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


async def check_postgres(url: str) -> PostgresCheck:
    """Connectivity and the schema version of a PostgreSQL store, plus what it holds;
    writes nothing (no migration, no recovery)."""
    display = redact_url(url.strip())
    psycopg, _pool = _import_driver()
    conninfo, _params = split_url(url)
    try:
        with anyio.fail_after(15):
            conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    except (psycopg.Error, OSError, TimeoutError) as exc:
        return PostgresCheck(display, [f"cannot connect: {redact_url(str(exc).strip(), url)}"])
    try:
        found = await (await conn.execute(
            "SELECT to_regclass('hookline_schema_version') IS NOT NULL")).fetchone()
        if not found or not found[0]:
            return PostgresCheck(display, [], 0)
        row = await (await conn.execute(
            "SELECT max(version) FROM hookline_schema_version")).fetchone()
        version = int(row[0]) if row and row[0] is not None else 0
        if version > SCHEMA_VERSION:
            return PostgresCheck(display, [
                f"schema version {version} is newer than this hookline supports "
                f"({SCHEMA_VERSION}); upgrade hookline"], version)
        if version < 1:
            return PostgresCheck(display, [], version)
        counts = await (await conn.execute(
            "SELECT (SELECT count(DISTINCT tape) FROM hookline_entries), "
            "(SELECT count(*) FROM hookline_entries), "
            "(SELECT count(*) FROM hookline_journal_runs), "
            "(SELECT count(*) FROM hookline_owners)")).fetchone()
        assert counts is not None
        tapes, entries, pending, owners = (int(value) for value in counts)
        return PostgresCheck(display, [], version, tapes, entries, pending, owners)
    except psycopg.Error as exc:
        return PostgresCheck(display, [redact_url(str(exc).strip(), url)])
    finally:
        await conn.close()

