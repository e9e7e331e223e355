"""`hookline plugins check TARGET`: validate a plugin without starting anything.

Work in progress: the command is wired, the checks follow.
"""

from __future__ import annotations

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
        target: Annotated[str, typer.Argument(metavar="TARGET")],
        as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
        strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too.")] = False,
    ) -> None:
        """Check a plugin's hook implementations without starting anything."""
        raise typer.Exit(2)

    return group
