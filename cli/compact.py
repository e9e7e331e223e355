"""`hookline compact [SESSION]`: summarise a session's context now, as the chat's `/compact`
does (docs/context.md)."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import typer

from hookline.kernel import Framework

from .chat_commands import compaction_said
from .output import fail, show_logs
from .sessions import SessionIdArgument, choose_session


def compact_command(framework: Framework) -> Any:
    def compact(
        session: SessionIdArgument = None,
        focus: Annotated[str, typer.Option(
            "--focus", metavar="TEXT", help="What the summary should keep above all.")] = "",
    ) -> None:
        """Summarise a session's context (default: this folder's current session) with one
        model call, so its next turns start from the summary; nothing is deleted."""
        import anyio

        show_logs(logging.ERROR, turn_failures=False)  # warnings as `warning:` lines

        async def run() -> str:
            from hookline.builtins import builtin_services
            from hookline.builtins.terminal import turn_note

            from .usage import configured_prices

            builtin = builtin_services(framework)
            if builtin is None:
                raise RuntimeError("compaction is the builtin plugin's, which is not loaded")
            async with framework.running():
                session_id = await choose_session(framework, session, False, False)
                if session:
                    await _check_here(framework, session)
                said = await builtin.compact_session(session_id, focus, starting=lambda: (
                    typer.echo(f"compacting session {session_id}: the model summarises its "
                               f"context ...", err=True)), retrying=lambda data: typer.echo(
                    turn_note("retry", data), err=True))
                return "\n".join(compaction_said(session_id, said, configured_prices()))

        try:
            typer.echo(anyio.run(run))
        except KeyboardInterrupt:  # Ctrl-C: the anchor is written at the end, or not at all
            fail(RuntimeError("compaction cancelled (Ctrl-C): nothing was written; the "
                              "session is as it was"), 130)
        except Exception as exc:  # one clear line
            fail(exc)

    return compact


async def _check_here(framework: Framework, session_id: str) -> None:
    """A session named on the command line must be one of this folder's: an unknown id,
    or another folder's, would otherwise be "nothing to compact"."""
    from hookline.builtins.store import scope_store
    from hookline.builtins.tape import find_session, session_tape_name

    store = scope_store(framework)
    if store is None:
        return
    tape = await find_session(store, session_id, framework.workspace)  # SessionError: none
    if tape != session_tape_name(session_id, framework.workspace):
        raise RuntimeError(f"session {session_id!r} belongs to another folder; run hookline "
                           f"compact in that folder (hookline sessions shows which)")
