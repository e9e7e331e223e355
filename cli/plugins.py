"""`hookline plugins`: each plugin's load status, and `plugins check TARGET`.

The checker itself (cli/check.py) is imported only when `check` runs: every command
builds this group, and start-up counts.
"""

import json
from collections.abc import Callable
from typing import Annotated, Any

import typer

from hookline.kernel import Framework


def plugins_commands(framework: Framework, show: Callable[..., Any]) -> typer.Typer:
    """The `plugins` group: bare, today's load status (`show`); `check`, validation."""
    group = typer.Typer(name="plugins", help="Show each plugin's load status, or check a plugin.")

    @group.callback(invoke_without_command=True)
    def plugins(
        ctx: typer.Context,
        as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """Show each plugin's load status (`plugins check TARGET` validates a plugin)."""
        if ctx.invoked_subcommand is None:
            show(as_json=as_json)

    @group.command(name="check")
    def check(
        target: Annotated[str, typer.Argument(
            metavar="TARGET", show_default=False,
            help="A folder with a pyproject.toml, module:object, a module, or an installed "
                 "distribution.")],
        as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
        strict: Annotated[bool, typer.Option(
            "--strict", help="Warnings fail the check too.")] = False,
    ) -> None:
        """Check a plugin's hook implementations without starting anything.

        Exit status: 0 no problems, 1 problems found, 2 the target cannot be found.
        """
        from .check import TargetError, check_target

        try:
            outcome = check_target(target, framework.workspace)
        except TargetError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        errors = sum(f.severity == "error" for f in outcome.findings)
        warnings = len(outcome.findings) - errors
        failed = errors > 0 or (strict and warnings > 0)
        if as_json:
            typer.echo(json.dumps({
                "target": target,
                "problems": [finding.as_dict() for finding in outcome.findings],
                "summary": {"plugins": outcome.plugins, "errors": errors,
                            "warnings": warnings, "ok": not failed},
            }, indent=2))
        else:
            for finding in outcome.findings:
                typer.echo(finding.text())
            typer.echo(_summary(outcome.plugins, errors, warnings))
        raise typer.Exit(1 if failed else 0)

    return group


def _summary(plugins: list[str], errors: int, warnings: int) -> str:
    def count(n: int, word: str) -> str:
        return f"{n} {word}{'' if n == 1 else 's'}"

    checked = f"checked {count(len(plugins), 'plugin')} ({', '.join(plugins)})"
    if not errors and not warnings:
        return f"{checked}: no problems"
    return f"{checked}: {count(errors, 'error')}, {count(warnings, 'warning')}"
