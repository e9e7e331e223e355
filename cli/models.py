"""`hookline models`: the model turns use, its fallbacks and the aliases, from the settings.

Nothing is called: the list says what is configured and where each value came from, so a
user can see why a turn talks to the model it does.
"""

import json
from typing import Annotated, Any

import typer

from .output import fail


def models_command() -> Any:
    def models(
        as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """Show the configured model, its fallbacks and the model aliases."""
        from hookline.builtins.config import SettingsError, load_settings

        try:
            settings = load_settings()
        except SettingsError as exc:
            fail(exc)
        rows = [("current", settings.model_spec, _named(settings.model, settings.model_spec),
                 _source(settings.sources, "model"))]
        rows += [("fallback", settings.resolve_model(name),
                  _named(name, settings.resolve_model(name)),
                  _source(settings.sources, "fallback_models"))
                 for name in settings.fallback_models]
        rows += [("alias", spec, name, _source(settings.sources, "model_aliases"))
                 for name, spec in settings.model_aliases.items()]
        if as_json:
            typer.echo(json.dumps([{"role": role, "spec": spec, "alias": alias or None,
                                    "source": source} for role, spec, alias, source in rows],
                                  indent=2))
            return
        for role, spec, alias, source in rows:
            named = f"{alias} = " if alias else ""
            typer.echo(f"{role:<9} {named + spec:<45} {source}")

    return models


def _named(name: str | None, spec: str) -> str:
    """The alias a setting used, when it used one."""
    return name if name and name != spec else ""


def _source(sources: Any, key: str) -> str:
    source = str(sources.get(key, "default"))
    if source == "default":
        return "(default: no model configured)" if key == "model" else "(default)"
    kind, _, where = source.partition(":")
    return f"({'file ' if kind == 'file' else ''}{where})"
