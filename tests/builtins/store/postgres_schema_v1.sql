-- The PostgreSQL tape store's schema version 1, as hookline created it before schema 2
-- (fenced, repeatable run writes): its tables, its indexes and its hookline_apply, with
-- the constants of that version written out (the tape lock class 0x686C0001 and the
-- sidecar marker '__sidecar__'). Reconstructed from the repository's history for the
-- upgrade test; never change it.
CREATE TABLE hookline_schema_version (version integer NOT NULL);
CREATE TABLE hookline_entries (
    tape    text   NOT NULL,
    id      bigint NOT NULL,
    kind    text   NOT NULL,
    payload text   NOT NULL,
    meta    text   NOT NULL,
    date    text   NOT NULL,
    anchor  text,
    PRIMARY KEY (tape, id)
);
CREATE INDEX hookline_entries_anchors ON hookline_entries (tape, id) WHERE kind = 'anchor';
CREATE INDEX hookline_entries_named_anchors ON hookline_entries (tape, anchor, id)
    WHERE kind = 'anchor';
CREATE TABLE hookline_owners (
    owner     bigint      PRIMARY KEY,
    heartbeat timestamptz NOT NULL,
    host      text        NOT NULL,
    pid       integer     NOT NULL,
    opened    timestamptz NOT NULL
);
CREATE TABLE hookline_journal_runs (
    run     text   PRIMARY KEY,
    tape    text   NOT NULL,
    owner   bigint NOT NULL,
    started text   NOT NULL
);
CREATE TABLE hookline_journal (
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
);
CREATE OR REPLACE FUNCTION hookline_apply(
    p_run text, p_lock text[], p_tape text[], p_action text[], p_kind text[],
    p_payload text[], p_meta text[], p_date text[], p_anchor text[])
RETURNS TABLE (o_tape text, o_id bigint, o_kind text, o_payload text, o_meta text,
               o_date text)
LANGUAGE plpgsql AS $fn$
DECLARE
    w record;
    next_id bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(1751908353, k) FROM (
        SELECT DISTINCT hashtext(split_part(t, '__sidecar__', 1)) AS k
        FROM unnest(p_lock || p_tape || ARRAY(
            SELECT j.tape FROM hookline_journal j WHERE j.run = p_run)) AS t
        ORDER BY 1) AS keys;
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
        o_tape := w.tape; o_id := next_id; o_kind := w.kind; o_payload := w.payload;
        o_meta := w.meta; o_date := w.date;
        RETURN NEXT;
    END LOOP;
    IF p_run IS NOT NULL THEN
        DELETE FROM hookline_journal j WHERE j.run = p_run;
        DELETE FROM hookline_journal_runs r WHERE r.run = p_run;
    END IF;
END
$fn$;
INSERT INTO hookline_schema_version VALUES (1);
