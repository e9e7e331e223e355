"""Frameworks for tests: the builtin plugin (or not), a scripted model, the plugins under test.

A test usually gets these through the `hookline_framework` fixture, which fixes the home
and the workspace to temporary folders; `build_framework` is the same without pytest.
"""

from __future__ import annotations

import itertools
import json
import os
import tomllib
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from hookline.kernel import ENTRY_POINT_GROUP, Framework
from hookline.kernel.framework import BUILTIN_NAME

if TYPE_CHECKING:
    from hookline.builtins import BuiltinServices
    from hookline.builtins.config import Settings
    from hookline.builtins.models import ScriptedModel

__all__ = ["FrameworkFactory", "Script", "build_framework", "builtin_plugin", "scripted_model",
           "write_script"]

Script: TypeAlias = str | os.PathLike[str] | Sequence[Mapping[str, Any]] | Mapping[str, Any]
"""A scripted model's turns: a `scripted:` file (JSON or TOML), a list of turn mappings,
or `{"turns": [...]}` (docs/builtins.md#the-scripted-model)."""

_scripts = itertools.count(1)


def write_script(script: Script, folder: str | os.PathLike[str]) -> Path:
    """The turns file for `script`: a path is checked and kept, turns are written as JSON
    into `folder`. Either way the turns are validated now, so a typo fails the test at
    setup rather than in the middle of a turn."""
    from hookline.builtins.models import load_turns

    if isinstance(script, str | os.PathLike):
        path = Path(script).expanduser().absolute()
    else:
        data = dict(script) if isinstance(script, Mapping) else {"turns": list(script)}
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"script-{next(_scripts)}.json"
        path.write_text(json.dumps(data, ensure_ascii=False))
    load_turns(path)
    return path


def _settings(home: Path, settings: Settings | Mapping[str, Any] | None,
              script_path: Path | None) -> Settings:
    """`settings` as given, or the home's config file and the environment with the
    mapping's values on top (validated as a config file would be)."""
    from hookline.builtins.config import Settings, settings_from_config

    if isinstance(settings, Settings):
        resolved = settings
    else:
        config_path = home / "config.toml"
        data: dict[str, Any] = (tomllib.loads(config_path.read_text("utf-8"))
                                if config_path.is_file() else {})
        data.update(settings or {})
        resolved = settings_from_config(data, os.environ, home)
    if script_path is not None:
        resolved = replace(resolved, model=f"scripted:{script_path}")
    return resolved


def _plugin_items(plugins: Iterable[object]) -> list[tuple[str | None, object]]:
    items: list[tuple[str | None, object]] = []
    for plugin in plugins:
        if (isinstance(plugin, tuple) and len(plugin) == 2 and isinstance(plugin[0], str)):
            items.append((plugin[0], plugin[1]))
        else:
            items.append((None, plugin))
    return items


def _default_name(plugin: object, taken: set[str]) -> str:
    base = (plugin.__name__ if isinstance(plugin, type | types.ModuleType)
            else type(plugin).__name__)
    name, number = base, 1
    while name in taken:
        number += 1
        name = f"{base}-{number}"
    return name


def _entry_point_plugins(framework: Framework, names: Sequence[str]) -> None:
    """Load the named entry points of the `hookline` group as `load_hooks()` does: a
    callable is called with the framework; registered under the entry point's name."""
    from importlib import metadata

    found = {entry.name: entry for entry in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    for name in names:
        entry = found.get(name)
        if entry is None:
            installed = ", ".join(sorted(found)) or "none"
            raise LookupError(
                f"no entry point {name!r} in the {ENTRY_POINT_GROUP!r} group (installed: "
                f"{installed}); install the plugin's project (pip install -e .) or fix the "
                f"name in its [project.entry-points.{ENTRY_POINT_GROUP}] table")
        obj = entry.load()
        plugin = obj(framework) if callable(obj) else obj
        framework.registry.register(plugin, name=entry.name)


def _instantiate(cls: type, framework: Framework) -> object:
    """`cls(framework)`, as the loader calls a callable entry point."""
    try:
        return cls(framework)
    except TypeError as exc:
        raise TypeError(
            f"{cls.__qualname__}(framework) failed: {exc}. A plugin class is called with the "
            f"framework, as the entry point loader calls it; give it "
            f"__init__(self, framework), or pass an instance instead of the class"
        ) from exc


def build_framework(
    *plugins: object,
    home: str | os.PathLike[str],
    workspace: str | os.PathLike[str],
    builtin: bool = True,
    entry_points: Sequence[str] = (),
    settings: Settings | Mapping[str, Any] | None = None,
    script: Script | None = None,
) -> Framework:
    """A framework for a test, registered in `load_hooks()` order: the builtin plugin
    (named `builtin`), then `entry_points` by name, then `plugins`.

    A plugin is an object (registered as it is), a class (called with the framework, as
    a callable entry point is) or a `(name, plugin)` pair; without a name it is named
    after its class (or module). `settings` is a `Settings`, or a mapping of config-file
    keys applied over the home's config file and the `HOOKLINE_*` environment. `script`
    gives the builtin agent a scripted model.
    """
    if isinstance(entry_points, str):
        entry_points = (entry_points,)
    if not builtin and (settings is not None or script is not None):
        raise ValueError("settings= and script= configure the builtin plugin; "
                         "pass builtin=True or leave them out")
    home_path = Path(home)
    framework = Framework(workspace)
    if builtin:
        from hookline.builtins.plugin import BuiltinPlugin
        from hookline.builtins.privacy import secure_home

        if script is not None:  # the home is made private first, as a turn would find it
            secure_home(home_path)
        script_path = None if script is None else write_script(script, home_path / "scripts")
        plugin = BuiltinPlugin(framework, settings=_settings(home_path, settings, script_path))
        framework.registry.register(plugin, name=BUILTIN_NAME)
    _entry_point_plugins(framework, entry_points)
    taken = {name for name, _ in framework.registry.list_name_plugin()}
    for name, item in _plugin_items(plugins):
        obj = _instantiate(item, framework) if isinstance(item, type) else item
        chosen = name if name is not None else _default_name(item, taken)
        taken.add(framework.registry.register(obj, name=chosen))
    return framework


class FrameworkFactory:
    """`make(*plugins, builtin=True, entry_points=(), settings=None, script=None)`: what
    the `hookline_framework` fixture returns, bound to the test's home and workspace."""

    def __init__(self, home: Path, workspace: Path) -> None:
        self.home = home
        self.workspace = workspace
        self.made: list[Framework] = []

    def __call__(
        self,
        *plugins: object,
        builtin: bool = True,
        entry_points: Sequence[str] = (),
        settings: Settings | Mapping[str, Any] | None = None,
        script: Script | None = None,
        workspace: str | os.PathLike[str] | None = None,
    ) -> Framework:
        framework = build_framework(
            *plugins, home=self.home,
            workspace=self.workspace if workspace is None else workspace,
            builtin=builtin, entry_points=entry_points, settings=settings, script=script)
        self.made.append(framework)
        return framework


def builtin_plugin(framework: Framework) -> BuiltinServices:
    """The framework's builtin plugin (registered as `builtin`)."""
    from hookline.builtins import builtin_services

    plugin = builtin_services(framework)
    if plugin is None:
        raise LookupError("this framework has no builtin plugin (built with builtin=False?)")
    return plugin


def scripted_model(framework: Framework) -> ScriptedModel:
    """The scripted model the builtin agent plays, to see what each model call was shown
    (`.calls`) and how many turns were used (`.used`, `.remaining`)."""
    from hookline.builtins.models import ScriptedModel

    builtin = builtin_plugin(framework)
    model = builtin.get_agent().open_model(builtin.get_settings().model_spec)
    if not isinstance(model, ScriptedModel):
        raise LookupError(f"the builtin agent's model is {builtin.get_settings().model_spec!r}, "
                          f"not a scripted one (pass script= to the framework factory)")
    return model
