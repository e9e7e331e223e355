"""Frameworks with the builtin plugin for the builtin tests: a scripted model by default,
the home beside the workspace, and the plugins under test registered after the builtin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hookline.builtins.models import ScriptedModel
from hookline.builtins.plugin import BuiltinPlugin
from hookline.builtins.settings import Settings
from hookline.kernel import Framework


def write_script(path: Path, turns: list[dict[str, Any]]) -> str:
    """Write a `scripted:` turn script and return its model spec."""
    path.write_text(json.dumps(turns))
    return f"scripted:{path}"


def build_builtin(workspace: Path, turns: list[dict[str, Any]] | None, *plugins: object,
                  **settings: Any) -> tuple[Framework, BuiltinPlugin]:
    """The builtin plugin answering with `turns` (unless `model` is given), then `plugins`."""
    if turns is not None and "model" not in settings:
        settings["model"] = write_script(workspace.parent / "turns.json", turns)
    framework = Framework(workspace)
    builtin = BuiltinPlugin(framework, settings=Settings(home=workspace.parent / "home",
                                                         **settings))
    framework.registry.register(builtin, name="builtin")
    for index, plugin in enumerate(plugins):
        framework.registry.register(plugin, name=f"{type(plugin).__name__.lower()}-{index}")
    return framework, builtin


def model_of(builtin: BuiltinPlugin) -> ScriptedModel:
    """The scripted model the agent uses (the opener keeps one client per spec)."""
    model = builtin.get_agent().open_model(builtin.get_settings().model_spec)
    assert isinstance(model, ScriptedModel)
    return model
