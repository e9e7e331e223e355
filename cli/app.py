"""The ``hookline`` command line: a typer application built around one Framework.

Core commands live here; plugins add theirs through ``register_cli_commands`` when the
application is built. Heavy modules (republic, HTTP clients) are imported only by the
commands that run turns.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from hookline.kernel import Framework

from .chat import chat_command
from .gateway import gateway_command
from .output import TurnPrinter, fail, show_logs
from .store import store_commands

WorkspaceOption = Annotated[
    Path | None,
    typer.Option("--workspace", "-w", help="Workspace folder (default: the current one)."),
]


def create_app(framework: Framework | None = None) -> typer.Typer:
    """Build the application: load plugins, add core commands, then plugins' commands."""
    if framework is None:
        framework = Framework()
        framework.load_hooks()
    app = typer.Typer(
        name="hookline",
        help="hookline: a tiny agent runtime in which every stage of a turn is a hook.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def root(ctx: typer.Context, workspace: WorkspaceOption = None) -> None:
        if workspace is not None:
            framework.workspace = workspace.expanduser().resolve()
        ctx.obj = framework

    app.command()(_run_command(framework))
    app.command(name="chat")(chat_command(framework))
    app.command(name="gateway")(gateway_command(framework))
    app.command(name="hooks")(_hooks_command(framework))
    app.command(name="plugins")(_plugins_command(framework))
    app.command(name="onboard")(_onboard_command(framework))
    app.add_typer(store_commands())
    framework.runtime.call_many_sync("register_cli_commands", app=app)
    return app


def _run_command(framework: Framework) -> Any:
    def run(
        message: Annotated[str, typer.Argument(help="The message to send.")],
        session: Annotated[str | None, typer.Option(help="Session id.")] = None,
        channel: Annotated[str, typer.Option(help="Channel name.")] = "cli",
        chat_id: Annotated[str, typer.Option("--chat-id", help="Chat id.")] = "default",
        model: Annotated[
            str | None, typer.Option(help="Model for this turn (provider:model).")
        ] = None,
        stream: Annotated[
            bool, typer.Option("--stream/--no-stream", help="Print the reply as it arrives.")
        ] = False,
        workspace: WorkspaceOption = None,
    ) -> None:
        """Run one turn and print the outbound messages."""
        import anyio

        if workspace is not None:
            framework.workspace = workspace.expanduser().resolve()

        inbound: dict[str, Any] = {"content": message, "channel": channel, "chat_id": chat_id}
        if session:
            inbound["session_id"] = session
        if model:
            inbound["context"] = {"model": model}
        printer = TurnPrinter(stream=stream)
        show_logs(logging.ERROR)  # failures are reported as the one error line below

        async def turn() -> Any:
            framework.router = printer
            async with framework.running():
                return await framework.process_inbound(inbound, stream_output=True)

        try:
            result = anyio.run(turn)
        except Exception as exc:  # a one-line error, never a traceback
            fail(exc)
        printer.finish(result)

    return run


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
                {n: {"ok": s.ok, "detail": s.detail, "source": s.source}
                 for n, s in statuses.items()}, indent=2))
            return
        if not statuses:
            typer.echo("(no plugins loaded)")
        for name, status in statuses.items():
            mark = "ok  " if status.ok else "off " if status.detail == "disabled" else "FAIL"
            typer.echo(f"{mark} {name:<20} {status.source:<40} {status.detail}")

    return plugins


def _onboard_command(framework: Framework) -> Any:
    def onboard(
        plugin: Annotated[
            str | None, typer.Option(help="Only this plugin's onboard_config.")
        ] = None,
        yes: Annotated[
            bool, typer.Option("--yes", "-y", help="Accept the proposed values.")
        ] = False,
    ) -> None:
        """Collect onboard_config fragments, confirm them, and write the config file."""
        from hookline.builtins.settings import default_home, write_config

        path = default_home() / "config.toml"
        current = _read_toml(path)
        try:
            proposed = framework.collect_onboard_config(current, plugin=plugin)
        except Exception as exc:  # bad fragments, invalid settings: one line, no traceback
            fail(exc)
        config = proposed if yes else _confirm(proposed)
        write_config(path, config)
        typer.echo(f"wrote {path}")

    return onboard


def _confirm(proposed: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Ask for each plain value, the proposal as default."""
    result: dict[str, Any] = {}
    for key, value in proposed.items():
        if isinstance(value, dict):
            result[key] = _confirm(value, f"{prefix}{key}.")
        elif isinstance(value, str | int | float | bool):
            secret = any(word in key.lower() for word in ("key", "token", "secret", "password"))
            answer = typer.prompt(f"{prefix}{key}", default=value, type=type(value),
                                  hide_input=secret, show_default=not secret)
            result[key] = answer
        else:
            result[key] = value
    return result


def _read_toml(path: Path) -> dict[str, Any]:
    import tomllib

    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        fail(RuntimeError(f"cannot read {path}: {exc}; fix or remove the file"))


def main(argv: list[str] | None = None) -> None:
    """Console script entry point."""
    try:
        app = create_app()
        app(args=argv if argv is not None else sys.argv[1:], prog_name="hookline")
    except typer.Exit as exit_:
        raise SystemExit(exit_.exit_code) from None
    except Exception as exc:  # strict plugin loading, unwritable config, ...: one line
        try:
            fail(exc)
        except typer.Exit:
            raise SystemExit(1) from None
