"""The ``hookline`` command line: a typer application built around one Framework.

Core commands live here; plugins add theirs through ``register_cli_commands`` when the
application is built. Heavy modules (republic, HTTP clients) are imported only by the
commands that run turns.
"""

import json
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from hookline.builtins.terminal import terminal_text
from hookline.kernel import Framework
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.framework import DISABLE_ENV

from .blame import kernel_warnings, turn_failure_blame
from .chat import chat_command
from .compact import compact_command
from .gateway import gateway_command
from .mcp import mcp_commands, mcp_summary, settle_mcp_group
from .models import models_command
from .new import new_commands
from .onboard import onboard_command
from .output import fail, plugin_prints_to_stderr
from .plugins import plugins_commands
from .rules import rules_commands
from .run import RunCommand, WorkspaceOption, run_command
from .sessions import session_commands
from .store import store_commands


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
        with plugin_prints_to_stderr():
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

    app.command(name="run", cls=RunCommand)(run_command(framework))
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
    _add_plugin_commands(framework, app)
    settle_mcp_group(app, mcp_commands(framework))
    return app


def _add_plugin_commands(framework: Framework, app: typer.Typer) -> None:
    """Plugins' `register_cli_commands`, each isolated (the kernel's `notify_sync`): one
    that raises is one warning naming it and the fix, and every other command stays, the
    `hookline plugins` that would find it included. What they print goes to stderr."""
    with plugin_prints_to_stderr(), kernel_warnings() as warnings:
        framework.runtime.notify_sync("register_cli_commands", "cli", app=app)
    for record in warnings:
        error = record.exc_info[1] if record.exc_info else None
        if error is None:  # an async implementation, skipped (the only other warning)
            said = (f"plugin {record.args[-1]!r} register_cli_commands is async, so it added "
                    f"no commands: make it a plain def"
                    if str(record.msg).startswith("hook.async_not_supported")
                    and isinstance(record.args, tuple) else record.getMessage())
            typer.echo(f"warning: {terminal_text(said)}", err=True)
            continue
        blame = turn_failure_blame(framework, error)
        typer.echo(f"warning: plugin {record.args[-1]!r} added no commands: "  # type: ignore[index]
                   f"{terminal_text(f'{type(error).__name__}: {error}')} ({blame})", err=True)


def _hooks_command(framework: Framework) -> Any:
    def hooks(
        as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """Show each hook's implementations in execution order, with diagnostics."""
        report = framework.hook_report()
        statuses = framework.plugin_status().items()
        failed = {name: status.detail for name, status in statuses
                  if not status.ok and status.detail != "disabled"}
        disabled = [name for name, status in statuses if status.detail == "disabled"]
        if as_json:
            data = report.as_dict()
            data["failed_plugins"] = failed
            data["disabled_plugins"] = disabled
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
        for name in disabled:
            typer.echo(f"plugin {name!r} is disabled ({DISABLE_ENV})")

    return hooks


def _plugins_command(framework: Framework) -> Any:
    def plugins(
        as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """Show each plugin's load status."""
        statuses = framework.plugin_status()
        registry = framework.registry
        hooks = {name: sorted(registry.plugin_hooks(name)) for name in statuses
                 if registry.has_plugin(name)}
        if as_json:
            typer.echo(json.dumps(
                {n: {"ok": s.ok, "detail": s.detail, "source": s.source, "group": s.group,
                     "hooks": hooks.get(n, [])}
                 for n, s in statuses.items()}, indent=2))
            return
        if not statuses:
            typer.echo("(no plugins loaded)")
        for name, status in statuses.items():
            mark = "ok  " if status.ok else "off " if status.detail == "disabled" else "FAIL"
            group = status.group or "-"
            detail = status.detail
            if status.ok and name in hooks and not hooks[name]:
                # Loaded, yet it changes nothing: say so rather than a plain "loaded".
                detail += (", but its factory returned None: it implements no hook"
                           if registry.get_plugin(name) is None else
                           ", but it implements no hook")
            typer.echo(f"{mark} {name:<20} {group:<9} {status.source:<40} {detail}")
        for line in mcp_summary():
            typer.echo(line)

    return plugins


def _check_current_folder(args: list[str]) -> None:
    """A current folder that was deleted (or cannot be entered) stops every command at
    its first `os.getcwd()`: go to the folder `-w` names instead, or say what is wrong."""
    try:
        os.getcwd()
    except OSError as exc:
        named = next((args[index + 1] for index, arg in enumerate(args[:-1])
                      if arg in ("--workspace", "-w")), None)
        if named is not None and os.path.isabs(os.path.expanduser(named)):
            os.chdir(os.path.expanduser(named))
            return
        raise HooklineError(
            ErrorKind.config, f"the current folder cannot be read ({exc.strerror}: deleted, or "
                              f"moved away?): cd to a folder that exists, or name the workspace "
                              f"with -w /absolute/path") from None


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
        _check_current_folder(args)
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
