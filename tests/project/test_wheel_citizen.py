"""The wheel is a good citizen of an environment it is installed in: in a fresh virtual
environment holding hookline's wheel (no checkout on the path), an unrelated project's
``pytest -W error`` passes (pytest's assertion rewriting sees one top-level name,
``hookline``), and ``mypy --strict`` accepts a plugin that adds a ``ModelMessage`` in
``before_llm_call``, importing only ``hookline.kernel``; and the conformance suite the
wheel ships runs as ``python -m hookline.spec`` against plain pluggy. One venv: slow."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

PLUGIN = '''\
"""A plugin of an unrelated project: it reminds the model to be brief."""

from __future__ import annotations

import dataclasses

from hookline.kernel import LLMCallRequest, ModelMessage, hookimpl
from hookline.kernel.typed import BeforeLLMCallHook


class Reminder:
    @hookimpl
    def before_llm_call(self, *, request: LLMCallRequest, **_: object) -> LLMCallRequest:
        reminder = ModelMessage.system("Be brief.")
        return dataclasses.replace(request, messages=[*request.messages, reminder])


_: BeforeLLMCallHook = Reminder()
'''

PROJECT_TEST = '''\
import asyncio

import hookline
from hookline.kernel import Framework, LLMCallRequest, ModelMessage

from reminder import Reminder


def test_the_reminder_is_the_last_message():
    framework = Framework()
    framework.registry.register(Reminder(), name="reminder")
    request = LLMCallRequest(run_id="r", model="m", messages=[ModelMessage.user("hi")])
    final, decision = asyncio.run(framework.agent_hooks.before_llm_call(request, {}))
    assert decision is None
    assert [message.text for message in final.messages] == ["hi", "Be brief."]
    assert "site-packages" in hookline.__file__


def test_assertions_are_rewritten():
    numbers = [1, 2]
    try:
        assert numbers == [1, 3]
    except AssertionError as error:
        assert "[1, 2] == [1, 3]" in str(error)
'''


def _run(*command: str | Path, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run([str(part) for part in command], cwd=cwd, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_wheel_in_a_fresh_venv_beside_an_unrelated_project(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTHON", "HOOKLINE_", "VIRTUAL_ENV", "PYTEST"))}
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
         "--disable-pip-version-check", "-w", dist, ROOT, cwd=tmp_path, env=env)
    (wheel,) = dist.glob("hookline-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for typed in ("hookline/py.typed", "hookline/kernel/py.typed", "hookline/builtins/py.typed",
                  "hookline/cli/py.typed", "hookline/testing/py.typed"):
        assert typed in names
    assert "hookline/__init__.py" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    fixtures = [name for name in names if name.startswith("hookline/spec/fixtures/")]
    assert len(fixtures) == len(list((ROOT / "spec" / "fixtures").rglob("*.toml")))
    assert "hookline/spec/rules.toml" in names and "hookline/spec/pluggy_expected.toml" in names

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path, env=env)
    python = venv / "bin" / "python"
    _run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel,
         "pytest>=8", "mypy>=1.10", "pluggy==1.6.0", cwd=tmp_path, env=env)

    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "reminder.py").write_text(PLUGIN)
    (project / "tests" / "test_reminder.py").write_text(PROJECT_TEST)
    (project / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.pytest.ini_options]
        pythonpath = ["."]
    """))
    out = _run(python, "-m", "pytest", "-W", "error", "-q", "-p", "no:cacheprovider",
               cwd=project, env=env)
    assert "2 passed" in out
    out = _run(python, "-m", "mypy", "--strict", "--no-incremental", "reminder.py",
               cwd=project, env=env)
    assert out.startswith("Success: no issues found in 1 source file"), out

    junit = tmp_path / "suite.xml"
    out = _run(python, "-m", "hookline.spec", "-q", "--adapter",
                "hookline.spec.pluggy_adapter:PluggyAdapter",
               "--expected", "pluggy_expected.toml", "--junit-xml", junit, cwd=project, env=env)
    dispatch = len(list((ROOT / "spec" / "fixtures" / "dispatch").glob("*.toml")))
    assert out.splitlines()[-1].startswith(
        f"{dispatch - 11} passed, 0 failed, {len(fixtures) - dispatch} skipped, 11 failed as "
        f"expected (suite 0.1.0, adapter pluggy")
    assert junit.read_text().count("<testcase ") == len(fixtures)
    missing = subprocess.run([python, "-m", "hookline.spec", "no-such-folder"], cwd=project,
                             env=env, capture_output=True, text=True)
    assert missing.returncode == 2
    assert missing.stderr == "error: no such fixture file or folder: no-such-folder\n"
