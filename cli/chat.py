"""`hookline chat`: an interactive session in the terminal.

One `running()` scope stays open for the whole session (tape store, steering inbox,
background processes, environments). The channel manager runs only the `cli` channel, with
streamed output. Lines get their turns one at a time, in the order typed (`>> text` steers
the running turn instead); `/help`, `/new`, `/sessions`, `/model`, `/usage`, `/attach` and
`/quit` are run by the chat itself (`chat_commands.py`, builtins/channels/cli/input.py).
Ctrl-C while a turn runs cancels that turn (its run is recorded as cancelled) and gives
the prompt back; Ctrl-C at the prompt, Ctrl-D or `/quit` leave, once the lines already
sent are answered (Ctrl-C while waiting leaves at once). SIGTERM cancels the running turn
and leaves. Leaving, the chat prints `not answered: <line>` for every typed line that got
no answer, and then exits with status 1 (128 + the signal number after SIGTERM; 0 when
every line was answered). The conversation survives restarts through the tape: the same
session id continues it. In a terminal, lines are read with the line editor
(builtins/channels/cli/line_editor.py); what was typed is kept in
`<hookline home>/chat_history` for Up and Ctrl-R in later sessions.
"""

import logging
import math
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hookline.kernel import Framework
from hookline.kernel.channels import Channel

from .approvals import ApprovalOption
from .output import fail, show_logs
from .sessions import check_session_flags, choose_session

if TYPE_CHECKING:
    import anyio

    from hookline.builtins.channels import ChannelManager

    from .chat_commands import ChatCommands

CHANNEL = "cli"
DOUBLE_PRESS_SECONDS = 1.5
"""A Ctrl-C this soon after one that cancelled a turn asks before leaving: a double press
was meant for the turn."""
HISTORY_FILE = "chat_history"
"""The line editor's history, in the hookline home: shared by every chat session."""


def chat_command(framework: Framework) -> Any:
    def chat(
        session: Annotated[
            str | None,
            typer.Option(metavar="ID", help="Session id; the same id continues its history "
                                            "(default: this folder's current session)."),
        ] = None,
        new: Annotated[bool, typer.Option(
            "--new", help="Start a fresh session, made this folder's current one.")] = False,
        continue_: Annotated[bool, typer.Option(
            "--continue", help="Continue this folder's most recently active session.")] = False,
        model: Annotated[
            str | None, typer.Option("--model", "-m", metavar="PROVIDER:MODEL",
                                     help="Model for this session.")
        ] = None,
        plain: Annotated[bool, typer.Option(
            "--plain", help="Print replies as the model wrote them; without it, in a "
                            "terminal, their Markdown is rendered.")] = False,
        approval: ApprovalOption = None,
    ) -> None:
        """Talk with the agent in the terminal: replies stream, tool calls show as they run,
        lines get their turns in order (>> steers the running turn), /help lists the chat's
        commands; Ctrl-C cancels the running turn; /quit, Ctrl-D or Ctrl-C at the prompt
        leave."""
        import anyio

        check_session_flags(session, new, continue_)
        show_logs(logging.ERROR, turn_failures=False)  # the conversation shows failures itself
        try:
            status = anyio.run(run_chat, framework, session, model, new, continue_, plain)
        except KeyboardInterrupt:  # before the handler was installed, or after it was removed
            raise typer.Exit(130) from None
        except Exception as exc:  # a one-line error, never a traceback
            fail(exc)
        if status:
            raise typer.Exit(status)

    return chat


async def run_chat(framework: Framework, session: str | None, model: str | None,
                   new: bool = False, continue_: bool = False, plain: bool = False) -> int:
    """The chat session (the command's body, callable from tests and plugins); returns the
    exit status: 0, 1 when a typed line got no answer, 128 + the signal after SIGTERM.
    `plain` prints replies as written (else, in a terminal, as rendered Markdown)."""
    import anyio

    from hookline.builtins.channels import ChannelManager, ChatChannel, ListenerChannel
    from hookline.kernel.channels import Lifecycle

    model_in_use = model or _configured_model()
    manager = ChannelManager(framework, stream_output=True)
    channel = manager.channels.get(CHANNEL)
    if channel is None:
        raise RuntimeError(
            f"no channel named {CHANNEL!r} is provided, and hookline chat needs one; check "
            f"the plugins that implement provide_channels (hookline hooks)"
        )
    # The CLI channel and, as Bub's chat does, the background (Lifecycle) channels beside
    # it (a Bub plugin's scheduler, MCP clients), except those listening for the gateway's
    # clients (the HTTP API); every other channel is excluded.
    beside = {name for name, other in manager.channels.items()
              if isinstance(other, Lifecycle) and not isinstance(other, ListenerChannel)}
    manager.enabled_channels = [CHANNEL, *(f"!{name}" for name in manager.channels
                                           if name != CHANNEL and name not in beside)]
    stop = anyio.Event()
    ended_by: list[int] = []
    async with framework.running():
        chosen = await choose_session(framework, session, new, continue_)
        template: dict[str, Any] = {"channel": CHANNEL, "chat_id": "default",
                                    "session_id": chosen}
        session_id = await framework.resolve_session(template)
        chat = channel if isinstance(channel, ChatChannel) else None
        if chat is not None:
            from .chat_commands import ChatCommands

            commands = ChatCommands(framework, chat, session_id, model_in_use)
            chat.configure(session_id=chosen, model=model, history=_history_path(),
                           commands=commands.commands(), observe=commands.observe,
                           workspace=str(framework.workspace), markdown=not plain)
        say = chat.say if chat is not None else print
        say(f"hookline chat - model {model_in_use} - session {session_id}")
        say("Type a message and press Enter; lines typed while a turn runs get their turns "
            "in order (>> TEXT steers the running turn). /help lists the commands; Ctrl-C "
            "cancels a running turn; /quit, Ctrl-D or Ctrl-C at the prompt leave.")
        if chat is not None and not new:
            await commands.recap(chosen)
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(_handle_interrupts, manager, channel, stop, ended_by, say,
                                  commands if chat is not None else None)
            await manager.run(stop)
            task_group.cancel_scope.cancel()
    if ended_by:
        return 128 + ended_by[0]
    return 1 if chat is not None and chat.unanswered else 0


async def _handle_interrupts(manager: "ChannelManager", channel: Channel,
                             stop: "anyio.Event", ended_by: list[int],
                             say: Callable[[str], None],
                             commands: "ChatCommands | None" = None) -> None:
    """SIGINT cancels a chat command that waits (`/compact`), else what has not answered
    yet (running turns, queued lines; a turn past its answer is left to finish); with
    nothing such it ends the session, unless it came
    right after one that cancelled a turn (then it asks for one more). SIGTERM
    ends the session now: its running turns are cancelled (the channel then reports the
    lines left without an answer); `ended_by` records it. The channel hears of cancelled
    turns through `Channel.turns_cancelled`, which every channel has (a chat channel says
    so and gives the prompt back; others do nothing unless they override it). A signal
    this task cannot take (a plugin's sync hook holds the loop) ends the chat at once
    (`watch_held_loop`)."""
    import anyio

    from .signals import held_note, watch_held_loop

    cancelled_at = -math.inf

    try:
        receiver = anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)
    except NotImplementedError:  # no signal handling on this platform: Ctrl-C interrupts
        return
    with receiver as signals, watch_held_loop(
            manager.framework, lambda signum: f"error: {held_note(signum)}") as taken:
        async for signum in signals:
            taken()
            if signum == signal.SIGINT and commands is not None and commands.cancel_running():
                continue  # a command was running (`/compact`): the chat goes on
            if signum == signal.SIGTERM:
                ended_by.append(signum)
                stop.set()
                for session_id in manager.busy_sessions():
                    await manager.quit_session(session_id)
                continue
            busy = manager.unanswered_sessions()
            if not busy and time.monotonic() - cancelled_at < DOUBLE_PRESS_SECONDS:
                say("(press Ctrl-C again to quit)")  # a second press meant for the turn
                cancelled_at = -math.inf
                continue
            if not busy:
                stop.set()
                return
            cancelled = [session_id for session_id in busy
                         if await manager.quit_session(session_id, "cancelled with Ctrl-C",
                                                       keep_answered=True)]
            if cancelled:  # else only queued lines were dropped, each said
                channel.turns_cancelled(cancelled)
            cancelled_at = time.monotonic()


def _history_path() -> Path:
    from hookline.builtins.config import default_home

    return default_home() / HISTORY_FILE


def _configured_model() -> str:
    from hookline.builtins.config import load_settings

    return load_settings().model_spec


