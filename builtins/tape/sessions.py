"""Sessions as the user sees them: list, find, search, read, rename, archive and delete
them, and the folder's current session.

Tapes are named by hashes (`session_tape_name`); the `session/start` anchor a tape begins
with carries the session id and workspace in its `meta` (`Tape(session=...)`), which is
how a session is found again. A session's title is its newest `session.title` event
(`rename_session`), else its first user message. Tapes written before that (or by other
tools) are listed by their tape name and can be named by it. Everything here goes through
the `TapeStore` protocol (`list_tapes`, `fetch_all`, `append`, `reset`), so it works on
any store a plugin provides, sync or async.

The folder's current session is what `hookline run` and `hookline chat` continue when
given no session: `cli:default`, until `--new` starts another one there. It is kept in
`<hookline home>/current_sessions.json` (workspace -> session id, at most
`MAX_CURRENT_SESSIONS` folders, the least recently set dropped first).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from hookline.kernel.errors import HooklineError
from hookline.kernel.tape import AsyncTapeStore, TapeEntry, TapeQuery, TapeStore

from ..host.files import open_regular_file
from ..privacy.files import write_private_file
from ..store.asyncstore import as_async_store
from ..store.entries import is_sidecar_tape
from .context import RESUMES, starts_turn
from .naming import resolved_workspace, session_tape_name
from .tape import BOOTSTRAP_ANCHOR

__all__ = [
    "CURRENT_SESSIONS_FILE",
    "DEFAULT_SESSION",
    "MAX_CURRENT_SESSIONS",
    "MAX_TITLE",
    "TITLE_EVENT",
    "SessionError",
    "SessionMatch",
    "SessionSummary",
    "checked_title",
    "current_session",
    "find_session",
    "last_turns",
    "list_sessions",
    "local_date",
    "new_session_id",
    "one_line",
    "rename_session",
    "search_sessions",
    "set_current_session",
    "transcript",
]

DEFAULT_SESSION = "cli:default"
CURRENT_SESSIONS_FILE = "current_sessions.json"
MAX_CURRENT_SESSIONS = 1000
_SHOWN_OUTPUT = 400
"""Characters of a tool's output a transcript shows."""
TITLE_EVENT = "session.title"
MAX_TITLE = 200
"""Characters a title given to `rename_session` may have (after its whitespace is tidied)."""
_TITLE_WIDTH = 50
"""Characters of a title `list` and `search` show."""
_MATCH_WIDTH = 80
"""Characters of a matching line `search` shows, around the match."""
_TITLE_PROBE = 8
"""Messages read from a tape's start to find its first user message."""


class SessionError(LookupError):
    """A session that cannot be found, or a name that matches several."""


@dataclass(frozen=True)
class SessionSummary:
    """One session: its tape, id and workspace (None when the tape does not record them),
    the number of turns (`run` events), entries, and the dates of its first and last."""

    tape: str
    session_id: str | None
    workspace: str | None
    turns: int
    entries: int
    started: str
    last_activity: str
    title: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"tape": self.tape, "session_id": self.session_id, "title": self.title,
                "workspace": self.workspace, "turns": self.turns, "entries": self.entries,
                "started": self.started, "last_activity": self.last_activity}


@dataclass(frozen=True)
class SessionMatch:
    """A session `search_sessions` found: its summary and its newest matching line (the
    entry's id, `user` or `assistant`, and the line shortened around the match)."""

    session: SessionSummary
    entry: int
    role: str
    line: str

    def as_dict(self) -> dict[str, Any]:
        return {**self.session.as_dict(),
                "match": {"entry": self.entry, "role": self.role, "line": self.line}}


def _workspace_key(workspace: str | os.PathLike[str]) -> str:
    return resolved_workspace(workspace)


def _tape_prefix(workspace: str | os.PathLike[str]) -> str:
    return session_tape_name("", _workspace_key(workspace)).split("__", 1)[0] + "__"


# -- finding and listing ----------------------------------------------------------------


async def list_sessions(store: TapeStore | AsyncTapeStore,
                        workspace: str | os.PathLike[str] | None = None) -> list[SessionSummary]:
    """Every session on the store (only `workspace`'s when given), most recent first.

    One tape at a time, reading its first and last entries, anchors and events: memory
    holds one tape's events, whatever the number of sessions.
    """
    async_store = as_async_store(store)
    prefix = _tape_prefix(workspace) if workspace is not None else ""
    summaries = []
    for tape in await async_store.list_tapes():
        if is_sidecar_tape(tape) or not tape.startswith(prefix):
            continue
        summary = await _summary(async_store, tape)
        if summary is not None:
            summaries.append(summary)
    summaries.sort(key=lambda item: item.last_activity, reverse=True)
    return summaries


async def _summary(store: AsyncTapeStore, tape: str) -> SessionSummary | None:
    """The summary from the tape's ends, its first messages, its anchors and its events:
    never the whole tape (the messages and tool results are most of a long session)."""
    first = list(await store.fetch_all(TapeQuery(tape).limit(1)))
    last = list(await store.fetch_all(TapeQuery(tape).tail(1)))
    if not first or not last:
        return None  # emptied meanwhile
    events = list(await store.fetch_all(TapeQuery(tape).kinds("event")))
    turns = sum(1 for entry in events if entry.payload.get("name") == "run")
    # Ids are gapless per tape from 1 (the store contract), so the last id counts them;
    # a store that assigns none (id 0) is counted the long way.
    count = last[0].id or len(list(await store.fetch_all(TapeQuery(tape))))
    identity = await _identity(store, tape)
    title = _title_in(events) or await _first_user_message(store, tape)
    return SessionSummary(tape=tape, session_id=identity.get("id"),
                          workspace=identity.get("workspace"), turns=turns, entries=count,
                          started=first[0].date,
                          last_activity=await _last_activity(store, tape, last[0], events),
                          title=one_line(title, _TITLE_WIDTH))


async def _last_activity(store: AsyncTapeStore, tape: str, last: TapeEntry,
                         events: Sequence[TapeEntry]) -> str:
    """The date of the newest entry that is not a title: renaming an old session does not
    make it the most recent one (which `--continue` would pick)."""
    if not _is_title(last) or not last.id:
        return last.date
    titles = {entry.id for entry in events if _is_title(entry)}
    trailing = 0
    while last.id - trailing in titles:
        trailing += 1
    before = list(await store.fetch_all(TapeQuery(tape).tail(trailing + 1).limit(1)))
    return before[0].date if before else last.date


def _is_title(entry: TapeEntry) -> bool:
    return entry.kind == "event" and entry.payload.get("name") == TITLE_EVENT


def _title_in(events: Iterable[TapeEntry]) -> str:
    """The newest title the session was given, or "" when it was never renamed."""
    for entry in reversed(list(events)):
        data = entry.payload.get("data") if _is_title(entry) else None
        title = data.get("title") if isinstance(data, dict) else None
        if isinstance(title, str) and title.strip():
            return title
    return ""


async def _first_user_message(store: AsyncTapeStore, tape: str) -> str:
    for entry in await store.fetch_all(TapeQuery(tape).kinds("message").limit(_TITLE_PROBE)):
        if entry.payload.get("role") == "user":
            return _content_text(entry.payload.get("content"))
    return ""


def one_line(text: str, width: int) -> str:
    """`text` as one line of at most `width` characters, ending with an ellipsis when cut.
    Runs of whitespace (newlines included) become one space, and other control and format
    characters are dropped: a title comes from what anyone wrote to the session, so an
    escape sequence in it must not move the cursor, clear or retitle the terminal."""
    printable = "".join(char if char.isprintable() else " " if char.isspace() else ""
                        for char in text)
    line = " ".join(printable.split())
    return line if len(line) <= width else line[:width - 1].rstrip() + "…"


async def _identity(store: AsyncTapeStore, tape: str) -> dict[str, str]:
    return _identity_in(await store.fetch_all(TapeQuery(tape).kinds("anchor")))


def _identity_in(entries: Iterable[TapeEntry]) -> dict[str, str]:
    """The id and workspace from the newest `session/start` anchor that records them."""
    for entry in reversed(list(entries)):
        if entry.kind != "anchor":
            continue
        session = entry.meta.get("session")
        if entry.payload.get("name") == BOOTSTRAP_ANCHOR and isinstance(session, dict):
            return {key: str(value) for key, value in session.items()
                    if key in ("id", "workspace") and isinstance(value, str)}
    return {}


async def find_session(store: TapeStore | AsyncTapeStore, name: str,
                       workspace: str | os.PathLike[str]) -> str:
    """The tape of session `name`: in `workspace`, else the one session of that id in any
    folder, else the tape called `name`. SessionError says why none (or several) match."""
    async_store = as_async_store(store)
    tapes = [tape for tape in await async_store.list_tapes() if not is_sidecar_tape(tape)]
    here = session_tape_name(name, _workspace_key(workspace))
    if here in tapes:
        return here
    if name in tapes:
        return name
    elsewhere = []
    for tape in tapes:
        identity = await _identity(async_store, tape)
        if identity.get("id") == name:
            elsewhere.append((tape, identity.get("workspace", "?")))
    if len(elsewhere) == 1:
        return elsewhere[0][0]
    if elsewhere:
        folders = ", ".join(sorted(folder for _, folder in elsewhere))
        raise SessionError(f"session {name!r} exists in several folders ({folders}); "
                           f"choose one with -w FOLDER")
    raise SessionError(f"no session {name!r} in {_workspace_key(workspace)} or elsewhere; "
                       f"'hookline sessions' lists them")


# -- searching and renaming ----------------------------------------------------------------


async def search_sessions(store: TapeStore | AsyncTapeStore, text: str,
                          workspace: str | os.PathLike[str] | None = None) -> list[SessionMatch]:
    """The sessions whose user or assistant text contains `text`, ignoring case, most
    recent first, each with its newest matching line.

    One tape at a time: the store is asked for the tape's messages whose JSON contains the
    text (`TapeQuery.query`, which a store may answer without returning the rest), and
    only the newest real match is kept, so memory holds one tape's matches whatever the
    number of sessions. A text JSON would escape (quotes, backslashes) is looked for in
    the tape's messages without that filter.
    """
    if not text.strip():
        raise ValueError("give some text to search for (hookline sessions search TEXT)")
    async_store = as_async_store(store)
    prefix = _tape_prefix(workspace) if workspace is not None else ""
    needle = text.casefold()
    as_json = json.dumps(text, ensure_ascii=False)[1:-1] == text
    found = []
    for tape in await async_store.list_tapes():
        if is_sidecar_tape(tape) or not tape.startswith(prefix):
            continue
        query = TapeQuery(tape).kinds("message", "tool_call")
        newest = None
        for entry in await async_store.fetch_all(query.query(text) if as_json else query):
            newest = _match(entry, needle, text) or newest
        if newest is None:
            continue
        summary = await _summary(async_store, tape)
        if summary is not None:
            found.append(SessionMatch(summary, *newest))
    found.sort(key=lambda item: item.session.last_activity, reverse=True)
    return found


def _match(entry: TapeEntry, needle: str, text: str) -> tuple[int, str, str] | None:
    """(id, role, line) when the entry's user or assistant text contains the needle."""
    if entry.kind == "message":
        role = str(entry.payload.get("role"))
        said = _content_text(entry.payload.get("content"))
    else:  # a tool call's content is what the assistant said before calling
        role, content = "assistant", entry.payload.get("content")
        said = content if isinstance(content, str) else ""
    if role not in ("user", "assistant") or needle not in said.casefold():
        return None
    lines = [line for line in said.splitlines() if needle in line.casefold()]
    return entry.id, role, _around(lines[0] if lines else said, text)


def _around(line: str, text: str) -> str:
    """The line on one line, cut to about `_MATCH_WIDTH` characters around the match."""
    line = one_line(line, len(line))
    if len(line) <= _MATCH_WIDTH:
        return line
    found = re.search(re.escape(" ".join(text.split())), line, re.IGNORECASE)
    start = max(0, min((found.start() if found else 0) - _MATCH_WIDTH // 3,
                       len(line) - _MATCH_WIDTH))
    piece = line[start:start + _MATCH_WIDTH].strip()
    return ("…" if start else "") + piece + ("…" if start + _MATCH_WIDTH < len(line) else "")


async def rename_session(store: TapeStore | AsyncTapeStore, tape: str, title: str) -> str:
    """Give the session on `tape` a title; returns it as stored (on one line).

    The title is an `event` entry named `session.title` appended to the session's own
    tape, as everything known of a session is: it travels with the tape when the tape is
    archived, copied to another store or deleted, and it needs nothing of the store but
    `append`. An event is neither a message nor an anchor, so it is no model context and
    does not change where the next turn's context starts (it is marked `context=False`,
    as the other bookkeeping events are). The newest such event is the title, so renaming
    again replaces it while the tape keeps its history.
    """
    line = checked_title(title)
    entry = TapeEntry.new("event", {"name": TITLE_EVENT, "data": {"title": line}},
                          context=False)
    await as_async_store(store).append(tape, entry)
    return line


def checked_title(title: str) -> str:
    """The title on one line; ValueError when that leaves nothing or is too long."""
    line = one_line(title, len(title))
    if not line:
        raise ValueError("a session's title cannot be empty; give some text, for example: "
                         "hookline sessions rename ID 'fixing the parser'")
    if len(line) > MAX_TITLE:
        raise ValueError(f"a session's title is at most {MAX_TITLE} characters (this one has "
                         f"{len(line)}); give a shorter one")
    return line


# -- reading -------------------------------------------------------------------------------


def transcript(entries: Iterable[TapeEntry]) -> Iterator[str]:
    """A readable transcript, a block of lines per entry: what the user and the assistant
    said, tool calls with the arguments that ran, denials, failures, interrupted runs."""
    for entry in entries:
        yield from _entry_lines(entry)


async def last_turns(store: TapeStore | AsyncTapeStore, tape: str,
                     turns: int) -> tuple[list[TapeEntry], int]:
    """The entries of the tape's last `turns` turns (a turn: a user message and everything
    after it until the next one), and how many turns the tape has. With that many turns
    or fewer, the whole tape."""
    if turns < 1:
        raise ValueError(f"--last takes a positive number of turns, got {turns}")
    async_store = as_async_store(store)
    messages = await async_store.fetch_all(TapeQuery(tape).kinds("message"))
    starts = [entry.id for entry in messages if starts_turn(entry)]
    if len(starts) > turns and starts[-turns]:
        # Ids are gapless (the store contract), so the tail from that message is known.
        last = list(await async_store.fetch_all(TapeQuery(tape).tail(1)))
        if last and last[0].id >= starts[-turns]:
            tail = list(await async_store.fetch_all(
                TapeQuery(tape).tail(last[0].id - starts[-turns] + 1)))
            if tail and tail[0].id == starts[-turns]:
                return tail, len(starts)
    entries = list(await async_store.fetch_all(TapeQuery(tape)))
    users = [index for index, entry in enumerate(entries) if starts_turn(entry)]
    if len(users) > turns:
        return entries[users[-turns]:], len(users)
    return entries, len(users)


def _entry_lines(entry: TapeEntry) -> Iterator[str]:
    payload, kind = entry.payload, entry.kind
    if kind == "message" and entry.meta.get(RESUMES):
        return  # the compaction's line above says it; the message was shown before it
    if kind == "message":
        role = payload.get("role")
        label = {"user": "you", "assistant": "assistant"}.get(str(role), str(role))
        yield f"{label}: {_content_text(payload.get('content'))}"
    elif kind == "tool_call":
        content = payload.get("content")
        if isinstance(content, str) and content.strip():
            yield f"assistant: {content}"
        for call in _dicts(payload.get("calls")):
            yield f"[tool] {call.get('name')} {call.get('arguments', '')}"
    elif kind == "tool_result":
        for result in _dicts(payload.get("results")):
            yield from _result_lines(result)
    elif kind == "anchor":
        name = payload.get("name")
        yield f"--- {name} ({local_date(entry.date)})"
    elif kind == "event":
        yield from _event_lines(payload)
    elif kind == "error":
        yield f"error: {payload.get('message', payload)}"


def _result_lines(result: dict[str, Any]) -> Iterator[str]:
    name, outcome = result.get("name"), result.get("outcome")
    if "requested_arguments" in result:
        yield (f"[tool] {name} ran with {json.dumps(result.get('arguments'), ensure_ascii=False)}"
               f" (rewritten before it ran: your edit or a plugin; asked: "
               f"{json.dumps(result.get('requested_arguments'), ensure_ascii=False)})")
    if outcome == "denied":
        yield f"[tool] {name} denied: {result.get('error', '')}"
    elif outcome == "replaced":
        yield f"[tool] {name} not run: a plugin gave its result"
    elif outcome == "unknown":
        yield f"[tool] {name} outcome unknown: hookline stopped while it ran"
    elif outcome == "cancelled":
        yield f"[tool] {name} cancelled: the user stopped the turn while it ran"
    elif outcome == "failed" or (outcome is None and result.get("is_error")):
        yield f"[tool] {name} failed: {result.get('error') or _shortened(result.get('output'))}"
    if outcome in (None, "ran", "replaced"):
        yield f"[result] {name}: {_shortened(result.get('output'))}"


def _event_lines(payload: dict[str, Any]) -> Iterator[str]:
    name = payload.get("name")
    raw = payload.get("data")
    data: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if name == "run":
        status = data.get("status", "ok")
        if status != "ok":
            error = data.get("error")
            yield f"(turn {status}{f': {error}' if error else ''})"
    elif name == "handoff":
        state = data.get("state")
        summary = state.get("summary") if isinstance(state, dict) else None
        yield f"--- handoff to {data.get('name')}{f': {summary}' if summary else ''}"
    elif name == TITLE_EVENT:
        yield f"--- renamed: {data.get('title')}"
    elif name == "approval" and data.get("decision") != "denied":  # a denial: its result
        rule = f" ({data['rule']})" if data.get("rule") else ""
        escalate = f", escalated: {data['escalate']}" if data.get("escalate") else ""
        edited = f", as edited: {data['edited_command']}" if data.get("edited_command") else ""
        yield (f"[approval] {data.get('tool')} {data.get('decision')} by {data.get('by')}"
               f"{rule}{escalate}{edited}")


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, dict) and part.get("type") == "text":
            parts.append(str(part.get("text", "")))
        elif isinstance(part, dict):
            parts.append(f"[{part.get('type', 'part')}]")
        else:
            parts.append(str(part))
    return " ".join(parts)


def _shortened(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.strip()
    if len(text) > _SHOWN_OUTPUT:
        return f"{text[:_SHOWN_OUTPUT]}... ({len(text)} characters)"
    return text


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def local_date(date: str) -> str:
    """An entry's ISO date as local `YYYY-MM-DD HH:MM` (unchanged when not ISO)."""
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(date).astimezone().strftime("%Y-%m-%d %H:%M")
    return date


# -- archive and delete ---------------------------------------------------------------------


# -- the folder's current session ------------------------------------------------------------


def new_session_id(channel: str = "cli") -> str:
    """A fresh session id: `<channel>:<local date and time>-<4 hex digits>`."""
    return f"{channel}:{datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def current_session(home: Path, workspace: str | os.PathLike[str]) -> str:
    """The folder's current session: the last `--new` one there, else `cli:default`."""
    value = _read_current(home).get(_workspace_key(workspace))
    return value if isinstance(value, str) and value else DEFAULT_SESSION


def set_current_session(home: Path, workspace: str | os.PathLike[str], session_id: str) -> None:
    """Make `session_id` the folder's current session (atomic rewrite, mode 0600)."""
    current = _read_current(home)
    key = _workspace_key(workspace)
    current.pop(key, None)
    current[key] = session_id  # newest last: the oldest are dropped first
    while len(current) > MAX_CURRENT_SESSIONS:
        current.pop(next(iter(current)))
    text = json.dumps(current, ensure_ascii=False, indent=1)
    write_private_file(home / CURRENT_SESSIONS_FILE, text, durable=False)


def _read_current(home: Path) -> dict[str, Any]:
    try:  # a regular file only: a FIFO or a link in its place is not read
        handle, info = open_regular_file(str(home / CURRENT_SESSIONS_FILE))
    except (HooklineError, OSError):
        return {}
    try:
        with handle:
            if info.st_size > 1 << 24:
                return {}
            data = json.loads(handle.read().decode("utf-8", errors="replace"))
    except (OSError, ValueError):
        return {}  # unreadable or damaged: every folder is back on cli:default
    return data if isinstance(data, dict) else {}
