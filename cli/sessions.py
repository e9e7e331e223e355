"""`hookline sessions`: list, search, read, rename, archive and delete sessions; and how
`run` and `chat` choose theirs (`--session`, `--new`, `--continue`, else the folder's
current session).

The commands open the configured tape store inside one `running()` scope, so they work on
whatever store a plugin provides; the logic is in `hookline.builtins.tape.sessions`.
"""

import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, TypeVar

import typer

from hookline.kernel import Framework

from .output import fail, json_text

T = TypeVar("T")

SessionIdArgument = Annotated[
    str | None,
    typer.Argument(metavar="ID", show_default=False,
                   help="Session id (or tape name); default: this folder's current session."),
]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


def session_commands(framework: Framework) -> typer.Typer:
    """The `sessions` command group; its commands find `framework` as the context's
    object, so the group works mounted on the application or on its own."""
    group = typer.Typer(name="sessions", context_settings={"obj": framework},
                        help="List, search, read, rename, archive and delete sessions.")
    group.callback(invoke_without_command=True)(sessions)
    group.command(name="list")(list_command)
    group.command(name="search")(search)
    group.command(name="show")(show)
    group.command(name="rename")(rename)
    group.command(name="archive")(archive)
    group.command(name="delete")(delete)
    return group


def sessions(ctx: typer.Context) -> None:
    """List, search, read, rename, archive and delete sessions (no subcommand: list
    them)."""
    if ctx.invoked_subcommand is None:
        list_command(ctx, here=False, as_json=False)


def list_command(
    ctx: typer.Context,
    here: Annotated[bool, typer.Option("--here", help="Only this folder's sessions.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List sessions, most recent first; * marks this folder's current session."""
    from hookline.builtins.tape import list_sessions

    framework = _framework(ctx)
    found = _with_store(framework, lambda store: list_sessions(
        store, framework.workspace if here else None))
    if as_json:
        typer.echo(json.dumps([item.as_dict() for item in found], indent=2))
        return
    for line in session_list(framework, found):
        typer.echo(line)


def search(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(metavar="TEXT", show_default=False,
                                        help="Text to look for, in any case.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Find the sessions whose messages contain TEXT, most recent first."""
    from hookline.builtins.tape import local_date, search_sessions

    found = _with_store(_framework(ctx), lambda store: search_sessions(store, text))
    if as_json:
        typer.echo(json.dumps([item.as_dict() for item in found], indent=2))
        return
    if not found:
        typer.echo(_safe(f"(no session mentions {text!r})"))
        return
    rows = [("SESSION", "LAST ACTIVITY", "TITLE")]
    rows += [(_name(item.session), local_date(item.session.last_activity),
              item.session.title or "-") for item in found]
    lines = [f"    {'you' if item.role == 'user' else 'assistant'}: {item.line}"
             for item in found]
    _table(rows, [None, *lines])


def show(
    ctx: typer.Context,
    session_id: SessionIdArgument = None,
    last: Annotated[int | None, typer.Option(
        "--last", metavar="N", show_default=False,
        help="Only the last N turns (a user message and what followed it).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The raw entries, as JSON.")] = False,
) -> None:
    """Show a session as a transcript: messages, tool calls as run, denials, errors."""
    from hookline.builtins.tape import transcript

    if last is not None and last < 1:
        fail(ValueError(f"--last takes a positive number of turns, got {last}"))
    framework = _framework(ctx)
    name = session_id or _current(framework)
    tape, entries, turns = _with_store(
        framework, lambda store: _read_session(framework, store, name, last))
    if as_json:
        typer.echo(json_text([{"id": e.id, "kind": e.kind, "payload": e.payload,
                               "meta": e.meta, "date": e.date} for e in entries],
                             sys.stdout, indent=2))
        return
    part = f", the last {min(last, turns)} of {turns} turns" if last is not None else ""
    typer.echo(_safe(f"session {name} (tape {tape}, {len(entries)} entries{part})"))
    for line in transcript(entries):
        typer.echo(_safe(line, keep_newlines=True))


async def _read_session(framework: Framework, store: Any, name: str,
                        last: int | None) -> tuple[str, list[Any], int]:
    """The session's tape, its entries (the last `last` turns' only, when given) and how
    many turns it has (0 when all entries were read)."""
    from hookline.builtins.store import as_async_store
    from hookline.builtins.tape import find_session, last_turns
    from hookline.kernel.tape import TapeQuery

    tape = await find_session(store, name, framework.workspace)
    if last is not None:
        return tape, *await last_turns(store, tape, last)
    return tape, list(await as_async_store(store).fetch_all(TapeQuery(tape))), 0


def rename(ctx: typer.Context,
           session_id: Annotated[str, typer.Argument(metavar="ID", help="Session id.")],
           title: Annotated[str, typer.Argument(metavar="TITLE", show_default=False,
                                                help="The new title.")]) -> None:
    """Give a session a title that list and search show; a new one replaces it."""
    from hookline.builtins.tape import checked_title, find_session, rename_session

    try:
        checked_title(title)
    except ValueError as exc:
        fail(exc)  # before the store is opened
    framework = _framework(ctx)

    async def act(store: Any) -> str:
        tape = await find_session(store, session_id, framework.workspace)
        return await rename_session(store, tape, title)

    typer.echo(_safe(f"renamed session {session_id}: {_with_store(framework, act)}"))


def archive(ctx: typer.Context,
            session_id: Annotated[str, typer.Argument(metavar="ID", help="Session id.")],
            yes: YesOption = False) -> None:
    """Move a session out of the store into <hookline home>/archive (JSON lines)."""
    from hookline.builtins.config import default_home
    from hookline.builtins.tape import archive_session

    framework = _framework(ctx)
    folder = default_home() / "archive"
    paths = _confirmed(framework, session_id, yes,
                       f"archive session {session_id!r} to {folder} and remove it from "
                       f"the store?",
                       lambda store, tape: archive_session(
                           store, tape, folder, _sidecars(framework), label=session_id))
    for path in paths:
        typer.echo(f"archived to {path}")


def delete(ctx: typer.Context,
           session_id: Annotated[str, typer.Argument(metavar="ID", help="Session id.")],
           yes: YesOption = False) -> None:
    """Delete a session and its sidecar tapes from the store, for good."""
    from hookline.builtins.tape import delete_session

    framework = _framework(ctx)
    removed = _confirmed(framework, session_id, yes,
                         f"delete session {session_id!r} for good (no copy is kept)?",
                         lambda store, tape: delete_session(store, tape,
                                                            _sidecars(framework)))
    typer.echo(f"deleted session {session_id} ({removed} entries)")


def _framework(ctx: typer.Context) -> Framework:
    """The framework the group was made for (the context's object)."""
    framework = ctx.obj
    assert isinstance(framework, Framework), "the sessions group was made without a framework"
    return framework


def _confirmed(framework: Framework, session_id: str, yes: bool, question: str,
               act: Callable[[Any, str], Awaitable[T]]) -> T:
    """`act(store, tape)` on the session's tape once the user said yes (or passed --yes),
    in one `running()` scope: finding, asking and acting see the same store."""
    import anyio.to_thread

    from hookline.builtins.tape import find_session

    if not yes and not sys.stdin.isatty():
        fail(ValueError(f"{question.rstrip('?')}: pass --yes to confirm (standard input is "
                        f"not a terminal, so there is no one to ask)"))
    declined = False

    async def confirm_then_act(store: Any) -> T | None:
        nonlocal declined
        tape = await find_session(store, session_id, framework.workspace)
        if not yes and not await anyio.to_thread.run_sync(
                lambda: typer.confirm(question, default=False)):
            declined = True
            return None
        return await act(store, tape)

    result = _with_store(framework, confirm_then_act)
    if declined:
        typer.echo("nothing changed")
        raise typer.Exit(1)
    assert result is not None
    return result


def _with_store(framework: Framework, action: Callable[[Any], Awaitable[T]]) -> T:
    """Run `action(store)` on the configured tape store; any failure is one error line."""
    import anyio

    from hookline.builtins.store import scope_store

    async def run() -> T:
        async with framework.running():
            store = scope_store(framework)
            if store is None:
                raise RuntimeError("no plugin provides a tape store (provide_tape_store), so "
                                   "there are no sessions to show")
            return await action(store)

    try:
        return anyio.run(run)
    except Exception as exc:
        fail(exc)


def session_list(framework: Framework, found: Sequence[Any]) -> list[str]:
    """The lines `hookline sessions` shows for `found` (`list_sessions`' summaries): a
    table, * marking this folder's current session. `/sessions` in a chat shows them too."""
    from hookline.builtins.tape import local_date

    if not found:
        return ["(no sessions yet: 'hookline run' or 'hookline chat' starts one)"]
    current = _current(framework)
    here_key = str(framework.workspace.resolve())
    rows = [("", "SESSION", "TITLE", "TURNS", "LAST ACTIVITY", "WORKSPACE")]
    for item in found:
        mark = "*" if item.session_id == current and item.workspace == here_key else ""
        rows.append((mark, _name(item), item.title or "-", str(item.turns),
                     local_date(item.last_activity), item.workspace or "?"))
    return _table_lines(rows)


def _name(item: Any) -> str:
    return item.session_id or f"(tape {item.tape})"


def _table(rows: Sequence[tuple[str, ...]], after: Sequence[str | None] = ()) -> None:
    for line in _table_lines(rows, after):
        typer.echo(line)


def _table_lines(rows: Sequence[tuple[str, ...]],
                 after: Sequence[str | None] = ()) -> list[str]:
    """Rows in aligned columns (the last one unpadded), each followed by its line of
    `after` when it has one."""
    widths = [max(_columns(_safe(row[column])) for row in rows)
              for column in range(len(rows[0]))]
    lines = []
    for index, row in enumerate(rows):
        cells = [_safe(cell) + " " * (width - _columns(_safe(cell)))
                 for cell, width in zip(row[:-1], widths, strict=False)]
        lines.append(" ".join([*cells, _safe(row[-1])]).rstrip())
        if after and after[index]:
            lines.append(_safe(str(after[index])))
    return lines


def _columns(text: str) -> int:
    """The columns `text` takes on a terminal: two for a wide character (日本, an emoji),
    none for a combining mark or a joiner."""
    if text.isascii():
        return len(text)
    import unicodedata

    return sum(0 if unicodedata.combining(char) or unicodedata.category(char) == "Cf"
               else 2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def _sidecars(framework: Framework) -> list[str]:
    return [sidecar.name for sidecar in framework.get_tape_sidecars()]


def _current(framework: Framework) -> str:
    from hookline.builtins.config import default_home
    from hookline.builtins.tape import current_session

    return current_session(default_home(), framework.workspace)


def _safe(text: str, keep_newlines: bool = False) -> str:
    """Escaped on a terminal: tapes hold what models and tools wrote."""
    from hookline.builtins.terminal import is_terminal, terminal_text

    return terminal_text(text, keep_newlines=keep_newlines) if is_terminal(sys.stdout) else text


# -- choosing the session of a run or chat ---------------------------------------------


def check_session_flags(session: str | None, new: bool, continue_: bool) -> None:
    """At most one way of choosing the session."""
    chosen = [flag for flag, given in (("--session", session), ("--new", new),
                                        ("--continue", continue_)) if given]
    if len(chosen) > 1:
        raise typer.BadParameter(f"{' and '.join(chosen)} choose the session in different "
                                 f"ways; give one of them")
    from hookline.builtins.config import session_id_problem

    problem = session_id_problem(session) if session is not None else None
    if problem is not None:
        raise typer.BadParameter(f"--session {problem}")


async def choose_session(framework: Framework, session: str | None, new: bool,
                         continue_: bool, *, announce: bool = True) -> str:
    """The session a `run` or `chat` goes to, inside its running() scope: `--session`;
    `new` (a fresh one, said on stderr when `announce`) or `--continue` (this folder's
    most recently active one), either made this folder's current session; else this
    folder's current session."""
    from hookline.builtins.config import default_home
    from hookline.builtins.store import scope_store
    from hookline.builtins.tape import (
        current_session,
        list_sessions,
        new_session_id,
        set_current_session,
    )

    home = default_home()
    if session:
        return session
    if new:
        fresh = new_session_id()
        set_current_session(home, framework.workspace, fresh)
        if announce:
            typer.echo(f"new session {fresh} (the previous one is kept: hookline sessions)",
                       err=True)
        return fresh
    if continue_:
        store = scope_store(framework)
        if store is not None:
            for item in await list_sessions(store, framework.workspace):
                if item.session_id:
                    set_current_session(home, framework.workspace, item.session_id)
                    return item.session_id
        typer.echo("no session of this folder to continue: this one starts one", err=True)
    return current_session(home, framework.workspace)
