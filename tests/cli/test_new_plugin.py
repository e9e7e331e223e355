"""`hookline new plugin`: what an author does with it works, in an environment of their own.

The slow test makes a fresh virtual environment, installs this checkout into it (with its
dependencies, from the configured index), generates a project, installs it, runs its
tests and lists the plugin; the others check names, refusals and output quickly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import hookline.kernel
from hookline.cli.new import PluginNames, plugin_names, project_files

REPO = Path(__file__).resolve().parents[2]
HOOKLINE = shutil.which("hookline", path=str(Path(sys.executable).parent))


def _env(home: Path) -> dict[str, str]:
    environ = {key: value for key, value in os.environ.items()
               if not key.startswith(("HOOKLINE_", "PYTEST_", "VIRTUAL_ENV"))
               and key != "PYTHONPATH"}
    environ.update(HOOKLINE_HOME=str(home), PIP_DISABLE_PIP_VERSION_CHECK="1")
    return environ


def _run(*args: str | Path, cwd: Path, env: dict[str, str],
         timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(arg) for arg in args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.parametrize(("name", "expected"), [
    ("demo-greeter", PluginNames("demo-greeter", "demo_greeter", "DemoGreeterPlugin")),
    ("Demo.Greeter", PluginNames("demo-greeter", "demo_greeter", "DemoGreeterPlugin")),
    ("hookline_guard", PluginNames("hookline-guard", "hookline_guard", "HooklineGuardPlugin")),
    ("x", PluginNames("x", "x", "XPlugin")),
])
def test_names_are_derived(name: str, expected: PluginNames) -> None:
    assert plugin_names(name) == expected


@pytest.mark.parametrize(("name", "reason"), [
    ("bad name", "is not a valid project name"),
    ("-lead", "is not a valid project name"),
    ("trail.", "is not a valid project name"),
    ("", "is not a valid project name"),
    ("9lives", "which Python cannot import"),
    ("class", "which Python cannot import"),
    ("json", "would shadow the standard library module 'json'"),
    ("hookline", "would shadow hookline itself"),
])
def test_bad_names_are_refused(name: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        plugin_names(name)


def test_the_project_declares_its_class_in_the_hookline_group() -> None:
    files = project_files(plugin_names("demo-greeter"))
    assert sorted(files) == ["README.md", "demo_greeter/__init__.py", "demo_greeter/plugin.py",
                             "pyproject.toml", "tests/conftest.py", "tests/test_demo_greeter.py"]
    project = tomllib.loads(files["pyproject.toml"])
    assert project["project"]["entry-points"]["hookline"] == {
        "demo-greeter": "demo_greeter.plugin:DemoGreeterPlugin"}
    assert project["build-system"]["build-backend"] == "setuptools.build_meta"
    assert project["tool"]["setuptools"]["packages"] == ["demo_greeter"]
    for path, text in files.items():
        if path.endswith(".py"):
            compile(text, path, "exec")


def test_output_and_refusals(tmp_path: Path) -> None:
    assert HOOKLINE, "the hookline console script is not installed"
    env = _env(tmp_path / "home")
    out = _ok(_run(HOOKLINE, "new", "plugin", "demo-greeter", cwd=tmp_path, env=env))
    folder = tmp_path / "demo-greeter"
    assert out.splitlines()[0] == (f"created {folder}: plugin 'demo-greeter' "
                                   f"(demo_greeter.plugin:DemoGreeterPlugin)")
    assert "  demo_greeter/plugin.py" in out.splitlines()
    # These tests run on an editable install (README's command), which mypy cannot follow.
    assert "site-packages" not in Path(hookline.kernel.__file__).parts
    assert out.splitlines()[-6:] == [
        f"  cd {folder}", "  pip install -e '.[test]'   # in the environment hookline is "
        "installed in", "  pytest", "  hookline plugins check .   # what CI should run too",
        "  mypy demo_greeter          # the typed hook signatures; hookline is an editable "
        "install here, which mypy cannot follow: README.md says how",
        "  hookline plugins           # lists demo-greeter as ok"]
    before = {path: path.read_text() for path in folder.rglob("*") if path.is_file()}

    again = _run(HOOKLINE, "new", "plugin", "demo-greeter", cwd=tmp_path, env=env)
    assert again.returncode == 1 and again.stdout == ""
    assert again.stderr.startswith(f"error: {folder} already exists and is not empty")
    assert {path: path.read_text() for path in folder.rglob("*") if path.is_file()} == before

    bad = _run(HOOKLINE, "new", "plugin", "9lives", cwd=tmp_path, env=env)
    assert bad.returncode == 1 and "which Python cannot import" in bad.stderr
    assert not (tmp_path / "9lives").exists()

    (tmp_path / "empty").mkdir()
    _ok(_run(HOOKLINE, "new", "plugin", "empty", cwd=tmp_path, env=env))
    assert (tmp_path / "empty" / "empty" / "plugin.py").is_file(), "an empty folder is used"

    elsewhere = tmp_path / "projects"
    out = _ok(_run(HOOKLINE, "new", "plugin", "other", "--path", elsewhere, cwd=tmp_path,
                   env=env))
    assert (elsewhere / "other" / "pyproject.toml").is_file()
    assert f"created {elsewhere / 'other'}" in out


@pytest.fixture(scope="module")
def author_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with this checkout installed, as an author makes one:
    as a built package (not editable), as from the index, so mypy reads its types."""
    root = tmp_path_factory.mktemp("author-venv")
    env = _env(root / "home")
    _ok(_run(sys.executable, "-m", "venv", root / "venv", cwd=root, env=env))
    python = root / "venv" / "bin" / "python"
    # From a copy: building in the checkout would leave a build/ folder behind in it.
    source = root / "hookline-source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "site", "*.egg-info", "__pycache__", ".*cache", ".venv"))
    _ok(_run(python, "-m", "pip", "install", "--quiet", source, cwd=root, env=env,
             timeout=600))
    return python


@pytest.mark.slow
def test_a_new_plugin_installs_tests_green_and_loads(author_python: Path,
                                                     tmp_path: Path) -> None:
    env = _env(tmp_path / "home")
    bin_dir = author_python.parent
    said = _ok(_run(bin_dir / "hookline", "new", "plugin", "demo-greeter", cwd=tmp_path,
                    env=env))
    assert "  mypy demo_greeter          # the typed hook signatures\n" in said, (
        "an installed hookline (not editable) needs no word about mypy")
    project = tmp_path / "demo-greeter"
    _ok(_run(author_python, "-m", "pip", "install", "--quiet", "-e", f"{project}[test]",
             cwd=tmp_path, env=env))

    tests = _ok(_run(author_python, "-m", "pytest", "-v", "-p", "no:cacheprovider",
                     cwd=project, env=env, timeout=120))
    assert "4 passed" in tests, tests
    assert "test_the_installed_entry_point_adds_the_instructions[trio] PASSED" in tests

    plugins = _ok(_run(bin_dir / "hookline", "plugins", cwd=tmp_path, env=env)).splitlines()
    assert any(line.split()[:2] == ["ok", "demo-greeter"]
               and "demo_greeter.plugin:DemoGreeterPlugin" in line for line in plugins), plugins
    hooks = _ok(_run(bin_dir / "hookline", "hooks", cwd=tmp_path, env=env)).splitlines()
    assert "system_prompt: demo-greeter, builtin    [stored: builtin, demo-greeter]" in hooks


BROKEN_PLUGIN = """\
from typing import Any

from hookline.kernel import SystemPromptHook, hookimpl


class DemoGreeterPlugin(SystemPromptHook):
    def __init__(self, framework: Any) -> None:
        self.framework = framework

    @hookimpl
    def system_prompt(self, prompt: Any, state: dict[str, Any]) -> int:  # typed mistake
        return 3

    @hookimpl
    def load_state(self, message: Any, sesion_id: str) -> dict[str, Any]:  # misspelled
        return {}

    @hookimpl(wrapper=True)
    def build_prompt(self, message: Any, session_id: str, state: dict[str, Any]) -> Any:
        return (yield)

    @hookimpl
    async def provide_tools(self) -> list[Any]:  # provide_tools is dispatched sync-only
        return []
"""


@pytest.mark.slow
def test_the_checker_and_the_type_checker_pass_a_new_plugin_and_catch_a_broken_copy(
        author_python: Path, tmp_path: Path) -> None:
    env = _env(tmp_path / "home")
    bin_dir = author_python.parent
    _ok(_run(bin_dir / "hookline", "new", "plugin", "demo-greeter", cwd=tmp_path, env=env))
    project = tmp_path / "demo-greeter"
    _ok(_run(author_python, "-m", "pip", "install", "--quiet", "-e", f"{project}[test]",
             cwd=tmp_path, env=env))
    checked = _run(bin_dir / "hookline", "plugins", "check", ".", cwd=project, env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    typed = _run(bin_dir / "mypy", "--strict", "demo_greeter", cwd=project, env=env,
                 timeout=300)
    assert typed.returncode == 0, typed.stdout + typed.stderr

    broken = tmp_path / "broken"
    shutil.copytree(project, broken, ignore=shutil.ignore_patterns("*.egg-info",
                                                                   "__pycache__"))
    (broken / "demo_greeter" / "plugin.py").write_text(BROKEN_PLUGIN)
    checked = _run(bin_dir / "hookline", "plugins", "check", ".", cwd=broken, env=env)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    report = checked.stdout
    where = "demo_greeter/plugin.py"
    lines = report.splitlines()
    assert lines[-1] == "checked 1 plugin (demo-greeter): 4 errors, 0 warnings", report
    expected = {
        10: ("system_prompt", "is annotated '-> int', but system_prompt returns str | None"),
        14: ("load_state", "declares 'sesion_id', which the hook does not have"),
        18: ("build_prompt", "wrapper=True is not supported"),
        22: ("provide_tools", "is async, but provide_tools is dispatched on a sync path"),
    }
    for line, (hook, message) in expected.items():
        prefix = (f"{where}:{line}: [plugin demo-greeter] hook {hook}, "
                  f"function DemoGreeterPlugin.{hook}: {message}")
        assert any(shown.startswith(prefix) and "; fix: " in shown for shown in lines), (
            prefix, report)

    typed = _run(bin_dir / "mypy", "--strict", "demo_greeter", cwd=broken, env=env,
                 timeout=300)
    assert typed.returncode == 1, typed.stdout
    assert (f'{where}:11: error: Signature of "system_prompt" incompatible with supertype '
            f'"hookline.kernel.typed.SystemPromptHook"') in typed.stdout, typed.stdout
    assert "def system_prompt(self, prompt: Any, state: dict[str, Any]) -> int" in typed.stdout
