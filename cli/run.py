"""`hookline run`: one turn in one `running()` scope, for people and for scripts.

The reply goes to stdout alone (or, with `--json`, the turn's events as JSON lines), what
ran to stderr. Each run starts a fresh session unless told to continue one (`-c`,
`--session`), as llm and `codex exec` do, so a script calling `run` in a loop never grows
one conversation; a continued session that has grown long is warned about. See
docs/cli.md, "hookline run".
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperCommand

from hookline.kernel import Framework

from .approvals import ApprovalOption, terminal_asker
from .blame import innermost, plugin_exit, with_blame
from .output import StatusLine, TurnPrinter, fail, plugin_prints_to_stderr, show_logs
from .sessions import check_session_flags, choose_session

__all__ = ["RunCommand", "WorkspaceOption", "run_command"]

WorkspaceOption = Annotated[
    Path | None,
    typer.Option("--workspace", "-w", help="Workspace folder (default: the current one).",
                 exists=True, file_okay=False, dir_okay=True, metavar="DIR"),
]
MessageArgument = Annotated[str | None, typer.Argument(
    metavar="MESSAGE", show_default=False,
    help="The message to send; '-' (or nothing, with piped input) reads it from standard "
         "input; with both, the piped text comes first.")]
SessionOption = Annotated[str | None, typer.Option(
    metavar="ID", help="Continue (or start) the session ID.")]
NewOption = Annotated[bool, typer.Option(
    "--new", help="A fresh session (the default), said on stderr.")]
ContinueOption = Annotated[bool, typer.Option(
    "--continue", "-c", help="Continue this folder's most recently active session.")]
ChannelOption = Annotated[str, typer.Option(metavar="NAME", help="Channel name.")]
ChatIdOption = Annotated[str, typer.Option("--chat-id", metavar="ID", help="Chat id.")]
ModelOption = Annotated[str | None, typer.Option(
    "--model", "-m", metavar="PROVIDER:MODEL", help="Model for this turn.")]
ModelOptionsOption = Annotated[list[str] | None, typer.Option(
    "--option", "-o", metavar="KEY VALUE", show_default=False,
    help="A model option for this turn (temperature, top_p, max_tokens, reasoning_effort, "
         "...); repeatable.")]
SystemOption = Annotated[str | None, typer.Option(
    "--system", "-s", metavar="TEXT", help="A system prompt for this turn, after the usual one.")]
AttachOption = Annotated[list[Path] | None, typer.Option(
    "--attach", "-a", metavar="PATH",
    help="Attach a text file (inlined under its name) or an image (png, jpeg, gif, webp); "
         "repeatable.")]
StreamOption = Annotated[bool | None, typer.Option(
    "--stream/--no-stream", show_default=False,
    help="Print the reply as it arrives (default: the stream setting when configured, "
         "else no).")]
JsonOption = Annotated[bool, typer.Option(
    "--json", help="The turn's events as JSON lines on stdout (docs/cli.md).")]
PlainOption = Annotated[bool, typer.Option(
    "--plain", help="Print the reply as the model wrote it, without rendering its Markdown "
                    "on a terminal.")]
VerboseOption = Annotated[bool, typer.Option(
    "--verbose", "-v", help="Show tools' whole output, warnings (plugin failures, ignored "
                            "results) and the traceback of a failed turn.")]
QuietOption = Annotated[bool, typer.Option(
    "--quiet", "-q", help="Print only the reply: no tool lines, output, diffs or status.")]
UsageOption = Annotated[bool, typer.Option(
    "--usage", help="After the reply, the token usage of the turn and of the session (and "
                    "their cost, reported or from model_prices), on stderr.")]
TraceOption = Annotated[bool, typer.Option(
    "--trace", help="After the turn, its span tree on stderr: hooks (who answered), model "
                    "calls, tools, durations; needs hookline[otel].")]


class RunCommand(TyperCommand):
    """`run`'s command: `-o` takes two values (`-o temperature 0.2`), which typer cannot
    declare for a repeatable option, so click is told here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if param.name == "option":
                param.nargs = 2


@dataclass(frozen=True)
class Address:
    """Which session the turn goes to: `--session`, `--new`, `--continue`, a fresh one,
    or the one another `--channel` or `--chat-id` names (`<channel>:<chat-id>`)."""

    session: str | None
    new: bool
    continue_: bool
    default: bool
    """The default channel and chat id."""

    @property
    def by_channel(self) -> bool:
        """The session is the channel's and chat id's, resolved by the pipeline."""
        return not (self.session or self.new or self.continue_ or self.default)

    @property
    def continued(self) -> bool:
        return bool(self.session or self.continue_ or self.by_channel)


def run_command(framework: Framework) -> Any:
    def run(message: MessageArgument = None, session: SessionOption = None,
            new: NewOption = False, continue_: ContinueOption = False,
            channel: ChannelOption = "cli", chat_id: ChatIdOption = "default",
            model: ModelOption = None, option: ModelOptionsOption = None,
            system: SystemOption = None, attach: AttachOption = None,
            stream: StreamOption = None, as_json: JsonOption = False, plain: PlainOption = False,
            verbose: VerboseOption = False, quiet: QuietOption = False,
            usage: UsageOption = False, trace: TraceOption = False,
            workspace: WorkspaceOption = None, approval: ApprovalOption = None) -> None:
        """Run one turn in a fresh session (-c continues one) and print its reply.

        Piped input is sent before MESSAGE (git diff | hookline run "review this")."""
        if workspace is not None:
            framework.workspace = workspace.expanduser().resolve()
        check_session_flags(session, new, continue_)
        if stream is None:
            stream = _stream_setting()
        with contextlib.ExitStack() as kept:
            out = None
            if as_json:
                from .run_json import stdout_for_json

                out = kept.enter_context(stdout_for_json())
            printer = _printer(stream, as_json, out, quiet=quiet, usage=usage, verbose=verbose,
                               workspace=framework.workspace, markdown=not plain)
            printer.asker = terminal_asker(printer.status)  # on a terminal: stdin answers
            pairs = [tuple(pair) for pair in option or []]  # `-o KEY VALUE` (RunCommand)
            inbound = _inbound(printer, message, list(attach or []), pairs, channel, chat_id,
                               {"model": model, "system": system})
            _warn_if_nothing_answers(framework)
            if usage:
                printer.meter.window_of = _window_of(framework)
            # The one error line says what failed; -v shows warnings and the traceback.
            show_logs(logging.WARNING if verbose else logging.ERROR, turn_failures=verbose,
                      verbose=verbose)
            address = Address(session, new, continue_,
                              channel == "cli" and chat_id == "default")
            _answer(framework, printer, inbound, address, trace=trace, verbose=verbose)

    return run


def _printer(stream: bool, as_json: bool, out: Any, **options: Any) -> TurnPrinter:
    """The router of the turn: JSON lines, or the reply and what ran for people (with the
    status line only without --stream: a streamed reply shows progress itself)."""
    if as_json:
        from .run_json import JsonPrinter

        return JsonPrinter(stream, out, **options)
    return TurnPrinter(stream, out, status=None if stream else StatusLine(), **options)


def _inbound(printer: TurnPrinter, message: str | None, attach: list[Path],
             pairs: list[Any], channel: str, chat_id: str,
             settings: dict[str, str | None]) -> dict[str, Any]:
    """The envelope of the turn; input that cannot be sent fails the command."""
    from hookline.kernel.errors import HooklineError

    from .inputs import InputError, attachments, message_text

    try:
        text = message_text(message)
        attached, media = attachments(attach)
        context: dict[str, Any] = {key: value for key, value in settings.items() if value}
        if pairs:
            from hookline.builtins.models import parse_model_options

            context["options"] = parse_model_options(pairs)
    except (InputError, HooklineError) as exc:
        printer.fail(exc)
    inbound: dict[str, Any] = {"content": text + attached, "channel": channel,
                               "chat_id": chat_id}
    if media:
        inbound["media"] = media
    if context:
        inbound["context"] = context
    return inbound


def _answer(framework: Framework, printer: TurnPrinter, inbound: dict[str, Any],
            address: Address, *, trace: bool, verbose: bool) -> None:
    """Run the turn, then print its reply; a failure is one line (and its traceback with
    `verbose`), a signal cancels the turn."""
    import anyio

    outcome: dict[str, Any] = {}

    async def turn() -> None:
        framework.router = printer
        answering = anyio.CancelScope()
        try:
            async with framework.running(), anyio.create_task_group() as tasks:
                await tasks.start(_cancel_on_signal, framework, printer, answering, outcome)
                if printer.status.enabled:
                    tasks.start_soon(printer.status.tick)
                _announce_start(framework, printer)
                with answering:
                    if not address.by_channel:
                        inbound["session_id"] = await _session(framework, address)
                    outcome["result"] = await framework.process_inbound(
                        inbound, stream_output=True)
                await _after(framework, printer, outcome["result"].session_id, address)
                tasks.cancel_scope.cancel()
        finally:
            printer.status.clear()

    traced = _console_trace(framework) if trace else None
    try:
        _run_turn(turn, traced)
    except Exception as exc:  # a one-line error, never a traceback (unless -v)
        if verbose:
            traceback.print_exception(exc, file=sys.stderr)
        if "result" not in outcome:
            _not_answered(printer, outcome.get("signal"), with_blame(framework, exc))
        # The turn ran and its reply exists: show it, then say what failed after it.
        printer.finish(outcome["result"], check_errors=False)
        printer.fail(RuntimeError(f"the turn finished, but closing its resources failed: "
                                  f"{innermost(exc)}"))
    except BaseExceptionGroup as group:  # a plugin's sys.exit() in a hook, in the turn's tasks
        ended = innermost(group)
        if not isinstance(ended, SystemExit):
            raise
        _not_answered(printer, outcome.get("signal"), plugin_exit(framework, ended))
    if "result" not in outcome:
        _not_answered(printer, outcome.get("signal"))
    printer.finish(outcome["result"])


def _announce_start(framework: Framework, printer: TurnPrinter) -> None:
    """With `--json`, the builtin agent's run start becomes the `start` object."""
    from .run_json import JsonPrinter

    if not isinstance(printer, JsonPrinter):
        return
    from hookline.builtins import builtin_services
    from hookline.kernel.events import RunStarted

    builtin = builtin_services(framework)
    if builtin is not None:
        builtin.get_agent().bus.on(RunStarted, printer.run_started)


async def _session(framework: Framework, address: Address) -> str:
    fresh = not (address.session or address.continue_)  # the default: a fresh one, silently
    return await choose_session(framework, address.session, fresh, address.continue_,
                                announce=address.new)


async def _after(framework: Framework, printer: TurnPrinter, session_id: str,
                 address: Address) -> None:
    """Once the turn ran, in its scope: the session's usage (`--usage`), and the warning
    for a continued session grown long."""
    from .usage import long_session, session_totals, turns_in_context

    meter = printer.meter
    if meter.enabled:
        meter.session_usage = await session_totals(framework, session_id, meter.totals().prices)
    if address.continued:
        turns = await turns_in_context(framework, session_id)
        warning = long_session(session_id, turns, meter.last_input, _limit_of(framework))
        if warning is not None:
            printer.warnings.append(warning)


def _window_of(framework: Framework) -> Any:
    """The context window of a model, as the builtin agent assumes it (None without it)."""
    from hookline.builtins import builtin_services

    builtin = builtin_services(framework)
    return builtin.context_window if builtin is not None else None


def _limit_of(framework: Framework) -> Callable[[str | None], int]:
    """The tokens a request to a model may hold: its window times `context_budget` (0
    when no builtin agent says)."""
    from hookline.builtins.config import SettingsError, load_settings

    window_of = _window_of(framework)
    try:
        budget = load_settings().context_budget
    except SettingsError:
        budget = 0.0
    return lambda model: int(window_of(model) * budget) if window_of is not None else 0


def _console_trace(framework: Framework) -> Any:
    """The span tree of `--trace`, installed now (docs/observability.md)."""
    try:
        from hookline.builtins.telemetry import ConsoleTrace
    except ImportError as exc:
        fail(RuntimeError(f"--trace needs OpenTelemetry's SDK, and {exc.name} is not "
                          f"installed: pip install 'hookline[otel]' (in a checkout of "
                          f"hookline: pip install -e '.[otel]')"))
    return ConsoleTrace(framework)


def _run_turn(turn: Callable[[], Any], traced: Any) -> None:
    import anyio

    try:
        with plugin_prints_to_stderr():
            anyio.run(turn)
    finally:
        if traced is not None:
            traced.finish(sys.stderr)


def _stream_setting() -> bool:
    """The `stream` setting when it is configured (file or environment); else `run` waits
    for the whole reply, which scripts expect. A bad config file is reported by the turn."""
    from hookline.builtins.config import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError:
        return False
    return settings.stream if settings.sources.get("stream", "default") != "default" else False


async def _cancel_on_signal(framework: Framework, printer: TurnPrinter, answering: Any,
                            outcome: dict[str, Any], *, task_status: Any) -> None:
    """SIGINT or SIGTERM cancels the turn (its run is recorded as cancelled), unless its
    model has finished: the turn is then only finishing, and is left to; a second one,
    while the turn unwinds or finishes, ends the process at once, and so does one this
    task cannot take (a plugin's sync hook holds the loop: `watch_held_loop`). Started
    (`task_status`) once it takes signals: before the turn's first hook runs."""
    import anyio

    from .signals import force_exit, held_note, watch_held_loop

    try:
        receiver = anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)
    except NotImplementedError:  # no signal handling here: Ctrl-C interrupts as usual
        task_status.started()
        return
    with receiver as signals, watch_held_loop(framework, lambda signum: (
            f"error: {held_note(signum)}: the message was not answered")) as taken:
        task_status.started()
        async for signum in signals:
            taken()
            if "signal" in outcome:
                force_exit(framework, signum, f"error: {_not_answered_text(signum)}")
            outcome["signal"] = signum
            if not printer.model_done:
                answering.cancel()


def _not_answered_text(signum: int) -> str:
    return (f"{signal.Signals(signum).name} received: the turn was cancelled and the "
            f"message was not answered")


def _not_answered(printer: TurnPrinter, signum: int | None,
                  error: BaseException | None = None) -> NoReturn:
    """Exit after a turn that gave no reply: one line, status 128 + the signal number."""
    if signum is None:
        printer.fail(error or RuntimeError("the turn ended without a result"))
    printer.fail(RuntimeError(_not_answered_text(signum)), 128 + signum)


def _warn_if_nothing_answers(framework: Framework) -> None:
    """Say so when no plugin runs a model: the turn would only echo the prompt back."""
    if framework.registry.hook_impls("run_model") or framework.registry.hook_impls(
            "run_model_stream"):
        return
    from hookline.kernel.framework import DISABLE_ENV

    disabled = framework.plugin_status().get("builtin")
    why = (f" (the builtin plugin is disabled: see {DISABLE_ENV})"
           if disabled is not None and not disabled.ok else "")
    typer.echo(f"warning: no plugin implements run_model or run_model_stream{why}; the "
               f"reply is the prompt echoed back", err=True)
