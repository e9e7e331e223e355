"""`hookline new plugin NAME`: write a ready-to-install plugin project.

The project is what docs/plugin-packaging.md describes, and what `hookline plugins` then lists: a
setuptools `pyproject.toml` declaring the plugin class in the `hookline` entry point group
(the loader calls it with the framework), a module implementing one hook, a test built on
the `hookline.testing` fixtures (asyncio and trio), and a README with the next steps.
Nothing is overwritten: an existing folder must be empty.
"""

import keyword
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

_DISTRIBUTION = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
"""A valid distribution name (the core metadata `Name` field)."""


@dataclass(frozen=True)
class PluginNames:
    """The names a plugin project needs, all derived from the one the user gave."""

    project: str
    """The distribution name, normalised (PEP 503: lower case, runs of `-_.` as `-`); also
    the entry point's name, so the plugin is registered under it."""
    module: str
    """The import name: the project name with `_` for `-`."""
    class_name: str
    """`<CamelCase>Plugin`."""


def plugin_names(name: str) -> PluginNames:
    """Check `name` and derive the project, module and class names, or raise ValueError
    saying what to change."""
    if not _DISTRIBUTION.match(name):
        raise ValueError(
            f"{name!r} is not a valid project name: use letters, digits, '-', '_' and '.', "
            f"starting and ending with a letter or digit (for example demo-greeter)")
    project = re.sub(r"[-_.]+", "-", name).lower()
    module = project.replace("-", "_")
    if not module.isidentifier() or keyword.iskeyword(module):
        raise ValueError(
            f"{name!r} gives the module name {module!r}, which Python cannot import "
            f"(it must not start with a digit or be a keyword); choose another name")
    if module in sys.stdlib_module_names or module == "hookline":
        shadowed = ("hookline itself" if module == "hookline"
                    else f"the standard library module {module!r}")
        raise ValueError(
            f"{name!r} gives the module name {module!r}, which would shadow {shadowed}; "
            f"choose another name (for example {project}-plugin)")
    class_name = "".join(part.capitalize() for part in module.split("_") if part) + "Plugin"
    return PluginNames(project, module, class_name)


def project_files(names: PluginNames) -> dict[str, str]:
    """Relative path -> content of every file of the project."""
    project, module, cls = names.project, names.module, names.class_name
    return {
        "pyproject.toml": _PYPROJECT.format(project=project, module=module, cls=cls),
        f"{module}/__init__.py": _INIT.format(project=project, module=module, cls=cls),
        f"{module}/plugin.py": _PLUGIN.format(project=project, cls=cls),
        "tests/conftest.py": _CONFTEST,
        f"tests/test_{module}.py": _TEST.format(project=project, module=module, cls=cls),
        "README.md": _README.format(project=project, module=module, cls=cls),
    }


def write_project(name: str, parent: Path) -> tuple[Path, PluginNames, list[Path]]:
    """Write the project folder `parent/name`; refuse a non-empty one. Returns the folder,
    the names and the files written."""
    names = plugin_names(name)
    folder = parent / name
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder} exists and is not a folder; choose another name or --path")
    if folder.is_dir() and any(folder.iterdir()):
        raise ValueError(f"{folder} already exists and is not empty; nothing was written. "
                         f"Choose another name or --path, or remove the folder first")
    written: list[Path] = []
    for relative, content in project_files(names).items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return folder, names, written


def new_commands() -> typer.Typer:
    """The `new` command group."""
    group = typer.Typer(name="new", help="Create a new project from a template.",
                        no_args_is_help=True)
    group.command(name="plugin")(plugin)
    return group


def plugin(
    name: Annotated[str, typer.Argument(
        metavar="NAME", help="Project name, e.g. demo-greeter (the module is demo_greeter).")],
    path: Annotated[Path | None, typer.Option(
        "--path", metavar="DIR", file_okay=False,
        help="Where to create the project folder (default: the current folder).")] = None,
) -> None:
    """Write a plugin project NAME/: pyproject, a plugin module with one hook, a test, a README."""
    from .output import fail

    parent = (path if path is not None else Path.cwd()).expanduser()
    try:
        folder, names, written = write_project(name, parent)
    except (ValueError, OSError) as exc:
        fail(exc)
    typer.echo(f"created {folder}: plugin {names.project!r} "
               f"({names.module}.plugin:{names.class_name})")
    for file in written:
        typer.echo(f"  {file.relative_to(folder)}")
    typer.echo("next:")
    typer.echo(f"  cd {folder}")
    steps = [("pip install -e '.[test]'", "in the environment hookline is installed in"),
             ("pytest", ""), ("hookline plugins check .", "what CI should run too"),
             (f"mypy {names.module}", "the typed hook signatures" + (
                 "; hookline is an editable install here, which mypy cannot follow: "
                 "README.md says how" if _editable_hookline() else "")),
             ("hookline plugins", f"lists {names.project} as ok")]
    width = max(len(command) for command, _ in steps)
    for command, why in steps:
        typer.echo(f"  {command.ljust(width)}   # {why}" if why else f"  {command}")


def _editable_hookline() -> bool:
    """Whether hookline runs from a checkout (`pip install -e`), not an installed copy: its
    import hook then hides it from mypy."""
    import hookline.kernel

    return "site-packages" not in Path(hookline.kernel.__file__).parts


_PYPROJECT = """\
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "{project}"
version = "0.1.0"
description = "A hookline plugin."
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["hookline"]

[project.optional-dependencies]
# pytest finds hookline's fixtures by itself (hookline.testing); trio runs the tests
# on trio as well as asyncio; mypy checks the plugin against the typed hooks.
test = ["pytest>=8", "anyio[trio]>=4.4", "mypy>=1.10"]

# The loader calls the class with the framework and registers the plugin under the
# entry point's name.
[project.entry-points.hookline]
{project} = "{module}.plugin:{cls}"

[tool.setuptools]
packages = ["{module}"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""

_INIT = '''\
"""{project}: a hookline plugin."""

from .plugin import {cls}

__all__ = ["{cls}"]
'''

_PLUGIN = '''\
"""The plugin: one hook, `system_prompt`, adds a line to the agent's instructions.

hookline's docs/hooks/index.md lists the 27 hooks a plugin can implement.
"""

from __future__ import annotations

from typing import Any

from hookline.kernel import SystemPromptHook, hookimpl


class {cls}(SystemPromptHook):
    """Registered as `{project}` by the `hookline` entry point.

    `SystemPromptHook` is the hook's typed description: a type checker (mypy) reports a
    misspelled parameter or a wrong return type; at run time it changes nothing.
    """

    instructions = "Greet the user by name when they tell you their name."

    def __init__(self, framework: Any) -> None:
        self.framework = framework  # the loader calls the class with the Framework

    @hookimpl
    def system_prompt(self, prompt: Any, state: dict[str, Any]) -> str:
        return self.instructions
'''

_CONFTEST = '''\
"""Every async test runs on asyncio and on trio."""

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param
'''

_TEST = '''\
"""The plugin in a real turn, with a scripted model (hookline.testing fixtures)."""

import pytest

from hookline.testing import run_turn, scripted_model

from {module} import {cls}

pytestmark = pytest.mark.anyio


async def test_the_installed_entry_point_adds_the_instructions(hookline_framework):
    framework = hookline_framework(entry_points=["{project}"],
                                   script=[{{"text": "Hello, Ada!"}}])
    turn = await run_turn(framework, "I am Ada")
    assert turn.reply == "Hello, Ada!"
    turn.trace.assert_calls("system_prompt", ["{project}", "builtin"])
    shown = scripted_model(framework).calls[0].messages[0].text
    assert {cls}.instructions in shown


async def test_the_plugin_class_alone(hookline_framework):
    framework = hookline_framework({cls}, script=[{{"text": "Hi!"}}])
    turn = await run_turn(framework, "hello")
    assert turn.trace.answers("system_prompt") == ["{cls}", "builtin"]
    assert turn.entry_kinds()[-2:] == ["message", "event"]
'''

_README = """\
# {project}

A hookline plugin. `{module}/plugin.py` holds
`{cls}`, which implements one hook, `system_prompt`; the `hookline` entry point in
`pyproject.toml` registers it under the name `{project}`.

## Install and test

In the environment hookline is installed in:

```sh
pip install -e '.[test]'
pytest
hookline plugins check .   # markers, signatures, entry point: run it in CI too
mypy {module}      # the hooks' typed signatures
hookline plugins     # {project} is listed as ok
hookline hooks       # system_prompt: {project}, builtin ...
```

The tests use hookline's pytest fixtures (`hookline_framework`, `run_turn`, a scripted
model), which pytest finds by itself once hookline is installed; they run on asyncio and
trio (`tests/conftest.py`). See hookline's docs/testing.md.

mypy cannot follow an editable install of hookline itself (`pip install -e` of its
checkout): there, give it the kernel on `MYPYPATH`, as hookline's docs/typed-hooks.md
shows (`mkdir -p /tmp/hl/hookline && ln -sfn <checkout>/kernel /tmp/hl/hookline/kernel`,
then `MYPYPATH=/tmp/hl mypy {module}`).
"""
