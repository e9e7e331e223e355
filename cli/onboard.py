"""``hookline onboard``: write `<HOOKLINE_HOME>/config.toml` from answers or flags.

Kept out of ``app.py`` so the command can grow (validation, a test call) without
weighing on the start-up of the other commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from hookline.kernel import Framework

from .output import fail


def onboard_command(framework: Framework) -> Any:
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
