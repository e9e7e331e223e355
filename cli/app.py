"""The ``hookline`` command line: a typer application built around one Framework.

Core commands live here; plugins add theirs through ``register_cli_commands`` when the
application is built. Heavy modules (republic, HTTP clients) are imported only by the
commands that run turns.
"""

import contextlib
import json
import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from hookline.kernel import Framework

from .approvals import ApprovalOption
from .blame import with_blame
from .chat import chat_command
from .compact import compact_command
from .gateway import gateway_command, kill_background_groups
from .mcp import mcp_commands, mcp_summary, settle_mcp_group
from .models import models_command
from .new import new_commands
from .onboard import onboard_command
from .output import StatusLine, TurnPrinter, fail, innermost, show_logs
from .plugins import plugins_commands
from .rules import rules_commands
from .sessions import check_session_flags, choose_session, session_commands
from .store import store_commands

WorkspaceOption = Annotated[
    Path | None,
    typer.Option("--workspace", "-w", help="Workspace folder (default: the current one).",
                 exists=True, file_okay=False, dir_okay=True, metavar="DIR"),
]


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"hookline {version('hookline')}")
        except PackageNotFoundError:
            typer.echo("hookline (version unknown: not installed as a distribution)")
        raise typer.Exit()


def create_app(framework: Framework | None = None) -> typer.Typer:
    """Build the application: load plugins, add core commands, then plugins' commands."""
    if framework is None:
        framework = Framework()
        framework.load_hooks()
    app = typer.Typer(
        name="hookline",
        help="hookline: a tiny agent runtime in which every stage of a turn is a hook.",
        add_completion=True,
        pretty_exceptions_enable=False,
        # Plain help: rich's formatter costs a third of the start-up.
        rich_markup_mode=None,
    )

    @app.callback(invoke_without_command=True)
    def root(
        ctx: typer.Context,
        workspace: WorkspaceOption = None,
        version: Annotated[
            bool, typer.Option("--version", callback=_version, is_eager=True,
                               help="Show the version and exit.")
        ] = False,
    ) -> None:
        if workspace is not None:
            framework.workspace = workspace.expanduser().resolve()
        ctx.obj = framework
        if ctx.invoked_subcommand is None:  # bare `hookline`: the help, and success
            typer.echo(ctx.get_help())
            raise typer.Exit()

    app.command()(_run_command(framework))
    app.command(name="chat")(chat_command(framework))
    app.command(name="gateway")(gateway_command(framework))
    app.command(name="hooks")(_hooks_command(framework))
    app.add_typer(plugins_commands(framework, _plugins_command(framework)))
    app.command(name="onboard")(onboard_command(framework))
    app.command(name="models")(models_command())
    app.add_typer(session_commands(framework))
    app.add_typer(store_commands())
    app.add_typer(rules_commands(framework))
    app.command(name="compact")(compact_command(framework))
    app.add_typer(new_commands())
    framework.runtime.call_many_sync("register_cli_commands", app=app)
    settle_mcp_group(app, mcp_commands(framework))
    return app


def _run_command(framework: Framework) -> Any:
    def run(
        message: Annotated[
            str | None,
            typer.Argument(metavar="MESSAGE", show_default=False,
                           help="The message to send; '-' (or nothing, with piped input) "
                                "reads it from standard input."),
        ] = None,
        session: Annotated[str | None, typer.Option(
            metavar="ID", help="Session id (default: this folder's current session).")] = None,
        new: Annotated[bool, typer.Option(
            "--new", help="Start a fresh session, made this folder's current one.")] = False,
        continue_: Annotated[bool, typer.Option(
            "--continue", help="Continue this folder's most recently active session.")] = False,
        channel: Annotated[str, typer.Option(metavar="NAME", help="Channel name.")] = "cli",
        chat_id: Annotated[
            str, typer.Option("--chat-id", metavar="ID", help="Chat id.")
        ] = "default",
        model: Annotated[
            str | None,
            typer.Option("--model", "-m", metavar="PROVIDER:MODEL",
                         help="Model for this turn."),
        ] = None,
        system: Annotated[
            str | None,
            typer.Option("--system", "-s", metavar="TEXT",
                         help="A system prompt for this turn, after the usual one."),
        ] = None,
        attach: Annotated[
            list[Path] | None,
            typer.Option("--attach", "-a", metavar="PATH",
                         help="Attach a text file (inlined under its name) or an image "
                              "(png, jpeg, gif, webp); repeatable."),
        ] = None,
        stream: Annotated[
            bool | None,
            typer.Option("--stream/--no-stream", show_default=False,
                         help="Print the reply as it arrives (default: the stream "
                              "setting when configured, else no)."),
        ] = None,
        plain: Annotated[
            bool, typer.Option("--plain", help="Print the reply as the model wrote it, "
                               "without rendering its Markdown on a terminal.")
        ] = False,
        verbose: Annotated[
            bool, typer.Option("--verbose", "-v",
                               help="Show warnings (plugin failures, ignored results) and "
                                    "the traceback of a failed turn.")
        ] = False,
        quiet: Annotated[bool, typer.Option(
            "--quiet", "-q", help="Print only the reply: no tool lines, diffs or status.")] = False,
        usage: Annotated[bool, typer.Option(
            "--usage", help="After the reply, the token usage of the turn and of the session "
                            "(and their cost, reported or from model_prices), on stderr.")
        ] = False,
        trace: Annotated[bool, typer.Option(
            "--trace", help="After the turn, its span tree on stderr: hooks (who answered), "
                            "model calls, tools, durations; needs hookline[otel].")] = False,
        workspace: WorkspaceOption = None,
        approval: ApprovalOption = None,
    ) -> None:
        """Run one turn and print the outbound messages.

        Piped input is sent after MESSAGE (cat notes.txt | hookline run "summarise")."""
        import anyio

        from .inputs import InputError, attachments, message_text

        if workspace is not None:
            framework.workspace = workspace.expanduser().resolve()
        check_session_flags(session, new, continue_)
        try:
            message = message_text(message)
            attached, media = attachments(list(attach or []))
        except InputError as exc:
            fail(exc)
        _warn_if_nothing_answers(framework)

        inbound: dict[str, Any] = {"content": message + attached, "channel": channel,
                                   "chat_id": chat_id}
        if media:
            inbound["media"] = media
        # Another channel or chat id names its own session (`<channel>:<chat_id>`).
        default_address = channel == "cli" and chat_id == "default"
        context = {key: value for key, value in (("model", model), ("system", system)) if value}
        if context:
            inbound["context"] = context
        if stream is None:
            stream = _stream_setting()
        # The status line only without --stream: a streamed reply shows progress itself.
        printer = TurnPrinter(stream=stream, status=None if stream else StatusLine(),
                              quiet=quiet, usage=usage, workspace=framework.workspace,
                              markdown=not plain)
        from .approvals import terminal_asker

        printer.asker = terminal_asker(printer.status)  # on a terminal: stdin answers
        if usage:
            printer.window_of = _window_of(framework)
        # The one error line below says what failed; -v shows warnings and the traceback.
        show_logs(logging.WARNING if verbose else logging.ERROR, turn_failures=verbose,
                  verbose=verbose)

        outcome: dict[str, Any] = {}

        async def turn() -> None:
            framework.router = printer
            answering = anyio.CancelScope()
            try:
                async with framework.running(), anyio.create_task_group() as tasks:
                    tasks.start_soon(_cancel_on_signal, framework, answering, outcome)
                    if printer.status.enabled:
                        tasks.start_soon(printer.status.tick)
                    with answering:
                        if session or new or continue_ or default_address:
                            inbound["session_id"] = await choose_session(
                                framework, session, new, continue_)
                        outcome["result"] = await framework.process_inbound(
                            inbound, stream_output=True)
                    if usage:
                        from .usage import session_totals

                        printer.session_usage = await session_totals(
                            framework, outcome["result"].session_id,
                            printer.usage_totals().prices)
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
                _not_answered(outcome.get("signal"), with_blame(framework, exc))
            # The turn ran and its reply exists: show it, then say what failed after it.
            printer.finish(outcome["result"], check_errors=False)
            fail(RuntimeError(f"the turn finished, but closing its resources failed: "
                              f"{innermost(exc)}"))
        if "result" not in outcome:
            _not_answered(outcome.get("signal"))
        printer.finish(outcome["result"])

    return run


def _window_of(framework: Framework) -> Any:
    """The context window of a model, as the builtin agent assumes it (None without it)."""
    builtin = framework.registry.get_plugin("builtin")
    return getattr(builtin, "context_window", None)


def _console_trace(framework: Framework) -> Any:
    """The span tree of `--trace`, installed now (docs/observability.md)."""
    try:
        from hookline.builtins.telemetry import ConsoleTrace
    except ImportError as exc:
        fail(RuntimeError(f"--trace needs OpenTelemetry's SDK, and {exc.name} is not "
                          f"installed: pip install 'hookline[otel]'"))
    return ConsoleTrace(framework)


def _run_turn(turn: Callable[[], Any], traced: Any) -> None:
    import anyio

    try:
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


async def _cancel_on_signal(framework: Framework, answering: Any,
                            outcome: dict[str, Any]) -> None:
    """SIGINT or SIGTERM cancels the turn (its run is recorded as cancelled); a second
    one, while the turn unwinds, ends the process at once."""
    import anyio

    try:
        receiver = anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)
    except NotImplementedError:  # no signal handling here: Ctrl-C interrupts as usual
        return
    with receiver as signals:
        async for signum in signals:
            if "signal" in outcome:
                with contextlib.suppress(Exception):  # best effort: the exit must happen
                    kill_background_groups(framework)
                with contextlib.suppress(Exception):
                    typer.echo(_not_answered_line(signum), err=True)
                    sys.stderr.flush()
                os._exit(128 + signum)
            outcome["signal"] = signum
            answering.cancel()


def _not_answered_line(signum: int) -> str:
    return (f"error: {signal.Signals(signum).name} received: the turn was cancelled and the "
            f"message was not answered")


def _not_answered(signum: int | None, error: BaseException | None = None) -> NoReturn:
    """Exit after a turn that gave no reply: one line, status 128 + the signal number."""
    if signum is None:
        fail(error or RuntimeError("the turn ended without a result"))
    typer.echo(_not_answered_line(signum), err=True)
    raise typer.Exit(128 + signum)


def _warn_if_nothing_answers(framework: Framework) -> None:
    """Say so when no plugin runs a model: the turn would only echo the prompt back."""
    if framework.registry.hook_impls("run_model") or framework.registry.hook_impls(
            "run_model_stream"):
        return
    disabled = framework.plugin_status().get("builtin")
    why = (" (the builtin plugin is disabled: see HOOKLINE_DISABLE_PLUGINS)"
           if disabled is not None and not disabled.ok else "")
    typer.echo(f"warning: no plugin implements run_model or run_model_stream{why}; the "
               f"reply is the prompt echoed back", err=True)


def _hooks_command(framework: Framework) -> Any:
    def hooks(
        as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """Show each hook's implementations in execution order, with diagnostics."""
        report = framework.hook_report()
        failed = {name: status.detail for name, status in framework.plugin_status().items()
                  if not status.ok}
        if as_json:
            data = report.as_dict()
            data["failed_plugins"] = failed
            typer.echo(json.dumps(data, indent=2, default=str))
            return
        for hook in report.hooks:
            if not hook.execution:
                typer.echo(f"{hook.name}: (no hook implementations)")
                continue
            runs = ", ".join(info.label() for info in hook.execution)
            stored = ", ".join(info.plugin for info in hook.stored)
            typer.echo(f"{hook.name}: {runs}    [stored: {stored}]")
        for entry in report.unknown:
            typer.echo(f"warning: {entry.message()}")
        for name, detail in failed.items():
            typer.echo(f"plugin {name!r} failed to load: {detail}")

    return hooks


def _plugins_command(framework: Framework) -> Any:
    def plugins(
        as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """Show each plugin's load status."""
        statuses = framework.plugin_status()
        if as_json:
            typer.echo(json.dumps(
                {n: {"ok": s.ok, "detail": s.detail, "source": s.source, "group": s.group}
                 for n, s in statuses.items()}, indent=2))
            return
        if not statuses:
            typer.echo("(no plugins loaded)")
        for name, status in statuses.items():
            mark = "ok  " if status.ok else "off " if status.detail == "disabled" else "FAIL"
            group = status.group or "-"
            typer.echo(f"{mark} {name:<20} {group:<9} {status.source:<40} {status.detail}")
        for line in mcp_summary():
            typer.echo(line)

    return plugins


def _command(args: list[str]) -> list[str]:
    """The command words of ``args``: options, and the workspace option's value, left out."""
    words: list[str] = []
    value_next = False
    for arg in args:
        if value_next:
            value_next = False
        elif arg in ("--workspace", "-w"):
            value_next = True
        elif not arg.startswith("-"):
            words.append(arg)
    return words


def main(argv: list[str] | None = None, *,
         started: Callable[[], object] | None = None) -> None:
    """Build the application and run the command ``argv`` names (default: the process's
    arguments). ``started`` is called once the application is built, before the command
    runs (the console script, ``hookline.cli.main``, resumes garbage collection there)."""
    args = argv if argv is not None else sys.argv[1:]
    try:
        # `plugins check` imports its target itself: the installed plugins are not loaded,
        # so an unrelated plugin's load failure does not show among its findings.
        app = create_app(Framework() if _command(args)[:2] == ["plugins", "check"] else None)
        if started is not None:
            started()
        app(args=args, prog_name="hookline")
    except typer.Exit as exit_:
        raise SystemExit(exit_.exit_code) from None
    except Exception as exc:  # strict plugin loading, unwritable config, ...: one line
        try:
            fail(exc)
        except typer.Exit:
            raise SystemExit(1) from None
