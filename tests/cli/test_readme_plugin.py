"""The README's five-minute plugin, taken from the README itself, works as it says, and so
does its test (on the hookline.testing fixtures)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
HOOKLINE = shutil.which("hookline", path=str(Path(sys.executable).parent))


def _block(language: str, after: str) -> str:
    text = README.read_text("utf-8")
    start = text.index(after)
    match = re.compile(rf"```{language}\n(.*?)```", re.S).search(text, start)
    assert match, f"no {language} block after {after!r} in README.md"
    return match.group(1)


def _installed(tmp_path: Path) -> dict[str, str]:
    """What `pip install -e ./hookline-guard` makes visible (the module and its metadata),
    as the environment of a subprocess."""
    code = _block("python", "## A plugin in five minutes")
    project = tomllib.loads(_block("toml", "## A plugin in five minutes"))
    entry = project["project"]["entry-points"]["hookline"]
    site = tmp_path / "site"
    info = site / "hookline_guard-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hookline-guard\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        "[hookline]\n" + "".join(f"{name} = {target}\n" for name, target in entry.items()))
    (site / "guard_plugin.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOOKLINE_", "PYTEST_"))}
    env.update(HOOKLINE_HOME=str(tmp_path / "home"), PYTHONPATH=str(site))
    return env


def test_readme_plugin_shows_in_hooks_and_takes_effect_in_a_turn(tmp_path: Path) -> None:
    assert HOOKLINE, "the hookline console script is not installed"
    env = _installed(tmp_path)

    workspace = tmp_path / "workspace"  # beside the home: the sandbox refuses one inside
    (workspace / "build").mkdir(parents=True)

    def hookline(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([HOOKLINE, *args], capture_output=True, text=True, env=env,
                              cwd=workspace, timeout=120)

    hooks = hookline("hooks").stdout.splitlines()
    assert "system_prompt: guard, builtin    [stored: builtin, guard]" in hooks
    assert ("before_tool_call: guard [fail_closed], builtin [async]    [stored: builtin, "
            "guard]") in hooks
    denied = hookline("run", '/tool shell {"command": "rm -rf build"}')
    assert denied.returncode == 3, denied.stderr  # the turn ended with a call denied
    assert "guard: refusing to run 'rm -rf build'" in denied.stdout
    assert (workspace / "build").is_dir(), "the command was not run"
    allowed = hookline("run", '/tool shell {"command": "echo still here"}')
    assert "still here" in allowed.stdout


def test_readme_plugins_test_passes(tmp_path: Path) -> None:
    env = _installed(tmp_path)
    tests = tmp_path / "hookline-guard" / "tests"
    tests.mkdir(parents=True)
    (tests / "test_guard.py").write_text(_block("python", "`tests/test_guard.py`:"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider",
                           "hookline-guard/tests"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    # One test, run on every backend anyio's pytest plugin finds (asyncio, and trio here).
    assert "test_rm_is_refused[asyncio] PASSED" in done.stdout, done.stdout
