"""Frameworks with the builtin plugin for the builtin tests, made with the plugin authors'
toolkit (``hookline.testing``): a scripted model by default, the home beside the
workspace, and the plugins under test registered after the builtin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hookline.builtins.config import Settings
from hookline.builtins.models import ScriptedModel
from hookline.builtins.plugin import BuiltinPlugin
from hookline.kernel import Framework
from hookline.testing import build_framework, builtin_plugin, scripted_model


def write_script(path: Path, turns: list[dict[str, Any]]) -> str:
    """Write a `scripted:` turn script and return its model spec."""
    path.write_text(json.dumps(turns))
    return f"scripted:{path}"


def build_builtin(workspace: Path, turns: list[dict[str, Any]] | None, *plugins: object,
                  **settings: Any) -> tuple[Framework, BuiltinPlugin]:
    """The builtin plugin answering with `turns` (unless `model` is given), then `plugins`,
    named `<class>-<index>`; `settings` are `Settings` fields."""
    if turns is not None and "model" not in settings:
        settings["model"] = write_script(workspace.parent / "turns.json", turns)
    home = workspace.parent / "home"
    named = [(f"{type(plugin).__name__.lower()}-{index}", plugin)
             for index, plugin in enumerate(plugins)]
    framework = build_framework(*named, home=home, workspace=workspace,
                                settings=Settings(home=home, **settings))
    return framework, builtin_plugin(framework)


def model_of(builtin: BuiltinPlugin) -> ScriptedModel:
    """The scripted model the agent uses (the opener keeps one client per spec)."""
    return scripted_model(builtin.framework)
