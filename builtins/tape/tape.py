"""The session tape: what the agent and tools use to record and read a session.

A `Tape` is a named view over an AsyncTapeStore (sync stores are adapted, so blocking I/O
runs in worker threads). It adds the session vocabulary on top of raw entries: anchors
and handoffs, events, sidecar tapes, reset and archive, forks that buffer a run's writes
and merge them back, and reading the model context (converted by `context.py`).
The fork store is in `fork.py`, the archive files in `archive.py`, the tape's name in
`naming.py` and its summaries in `summary.py`.

Payload shapes written and read here (and expected from the agent loop):

- `message`: `{"role": "user" | "assistant" | "system", "content": str | [part, ...]}`,
  parts in republic's `Message.to_dict` form (`{"type": "text", "text": ...}`, ...).
- `tool_call`: `{"calls": [{"id", "name", "arguments"}], "content"?: str}`; `arguments`
  is the raw JSON text the model produced; an optional `metadata` dict per call is kept.
- `tool_result`: `{"results": [{"call_id", "name", "output", "is_error"}]}`; `output` is
  the text given to the model (anything else is shown as JSON). The agent loop adds what
  really ran: `outcome`, `arguments`, `requested_arguments` (when rewritten), `error`.
  A result answers the nearest earlier call with its `call_id` that has no result yet
  (`context.py`), so ids need be unique only within one `tool_call` entry.
- `anchor`: `{"name": str, "state": dict}`.
- `event`: `{"name": str, "data": dict}` (`append_event`). Token usage is read from the
  most recent event whose `data` holds a `usage` dict in republic's `TokenUsage` field
  names (`input_tokens`, `output_tokens`, `cached_tokens`, ...); the agent loop records
  it on its `run` event.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime
from os import PathLike
from pathlib import Path
from typing import Any, Final

import anyio

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.messages import ModelMessage, as_model_messages
from hookline.kernel.tape import (
    LAST_ANCHOR,
    AsyncTapeStore,
    TapeContext,
    TapeEntry,
    TapeQuery,
    TapeSidecar,
    TapeStore,
)

from ..store.asyncstore import (
    append_batch,
    as_async_store,
    journal_of,
    recover_abandoned,
    tape_pages,
)
from ..store.entries import SIDECAR_MARKER
from .archive import file_safe, write_archive
from .context import ContextMessages, messages_from_entries
from .fork import ForkStore, observed_commit
from .naming import resolved_workspace, session_tape_name
from .summary import AnchorInfo, TapeInfo, anchor_info, tape_info

__all__ = [
    "BOOTSTRAP_ANCHOR",
    "Tape",
]

logger = logging.getLogger("hookline.builtins.tape.tape")

BOOTSTRAP_ANCHOR: Final = "session/start"
"""Name of the anchor that starts a session (and every reset)."""


class Tape:
    """A session tape over a store; immutable (forks and scopes are new Tape objects).

    `Tape(store, name, context=TapeContext(), sidecars=(), session=None)`: `store` may be
    sync or async (`store` always returns the async form); `sidecars` are de-duplicated by
    name, first wins. An empty name raises ValueError. `session` (`{"id", "workspace"}`,
    given by `session_tape`) is written in the `meta` of the `session/start` anchors this
    tape writes, so a session can be found and listed by its id (`sessions.py`): tape
    names are hashes. Meta is never model context, so the model sees the reference anchor.
    """

    __slots__ = ("_context", "_name", "_session", "_sidecars", "_store")

    def __init__(
        self,
        store: TapeStore | AsyncTapeStore,
        name: str,
        context: TapeContext | None = None,
        sidecars: Iterable[TapeSidecar] = (),
        *,
        session: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"A tape needs a non-empty name, got {name!r}")
        if context is not None and not isinstance(context, TapeContext):
            raise TypeError(f"context must be a TapeContext, got {type(context).__name__}")
        self._store = as_async_store(store)
        self._name = name
        self._context = context if context is not None else TapeContext()
        mounted: dict[str, TapeSidecar] = {}
        for sidecar in sidecars:
            sidecar_name = getattr(sidecar, "name", None)
            if not isinstance(sidecar_name, str) or not sidecar_name:
                raise TypeError(f"A tape sidecar needs a non-empty str name, got {sidecar!r}")
            mounted.setdefault(sidecar_name, sidecar)
        self._sidecars = tuple(mounted.values())
        self._session = dict(session) if session else None

    # -- identity -----------------------------------------------------------------------

    @property
    def store(self) -> AsyncTapeStore:
        return self._store

    @property
    def name(self) -> str:
        return self._name

    @property
    def context(self) -> TapeContext:
        return self._context

    @property
    def session(self) -> dict[str, str] | None:
        """The session id and workspace this tape records, when known."""
        return dict(self._session) if self._session else None

    def _start_meta(self) -> dict[str, Any]:
        return {"session": dict(self._session)} if self._session else {}

    @property
    def sidecars(self) -> tuple[TapeSidecar, ...]:
        return self._sidecars

    def __repr__(self) -> str:
        names = [sidecar.name for sidecar in self._sidecars]
        return f"Tape({self._name!r}, store={self._store!r}, sidecars={names!r})"

    def scoped(self, name: str) -> Tape:
        """The same store, context and sidecars under another tape name."""
        return Tape(self._store, name, self._context, self._sidecars)

    def with_context(self, context: TapeContext) -> Tape:
        return Tape(self._store, self._name, context, self._sidecars, session=self._session)

    def session_tape(self, session_id: str, workspace: str | PathLike[str]) -> Tape:
        """This tape's setup on the session's tape (`session_tape_name`)."""
        resolved = resolved_workspace(workspace)
        return Tape(self._store, session_tape_name(session_id, resolved), self._context,
                    self._sidecars, session={"id": session_id, "workspace": resolved})

    def query(self) -> TapeQuery:
        """A query bound to this tape and store: `await tape.query().kinds(...).all()`."""
        return TapeQuery(self._name, store=self._store)

    # -- writing and reading ------------------------------------------------------------

    async def append(self, kind: str, payload: Mapping[str, Any], **meta: Any) -> TapeEntry:
        """Append an entry dated now; returns it as stored (with its id).

        A store whose `append` returns nothing yields the entry as sent (id 0).
        """
        entry = TapeEntry.new(kind, dict(payload), **meta)
        stored = await self._store.append(self._name, entry)
        return stored if isinstance(stored, TapeEntry) else entry

    async def entries(self, query: TapeQuery | None = None) -> list[TapeEntry]:
        """Entries of this tape (all, or those `query` selects; its tape must be this one)."""
        if query is None:
            query = self.query()
        elif query.tape != self._name:
            raise ValueError(f"query is for tape {query.tape!r}, not {self._name!r}")
        return list(await self._store.fetch_all(query))

    async def append_event(
        self, name: str, payload: Mapping[str, Any] | None = None, **meta: Any
    ) -> TapeEntry:
        """An `event` entry `{"name": name, "data": payload}`."""
        _check_name(name, "event name")
        return await self.append("event", {"name": name, "data": dict(payload or {})}, **meta)

    async def handoff(
        self, name: str, state: Mapping[str, Any] | None = None, **meta: Any
    ) -> TapeEntry:
        """Start a new phase: an `anchor` entry, then a `handoff` event; returns the anchor.

        With the default context, model context restarts after this anchor; the handoff
        event is the first entry after it and carries `state` (a `summary` in particular)
        into the new context as a short note.
        """
        _check_name(name, "anchor name")
        state_dict = dict(state or {})
        anchor = await self.append("anchor", {"name": name, "state": state_dict}, **meta)
        await self.append_event("handoff", {"name": name, "state": state_dict}, **meta)
        return anchor

    async def ensure_bootstrap_anchor(self) -> TapeEntry | None:
        """Write a `session/start` anchor (state `owner: human`) if the tape has no anchor.

        Returns the new anchor, or None when the tape already had one. The store checks
        and writes in one transaction (`append_many` with `bootstrap`), so concurrent
        callers, in any number of processes, leave exactly one. In a fork the anchor is
        buffered with that condition and the check is made again when the run is merged.
        """
        if await self._has_anchor():
            return None
        anchor = TapeEntry.new("anchor", {"name": BOOTSTRAP_ANCHOR, "state": {"owner": "human"}},
                               **self._start_meta())
        if isinstance(self._store, ForkStore):
            return await self._store.append_bootstrap(self._name, anchor)
        stored = await append_batch(self._store, self._name, [], bootstrap=anchor)
        return stored[0] if stored else None

    async def _has_anchor(self) -> bool:
        """Whether the tape has an anchor. In a fork whose context starts at the last
        anchor, the context read answers (it fails when there is none): the run's first
        step then reads only what was written since (see `KeptContext`)."""
        store = self._store
        if not (isinstance(store, ForkStore) and self._context.select is None
                and self._context.anchor is LAST_ANCHOR):
            return bool(await self.entries(self.query().kinds("anchor").limit(1)))
        query = self._context.build_query(self.query())
        try:
            await self._context_entries(query, True)
        except HooklineError as exc:
            if exc.kind is not ErrorKind.not_found:
                raise
            return False
        return True

    async def flush(self) -> None:
        """Make what the run recorded so far durable now.

        On a fork over a store with a run journal (the SQLite store), the entries written
        since the last flush go to the journal in one commit; a failure raises
        `TapeRecordError`. Elsewhere (no fork, temp/ sessions, stores without a journal)
        it does nothing.
        """
        if isinstance(self._store, ForkStore):
            await self._store.flush()

    async def info(self) -> TapeInfo:
        return tape_info(self._name, await self.entries())

    async def anchors(self, limit: int = 20) -> list[AnchorInfo]:
        """The last `limit` anchors, oldest first."""
        _check_count(limit, "limit", minimum=0)
        if limit == 0:
            return []
        found = await self.entries(self.query().kinds("anchor"))
        return [anchor_info(entry) for entry in found[-limit:]]

    async def search(self, text: str, limit: int = 20) -> list[TapeEntry]:
        """The `limit` most recent entries whose JSON contains `text` (any case), in order."""
        if not isinstance(text, str) or not text.strip():
            raise HooklineError(ErrorKind.invalid_input, "Search text must be a non-empty string.")
        _check_count(limit, "limit", minimum=1)
        found = await self.entries(self.query().query(text))
        return found[-limit:]

    async def read_messages(self, *, shared: bool = False) -> list[Any]:
        """Model context from this tape.

        Entries are selected by the context's anchor rule and window; when that anchor
        does not exist (yet), the whole tape is used (within the window). In a fork the
        window bounds only the entries recorded before the run: the run's own entries are
        all kept, so a long run never loses its own beginning. Entries whose meta has
        `context: False` are skipped. `context.select(entries, context)` converts them
        when set (it may be async); otherwise `messages_from_entries` does. The messages are
        the caller's to change, unless `shared`: then a fork may return the very messages
        it keeps for its next read, which the caller must not change (the agent loop).
        """
        converter = self._converter()
        selected = await self._context_selection(converter is not None)
        if converter is not None:  # it leaves out `context: False` itself
            return converter.messages(selected, shared=shared)
        selected = [entry for entry in selected if entry.meta.get("context") is not False]
        if self._context.select is None:
            return messages_from_entries(selected)
        result = self._context.select(selected, self._context)
        if inspect.isawaitable(result):
            result = await result
        return list(result)

    async def read_model_messages(self) -> list[ModelMessage]:
        """`read_messages()` as ModelMessages, for a model call (the agent loop). In a
        fork, with the default conversion, they are kept between reads and shared:
        frozen, with read-only `tool_calls` (see `ContextMessages.model_messages`)."""
        converter = self._converter()
        if converter is not None:
            return converter.model_messages(await self._context_selection(True))
        return as_model_messages(await self.read_messages(shared=True))

    def _converter(self) -> ContextMessages | None:
        """In a fork, with the default conversion: the converter that reads the run's
        entries without copying them and converts only what was added since its last
        read; else None."""
        if isinstance(self._store, ForkStore) and self._context.select is None:
            return self._store.kept_context(self._name).messages
        return None

    async def _context_selection(self, shared: bool) -> list[TapeEntry]:
        """The entries the context's anchor rule and window select; the whole tape
        (within the window) when that anchor does not exist (yet)."""
        query = self._context.build_query(self.query())
        try:
            return await self._context_entries(query, shared)
        except HooklineError as exc:
            if exc.kind is not ErrorKind.not_found:
                raise
            return await self._context_entries(replace(query, anchor=None), shared)

    async def _context_entries(self, query: TapeQuery, shared: bool) -> list[TapeEntry]:
        if isinstance(self._store, ForkStore):
            return await self._store.fetch_all(query, whole_run=True, shared=shared)
        return await self.entries(query)

    # -- sidecars -----------------------------------------------------------------------

    def get_sidecar(self, name: str) -> TapeSidecar | None:
        """The mounted sidecar called `name`, or None."""
        for sidecar in self._sidecars:
            if sidecar.name == name:
                return sidecar
        return None

    def sidecar_tape_name(self, name: str) -> str:
        """`<tape>__sidecar__<name>`; KeyError when no sidecar of that name is mounted."""
        if self.get_sidecar(name) is None:
            raise KeyError(name)
        return f"{self._name}{SIDECAR_MARKER}{name}"

    def sidecar_tape(self, name: str) -> Tape:
        """The sidecar's tape (same store, so inside a fork it is buffered too).

        Its context covers the whole tape and it mounts no sidecars of its own.
        """
        return Tape(self._store, self.sidecar_tape_name(name), TapeContext(anchor=None))

    async def reset_sidecar(self, name: str, reason: str = "gc") -> str:
        """Reset one sidecar's tape; `ok` or `<name> reset failed: <error>`.

        Also records a `sidecar.reset` event (excluded from context) on this tape.
        """
        tape_name = self.sidecar_tape_name(name)
        return await self._reset_sidecar_tape(name, tape_name, reason)

    async def _reset_sidecar_tape(self, name: str, tape_name: str, reason: str) -> str:
        data: dict[str, Any] = {"sidecar": name, "reason": reason}
        try:
            await self._store.reset(tape_name)
        except Exception as exc:
            logger.warning("tape.sidecar_reset_failed sidecar=%s tape=%s: %s", name, tape_name, exc)
            data.update(status="error", error=f"{type(exc).__name__}: {exc}")
            result = f"{name} reset failed: {exc}"
        else:
            data["status"] = "ok"
            result = "ok"
        await self.append_event("sidecar.reset", data, context=False)
        return result

    # -- reset and archive --------------------------------------------------------------

    async def reset(
        self, state: Mapping[str, Any] | None = None, keep_sidecars: Iterable[str] = ()
    ) -> TapeEntry:
        """Clear the tape and start over; returns the new `session/start` anchor.

        The anchor's state is `{"owner": "human", **state}`. Every mounted sidecar not in
        `keep_sidecars` is reset too, each recorded as a `sidecar.reset` event (status
        `ok` or `error`, reason `tape.reset`, excluded from context). Names in
        `keep_sidecars` that are not mounted are ignored.
        """
        kept = {keep_sidecars} if isinstance(keep_sidecars, str) else set(keep_sidecars)
        await self._store.reset(self._name)
        anchor = await self.append(
            "anchor", {"name": BOOTSTRAP_ANCHOR, "state": {"owner": "human", **dict(state or {})}},
            **self._start_meta(),
        )
        for sidecar in self._sidecars:
            if sidecar.name in kept:
                continue
            await self._reset_sidecar_tape(
                sidecar.name, self.sidecar_tape_name(sidecar.name), "tape.reset"
            )
        return anchor

    async def archive(
        self, directory: str | PathLike[str], state: Mapping[str, Any] | None = None
    ) -> Path:
        """Write the tape and every mounted sidecar to JSON-lines backups, then reset.

        Files are `<directory>/<tape name>.jsonl.<UTC stamp>.bak`, one entry per line
        (`id`, `kind`, `payload`, `meta`, `date`). If the main tape cannot be archived
        nothing is reset and the error propagates. A sidecar whose archive failed is
        kept (not reset). After the reset: one `sidecar.archive` event per sidecar
        (status `ok` with `path`, or `error` with `error`) and, for each failure, a
        `sidecar.reset` event with status `skipped` and cause `archive_failed`; all of
        them excluded from context. The new anchor's state holds the main archive path
        under `archive` (plus `state`). Returns the main archive path.
        """
        folder = Path(directory).expanduser()
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        main_path = folder / f"{file_safe(self._name)}.jsonl.{stamp}.bak"
        await write_archive(main_path, tape_pages(self._store, self._name))

        outcomes: list[tuple[str, dict[str, Any]]] = []
        failed: set[str] = set()
        for sidecar in self._sidecars:
            tape_name = self.sidecar_tape_name(sidecar.name)
            path = folder / f"{file_safe(tape_name)}.jsonl.{stamp}.bak"
            try:
                await write_archive(path, tape_pages(self._store, tape_name))
            except Exception as exc:
                logger.warning(
                    "tape.sidecar_archive_failed sidecar=%s tape=%s: %s",
                    sidecar.name,
                    tape_name,
                    exc,
                )
                failed.add(sidecar.name)
                error = f"{type(exc).__name__}: {exc}"
                outcomes.append((sidecar.name, {"status": "error", "error": error}))
            else:
                outcomes.append((sidecar.name, {"status": "ok", "path": str(path)}))

        await self.reset({"archive": str(main_path), **dict(state or {})}, keep_sidecars=failed)
        for name, outcome in outcomes:
            await self.append_event("sidecar.archive", {"sidecar": name, **outcome}, context=False)
            if name in failed:
                await self.append_event(
                    "sidecar.reset",
                    {"sidecar": name, "status": "skipped", "cause": "archive_failed"},
                    context=False,
                )
        return main_path

    # -- forks --------------------------------------------------------------------------

    @asynccontextmanager
    async def fork(self, merge_back: bool = True) -> AsyncIterator[Tape]:
        """A Tape whose writes to this tape and its sidecars' tapes are held for the run.

        Reads through the fork see the parent's entries followed by the fork's (an anchor
        written in the fork hides earlier entries for anchor queries; a reset in the fork
        hides the parent's entries). Other tapes pass straight through. Appends through
        the fork drop non-text parts from list-valued `content`/`prompt` payloads.

        Writes are buffered in memory; `flush()` makes those so far durable in the
        store's run journal when it has one (the SQLite store), where readers of the tape
        do not see them yet and where they survive the process dying: the next opening
        of the store moves them onto the tape with an interrupted marker (and, when the
        run's commit failed, the SQLite store's next call).

        When the block exits - normally, with an error, or cancelled - the run is merged
        into this tape (unless `merge_back` is False; pass `should_merge_back(session_id)`
        to skip `temp/` sessions; such a fork never touches the store). With a journal,
        the whole run (every tape, sidecars included) lands in one transaction: its
        entries are contiguous on each tape, no other run's entries between them, and a
        conditional bootstrap anchor (`ensure_bootstrap_anchor`) is written only if the
        tape still has no anchor. Without one, tapes merge one by one, sidecars first,
        each in one `append_many` when the store has it (else one `append` per entry,
        keeping what was not written); a failing sidecar merge is then logged and
        recorded as a `sidecar.merge` event (status `error`, excluded from context). The
        parent assigns new ids. The merge runs shielded from cancellation, so a cancelled
        run keeps what it recorded. When the block failed, a merge failure is logged and
        the block's own exception propagates; after a clean exit a merge failure
        propagates. The fork tape must not be used after the block.
        """
        tapes = {sidecar.name: self.sidecar_tape_name(sidecar.name) for sidecar in self._sidecars}
        journal = journal_of(self._store) if merge_back else None
        if journal is not None:  # a run another process left is on the tape before this reads
            await recover_abandoned(self._store)
        store = ForkStore(self._store, [*tapes.values(), self._name], self._name, journal)
        forked = Tape(store, self._name, self._context, self._sidecars, session=self._session)
        try:
            yield forked
        except BaseException:
            if merge_back:
                try:
                    with anyio.CancelScope(shield=True):
                        await observed_commit(self._merge_fork, store, tapes)
                except Exception:
                    logger.exception("tape.fork_merge_failed tape=%s", self._name)
            raise
        else:
            if merge_back:
                with anyio.CancelScope(shield=True):
                    await observed_commit(self._merge_fork, store, tapes)
        finally:
            store.closed = True

    async def _merge_fork(self, store: ForkStore, sidecar_tapes: dict[str, str]) -> None:
        if store.journal is not None:
            await store.commit()
            return
        for name, tape_name in sidecar_tapes.items():
            try:
                await store.merge(tape_name)
            except Exception as exc:
                logger.warning(
                    "tape.sidecar_merge_failed sidecar=%s tape=%s: %s", name, tape_name, exc
                )
                error = f"{type(exc).__name__}: {exc}"
                # Recorded through the fork so it lands on the main tape with the run.
                await store.append(
                    self._name,
                    TapeEntry.new(
                        "event",
                        {
                            "name": "sidecar.merge",
                            "data": {"sidecar": name, "status": "error", "error": error},
                        },
                        context=False,
                    ),
                )
        await store.merge(self._name)


# -- small helpers ----------------------------------------------------------------------


def _check_name(name: Any, what: str) -> None:
    if not isinstance(name, str) or not name.strip():
        raise HooklineError(ErrorKind.invalid_input, f"The {what} must be a non-empty string.")


def _check_count(value: Any, what: str, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise HooklineError(
            ErrorKind.invalid_input, f"{what} must be an integer >= {minimum}, got {value!r}."
        )
