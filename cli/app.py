"""The ``hookline`` command line: a typer application built around one Framework.

Core commands live here; plugins add theirs through ``register_cli_commands`` when the
application is built. Heavy modules (republic, HTTP clients) are imported only by the
commands that run turns.
"""

import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from hookline.kernel import Framework

from .chat import chat_command
from .gateway import gateway_command
from .new import new_commands
from .onboard import onboard_command
from .output import StatusLine, TurnPrinter, fail, innermost, show_logs
from .plugins import plugins_commands
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
        add_completion=False,
        pretty_exceptions_enable=False,
        # Plain help: rich's formatter costs a third of the start-up (issue 12).
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
    app.add_typer(session_commands(framework))
    app.add_typer(store_commands())
    app.add_typer(new_commands())
    framework.runtime.call_many_sync("register_cli_commands", app=app)
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
        stream: Annotated[
            bool, typer.Option("--stream/--no-stream", help="Print the reply as it arrives.")
        ] = False,
        quiet: Annotated[bool, typer.Option(
            "--quiet", "-q", help="Print only the reply: no tool lines, diffs or status.")] = False,
        usage: Annotated[bool, typer.Option(
            "--usage", help="After the reply, the turn's token usage (and cost if reported), "
                            "on stderr.")] = False,
        workspace: WorkspaceOption = None,
    ) -> None:
        """Run one turn and print the outbound messages."""
        import anyio

        if workspace is not None:
            framework.workspace = workspace.expanduser().resolve()
        check_session_flags(session, new, continue_)
        message = _message_text(message)
        _warn_if_nothing_answers(framework)

        inbound: dict[str, Any] = {"content": message, "channel": channel, "chat_id": chat_id}
        # Another channel or chat id names its own session (`<channel>:<chat_id>`).
        default_address = channel == "cli" and chat_id == "default"
        if model:
            inbound["context"] = {"model": model}
        # The status line only without --stream: a streamed reply shows progress itself.
        printer = TurnPrinter(stream=stream, status=None if stream else StatusLine(),
                              quiet=quiet, usage=usage, workspace=framework.workspace)
        show_logs(logging.ERROR, turn_failures=False)  # the one error line below says it

        outcome: dict[str, Any] = {}

        async def turn() -> None:
            framework.router = printer
            try:
                async with framework.running(), anyio.create_task_group() as tasks:
                    if printer.status.enabled:
                        tasks.start_soon(printer.status.tick)
                    if session or new or continue_ or default_address:
                        inbound["session_id"] = await choose_session(framework, session, new,
                                                                     continue_)
                    outcome["result"] = await framework.process_inbound(inbound,
                                                                        stream_output=True)
                    tasks.cancel_scope.cancel()
            finally:
                printer.status.clear()

        try:
            anyio.run(turn)
        except Exception as exc:  # a one-line error, never a traceback
            if "result" not in outcome:
                fail(exc)
            # The turn ran and its reply exists: show it, then say what failed after it.
            printer.finish(outcome["result"], check_errors=False)
            fail(RuntimeError(f"the turn finished, but closing its resources failed: "
                              f"{innermost(exc)}"))
        printer.finish(outcome["result"])

    return run


def _message_text(message: str | None) -> str:
    """The message argument, or standard input for '-' (or no argument with piped input)."""
    if message is None and sys.stdin.isatty():
        fail(ValueError("give the message as an argument, or '-' to read it from standard "
                        "input (hookline run --help)"))
    if message is None or message == "-":
        message = sys.stdin.read()
    if not message.strip():
        fail(ValueError("the message is empty"))
    return message


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

    return plugins


def main(argv: list[str] | None = None, *,
         started: Callable[[], object] | None = None) -> None:
    """Build the application and run the command ``argv`` names (default: the process's
    arguments). ``started`` is called once the application is built, before the command
    runs (the console script, ``hookline.cli.main``, resumes garbage collection there)."""
    try:
        app = create_app()
        if started is not None:
            started()
        app(args=argv if argv is not None else sys.argv[1:], prog_name="hookline")
    except typer.Exit as exit_:
        raise SystemExit(exit_.exit_code) from None
    except Exception as exc:  # strict plugin loading, unwritable config, ...: one line
        try:
            fail(exc)
        except typer.Exit:
            raise SystemExit(1) from None
