"""A failing installed plugin is reported once, and only where it matters: with
HOOKLINE_STRICT_PLUGINS=1 the one error line (no warning besides), and `plugins check`
of another plugin does not mention it. The failing plugin is a real distribution,
installed by pip into a folder on PYTHONPATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HOOKLINE = shutil.which("hookline", path=str(Path(sys.executable).parent))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("badplug-src")
    (source / "pyproject.toml").write_text(textwrap.dedent("""
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "badplug"
        version = "1.0"
        [project.entry-points.hookline]
        bad = "badplug:Plugin"
    """))
    (source / "badplug.py").write_text('raise RuntimeError("boom at import")\n')
    target = tmp_path_factory.mktemp("site")
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                          "--disable-pip-version-check", "--target", str(target), str(source)],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    (target / "good_plugin.py").write_text(textwrap.dedent("""
        from hookline.kernel import hookimpl

        class Plugin:
            @hookimpl
            def resolve_session(self, message):
                return "s"

        plugin = Plugin()
    """))
    return target


def run(site: Path, tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    assert HOOKLINE, "the hookline console script is not installed in this environment"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env.update(PYTHONPATH=str(site), HOOKLINE_HOME=str(tmp_path / "home"), **extra)
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    return subprocess.run([HOOKLINE, *args], capture_output=True, text=True, env=env,
                          cwd=workspace, timeout=120)


def test_strict_loading_reports_the_failure_once(site: Path, tmp_path: Path) -> None:
    done = run(site, tmp_path, "plugins", HOOKLINE_STRICT_PLUGINS="1")
    assert done.returncode == 1
    assert done.stderr == (
        "error: plugin 'bad' (badplug:Plugin) failed to load: RuntimeError: boom at import; "
        "fix or uninstall it, or skip it with HOOKLINE_DISABLE_PLUGINS=bad\n")


def test_without_strict_the_status_shows_it(site: Path, tmp_path: Path) -> None:
    done = run(site, tmp_path, "plugins")
    assert done.returncode == 0
    assert "boom at import" in done.stdout


def test_checking_another_plugin_does_not_mention_it(site: Path, tmp_path: Path) -> None:
    done = run(site, tmp_path, "plugins", "check", "good_plugin:plugin")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bad" not in done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "checked 1 plugin (plugin): no problems"
