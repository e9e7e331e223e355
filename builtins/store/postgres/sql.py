"""The SQL and PL/pgSQL of the PostgreSQL tape store: the schema and its migrations, the
`hookline_apply` function every write goes through, the context read, and the stored form
of a write (docs/deployment.md states the guarantees they make)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Generic, TypeAlias, TypeVar

from hookline.kernel.tape import LAST_ANCHOR, TapeEntry, TapeQuery

from ..entries import SIDECAR_MARKER, dump_json, valid_text
from ..sqlite.journal import JournalOp, check_journal_op

if TYPE_CHECKING:
    from psycopg import AsyncConnection

T = TypeVar("T")

SCHEMA_VERSION: Final = 2
"""The version this hookline writes; `hookline_schema_version` holds the database's."""

NS_TAPE: Final = 0x686C0001
"""Advisory lock class of tape locks (two-int keys: this, hashtext(tape))."""
NS_MIGRATE: Final = 0x686C0002
"""Advisory lock class of the schema migration (key: this, 0)."""
NS_REQUEST: Final = 0x686C0003
"""Advisory lock class of request claims (two-int keys: this, hashtext(tape, key))."""
# Owner locks use the one-bigint form, a key space apart from the two-int one.

FENCED: Final = "HL001"
"""The SQLSTATE the functions raise for a write of a run whose lease is gone: another
replica (or this one, after losing its lock) recovered the run as interrupted."""

_APPLY_FUNCTION: Final = f"""
CREATE FUNCTION hookline_apply(
    p_run text, p_owner bigint, p_upto integer, p_repeat boolean, p_lock text[],
    p_tape text[], p_action text[], p_kind text[], p_payload text[], p_meta text[],
    p_date text[], p_anchor text[])
RETURNS TABLE (o_tape text, o_id bigint, o_kind text, o_payload text, o_meta text,
               o_date text)
LANGUAGE plpgsql AS $fn$
DECLARE
    w record;
    next_id bigint;
    done record;
    holder bigint;
    held boolean;
    finished boolean := false;
    out_tapes text[] := '{{}}';
    out_ids bigint[] := '{{}}';
BEGIN
    -- Lock every tape written, in key order; a sidecar tape shares its session tape's key.
    PERFORM pg_advisory_xact_lock({NS_TAPE}, k) FROM (
        SELECT DISTINCT hashtext(split_part(t, '{SIDECAR_MARKER}', 1)) AS k
        FROM unnest(p_lock || p_tape || ARRAY(
            SELECT j.tape FROM hookline_journal j WHERE j.run = p_run)) AS t
        ORDER BY 1) AS keys;
    IF p_run IS NOT NULL THEN
        SELECT o.status, o.tapes, o.ids INTO done FROM hookline_run_outcomes o
        WHERE o.run = p_run;
        finished := FOUND;
        IF finished THEN
            IF p_owner IS NULL THEN
                RETURN;  -- a recovery of a run already finished
            ELSIF done.status <> 'committed' THEN
                RAISE EXCEPTION USING ERRCODE = '{FENCED}', MESSAGE = format(
                    'run %s was recovered as interrupted, so it cannot be committed', p_run);
            ELSIF p_repeat THEN  -- a repeated commit: what the first one stored
                RETURN QUERY SELECT e.tape, e.id, e.kind, e.payload, e.meta, e.date
                    FROM unnest(done.tapes, done.ids) WITH ORDINALITY AS u (tape, id, n)
                    JOIN hookline_entries e ON e.tape = u.tape AND e.id = u.id ORDER BY u.n;
                RETURN;
            END IF;
        ELSE
            SELECT r.owner INTO holder FROM hookline_journal_runs r WHERE r.run = p_run
            FOR UPDATE;
            held := FOUND;
            IF p_owner IS NOT NULL AND ((held AND holder <> p_owner)
                                        OR (NOT held AND p_upto > 0)) THEN
                RAISE EXCEPTION USING ERRCODE = '{FENCED}', MESSAGE = format(
                    'run %s is no longer held by this store (its lease is gone)', p_run);
            END IF;
            IF p_upto IS NOT NULL THEN  -- rows of a write whose outcome was unknown
                DELETE FROM hookline_journal j WHERE j.run = p_run AND j.seq > p_upto;
            END IF;
        END IF;
    END IF;
    FOR w IN
        SELECT x.tape, x.action, x.kind, x.payload, x.meta, x.date, x.anchor FROM (
            SELECT 0 AS part, j.seq::bigint AS n, j.tape, j.action, j.kind, j.payload,
                   j.meta, j.date, j.anchor
            FROM hookline_journal j WHERE j.run = p_run
            UNION ALL
            SELECT 1, g.n, g.tape, g.action, g.kind, g.payload, g.meta, g.date, g.anchor
            FROM unnest(p_tape, p_action, p_kind, p_payload, p_meta, p_date, p_anchor)
                 WITH ORDINALITY AS g (tape, action, kind, payload, meta, date, anchor, n)
        ) AS x ORDER BY x.part, x.n
    LOOP
        IF w.action = 'reset' THEN
            DELETE FROM hookline_entries e WHERE e.tape = w.tape;
            CONTINUE;
        END IF;
        IF w.action = 'bootstrap' AND EXISTS (
                SELECT 1 FROM hookline_entries e WHERE e.tape = w.tape AND e.kind = 'anchor') THEN
            CONTINUE;
        END IF;
        SELECT COALESCE(max(e.id), 0) + 1 INTO next_id
        FROM hookline_entries e WHERE e.tape = w.tape;
        INSERT INTO hookline_entries (tape, id, kind, payload, meta, date, anchor)
        VALUES (w.tape, next_id, w.kind, w.payload, w.meta, w.date, w.anchor);
        out_tapes := out_tapes || w.tape;
        out_ids := out_ids || next_id;
        o_tape := w.tape; o_id := next_id; o_kind := w.kind; o_payload := w.payload;
        o_meta := w.meta; o_date := w.date;
        RETURN NEXT;
    END LOOP;
    IF p_run IS NOT NULL AND NOT finished THEN
        DELETE FROM hookline_journal j WHERE j.run = p_run;
        DELETE FROM hookline_journal_runs r WHERE r.run = p_run;
        INSERT INTO hookline_run_outcomes (run, status, tapes, ids) VALUES (
            p_run, CASE WHEN p_owner IS NULL THEN 'recovered' ELSE 'committed' END,
            out_tapes, out_ids);
    END IF;
END
$fn$
"""
"""Every write in one statement (one round trip, atomic even without a transaction
around it): lock the tapes, then apply the run's journal (when `p_run` is given) and the
given writes in order (each gets its tape's next id; `bootstrap` only on a tape without an
anchor; `reset` empties a tape), drop the journal and record the run's outcome; returns
the entries stored. Doing it in the server keeps the time a pooled connection is held to
one round trip, however busy the gateway's event loop is.

A run's commit (`p_owner` set) is fenced: it fails with `FENCED` when the run was
recovered, or its journal is held by another owner (lease) or gone. Journal rows after
`p_upto` (a write whose outcome was unknown, which comes again in the given writes) are
dropped first. A repeated commit (`p_repeat`, after an error that left the first one's
outcome unknown) returns what the first stored; a recovery (`p_owner` NULL) of a
finished run does nothing."""

_JOURNAL_FUNCTION: Final = f"""
CREATE FUNCTION hookline_journal(
    p_run text, p_tape text, p_owner bigint, p_started text, p_upto integer,
    p_tapes text[], p_action text[], p_kind text[], p_payload text[], p_meta text[],
    p_date text[], p_anchor text[])
RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    holder bigint;
BEGIN
    SELECT r.owner INTO holder FROM hookline_journal_runs r WHERE r.run = p_run FOR UPDATE;
    IF NOT FOUND THEN
        IF p_upto > 0 OR EXISTS (SELECT 1 FROM hookline_run_outcomes o WHERE o.run = p_run) THEN
            RAISE EXCEPTION USING ERRCODE = '{FENCED}', MESSAGE = format(
                'run %s was recovered as interrupted, so it cannot record more', p_run);
        END IF;
        INSERT INTO hookline_journal_runs (run, tape, owner, started)
        VALUES (p_run, p_tape, p_owner, p_started);
    ELSIF holder <> p_owner THEN
        RAISE EXCEPTION USING ERRCODE = '{FENCED}', MESSAGE = format(
            'run %s is no longer held by this store (its lease is gone)', p_run);
    END IF;
    DELETE FROM hookline_journal j WHERE j.run = p_run AND j.seq > p_upto;
    INSERT INTO hookline_journal (run, seq, tape, action, kind, payload, meta, date, anchor)
    SELECT p_run, p_upto + g.n, g.tape, g.action, g.kind, g.payload, g.meta, g.date, g.anchor
    FROM unnest(p_tapes, p_action, p_kind, p_payload, p_meta, p_date, p_anchor)
         WITH ORDINALITY AS g (tape, action, kind, payload, meta, date, anchor, n);
END
$fn$
"""
"""A run's journal write, fenced like its commit, and safe to repeat: it replaces every
row after `p_upto` (the rows this store knows are stored), so a write repeated after an
error that left its outcome unknown stores its rows once."""

_MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (  # version 1
        """CREATE TABLE hookline_entries (
            tape    text   NOT NULL,
            id      bigint NOT NULL,
            kind    text   NOT NULL,
            payload text   NOT NULL,
            meta    text   NOT NULL,
            date    text   NOT NULL,
            anchor  text,
            PRIMARY KEY (tape, id)
        )""",
        # The last anchor, and the last anchor of a name: index lookups on anchor rows only.
        "CREATE INDEX hookline_entries_anchors ON hookline_entries (tape, id) "
        "WHERE kind = 'anchor'",
        "CREATE INDEX hookline_entries_named_anchors ON hookline_entries (tape, anchor, id) "
        "WHERE kind = 'anchor'",
        """CREATE TABLE hookline_owners (
            owner     bigint      PRIMARY KEY,
            heartbeat timestamptz NOT NULL,
            host      text        NOT NULL,
            pid       integer     NOT NULL,
            opened    timestamptz NOT NULL
        )""",
        """CREATE TABLE hookline_journal_runs (
            run     text   PRIMARY KEY,
            tape    text   NOT NULL,
            owner   bigint NOT NULL,
            started text   NOT NULL
        )""",
        """CREATE TABLE hookline_journal (
            run     text    NOT NULL,
            seq     integer NOT NULL,
            tape    text    NOT NULL,
            action  text    NOT NULL,
            kind    text,
            payload text,
            meta    text,
            date    text,
            anchor  text,
            PRIMARY KEY (run, seq)
        )""",
    ),
    (  # version 2: fenced, repeatable run writes
        "DROP FUNCTION IF EXISTS hookline_apply(text, text[], text[], text[], text[], text[], "
        "text[], text[], text[])",
        """CREATE TABLE hookline_run_outcomes (
            run    text        PRIMARY KEY,
            status text        NOT NULL,
            tapes  text[]      NOT NULL,
            ids    bigint[]    NOT NULL,
            at     timestamptz NOT NULL DEFAULT now()
        )""",
        "CREATE INDEX hookline_run_outcomes_at ON hookline_run_outcomes (at)",
        _APPLY_FUNCTION,
        _JOURNAL_FUNCTION,
    ),
)
assert len(_MIGRATIONS) == SCHEMA_VERSION

_COLUMNS: Final = "e.id, e.kind, e.payload, e.meta, e.date"
_LOCK_TAPES: Final = (
    "SELECT pg_advisory_xact_lock(%s, k) FROM (SELECT DISTINCT "
    f"hashtext(split_part(t, '{SIDECAR_MARKER}', 1)) AS k FROM unnest(%s::text[]) AS t "
    "ORDER BY 1) AS keys"
)
"""Lock tapes for a write, in key order (so writers never deadlock). A sidecar tape shares
its session tape's key: a run's commit knows its session tape before it has read which
sidecars its journal wrote."""
_SETTLED: Final = "now() - pg_postmaster_start_time() > make_interval(secs => %(grace)s)"
"""The server has run for `grace` seconds: after its restart every owner lost its lock at
once, and live ones get that long to reconnect before anyone counts them as dead."""

# A write as stored: (tape, action, kind, payload JSON, meta JSON, date, anchor name).
_Row: TypeAlias = tuple[str, str, str | None, str | None, str | None, str | None, str | None]


SELECT_SINCE: Final = (f"SELECT {_COLUMNS} FROM hookline_entries e "
                       f"WHERE e.tape = %(tape)s AND e.id >= %(id)s ORDER BY e.id "
                       f"LIMIT %(limit)s")
"""The rows of a tape from one id on, at most `limit` (NULL: all) of them (`fetch_since`)."""


def _select(tape: str, query: TapeQuery) -> tuple[str, dict[str, Any]]:
    """One statement reading what `query` needs of the tape (see `fetch_all`)."""
    params: dict[str, Any] = {"tape": tape, "kinds": list(query.kind_filter)}
    exact = query.text_filter is None and query.date_range is None
    kinds = " AND e.kind = ANY(%(kinds)s::text[])" if query.kind_filter else ""
    order = " ORDER BY e.id"
    if exact and query.tail_entries is not None:
        order, params["n"] = " ORDER BY e.id DESC LIMIT %(n)s", query.tail_entries
    elif exact and query.max_entries is not None:
        order, params["n"] = " ORDER BY e.id LIMIT %(n)s", query.max_entries
    base = "FROM hookline_entries e WHERE e.tape = %(tape)s"
    named = "SELECT max(id) AS id FROM hookline_entries WHERE tape = %(tape)s AND kind = 'anchor'"
    if query.anchor_range is not None:
        start, end = query.anchor_range
        if not isinstance(start, str) or not isinstance(end, str):
            return f"SELECT {_COLUMNS} {base} ORDER BY e.id", params
        params.update(start=start, end=end)
        cte = (f"WITH a AS ({named} AND anchor = %(start)s), "
               f"b AS (SELECT min(x.id) AS id FROM hookline_entries x, a WHERE x.tape = %(tape)s "
               f"AND x.kind = 'anchor' AND x.anchor = %(end)s AND x.id > a.id)")
        head = f"SELECT {_COLUMNS} FROM hookline_entries e, a, b WHERE e.tape = %(tape)s " \
               f"AND (e.id = a.id OR e.id = b.id)"
        body = f"SELECT {_COLUMNS} FROM hookline_entries e, a, b WHERE e.tape = %(tape)s " \
               f"AND e.id > a.id AND e.id < b.id{kinds}{order}"
        return f"{cte} ({head}) UNION ALL ({body})", params
    if query.anchor is None:
        return f"SELECT {_COLUMNS} {base}{kinds}{order}", params
    if query.anchor is LAST_ANCHOR:
        cte = f"WITH a AS ({named})"
    elif isinstance(query.anchor, str):
        cte, params["name"] = f"WITH a AS ({named} AND anchor = %(name)s)", query.anchor
    else:  # not a name SQL can match: the whole tape, for apply_query
        return f"SELECT {_COLUMNS} {base} ORDER BY e.id", params
    head = f"SELECT {_COLUMNS} FROM hookline_entries e, a WHERE e.tape = %(tape)s AND e.id = a.id"
    body = (f"SELECT {_COLUMNS} FROM hookline_entries e, a WHERE e.tape = %(tape)s "
            f"AND e.id > a.id{kinds}{order}")
    return f"{cte} ({head}) UNION ALL ({body})", params


def _anchor_name(kind: str, payload: dict[str, Any]) -> str | None:
    name = payload.get("name") if kind == "anchor" else None
    return valid_text(name) if isinstance(name, str) else None


def _row(tape: str, action: str, entry: TapeEntry) -> _Row:
    return (tape, action, entry.kind, dump_json(entry.payload, "payload"),
            dump_json(entry.meta, "meta"), entry.date, _anchor_name(entry.kind, entry.payload))


def _op_row(op: JournalOp) -> _Row:
    """Check one journal op and turn it into its stored form."""
    tape, action, entry = check_journal_op(op)
    if entry is None:
        return (tape, action, None, None, None, None, None)
    return _row(tape, action, entry)


@dataclass(frozen=True)
class Statement(Generic[T]):
    """One write as a single statement: what runs it alone or in a group (group.py).
    `tapes` are the tapes it locks, which a group locks ahead of all its members (in key
    order, so that groups never deadlock); `parse` turns its rows into its result."""

    sql: str
    params: tuple[Any, ...]
    tapes: tuple[str, ...]
    parse: Callable[[list[tuple[Any, ...]]], T]


async def execute(conn: AsyncConnection, statement: Statement[T]) -> T:
    cursor = await conn.execute(statement.sql, statement.params)
    return statement.parse(await cursor.fetchall())


def apply_statement(rows: Sequence[_Row], *, run: str | None = None, owner: int | None = None,
                    upto: int | None = None, repeat: bool = False,
                    lock: Sequence[str] = ()) -> Statement[list[TapeEntry]]:
    """Perform writes in order (after `run`'s journal, which is then dropped) with one
    call of `hookline_apply`; its result is the entries stored. `owner` and `upto` make it
    a run's fenced commit (see `_APPLY_FUNCTION`), `repeat` a repetition of one."""
    return Statement(
        "SELECT o_tape, o_id, o_kind, o_payload, o_meta, o_date FROM hookline_apply("
        "%s, %s::bigint, %s::integer, %s, %s::text[], %s::text[], %s::text[], %s::text[], "
        "%s::text[], %s::text[], %s::text[], %s::text[])",
        (run, owner, upto, repeat, list(lock), *_columns(rows, 7)),
        (*lock, *{row[0] for row in rows}), _stored)


def _stored(rows: list[tuple[Any, ...]]) -> list[TapeEntry]:
    return [TapeEntry(int(entry_id), str(kind), _loads(payload), _loads(meta), str(date))
            for _tape, entry_id, kind, payload, meta, date in rows]


async def _apply(conn: AsyncConnection, rows: Sequence[_Row], *, run: str | None = None,
                 lock: Sequence[str] = ()) -> list[TapeEntry]:
    """`apply_statement` run on `conn` (inside a transaction of the caller's)."""
    return await execute(conn, apply_statement(rows, run=run, lock=lock))


def _columns(rows: Sequence[Sequence[Any]], width: int) -> list[list[Any]]:
    """Rows turned into `width` column lists (arrays for `unnest`), empty ones for no rows."""
    if not rows:
        return [[] for _ in range(width)]
    return [list(column) for column in zip(*rows, strict=True)]


def _loads(text: str | None) -> dict[str, Any]:
    return _as_dict(json.loads(text or "{}"))


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _now() -> str:
    return datetime.now(UTC).isoformat()


def journal_statement(run: str, tape: str, owner: int, upto: int,
                      rows: Sequence[_Row]) -> Statement[None]:
    """Record `rows` as the run's journal rows after `upto`, with one call of
    `hookline_journal` (fenced, and safe to repeat). It takes no tape lock, so a group
    still takes all of its tape locks before any row lock, as a commit does."""
    return Statement(
        "SELECT hookline_journal(%s, %s, %s, %s, %s, %s::text[], %s::text[], %s::text[], "
        "%s::text[], %s::text[], %s::text[], %s::text[])",
        (run, tape, owner, _now(), upto, *_columns(rows, 7)), (), _nothing)


def _nothing(rows: list[tuple[Any, ...]]) -> None:
    return None
