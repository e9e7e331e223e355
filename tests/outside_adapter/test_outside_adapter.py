"""Another kernel's maintainer adopts the conformance suite from its documentation alone.

tests/outside_adapter/pluggy_adapter.py is an adapter for plain pluggy 1.7 written from
docs/conformance-adapters.md, importing only pluggy and the standard library. This test
builds the suite's own distribution (hookline-conformance) from a copy of spec/, installs
it with pluggy 1.7 in a virtual environment where hookline cannot be imported, and runs
the suite there with the adapter and its expected-failures file, on asyncio and on trio.
Every expected failure must be a fixture of a `reference.difference.*` rule."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ADAPTER = HERE / "pluggy_adapter.py"
EXPECTED = HERE / "pluggy_expected.toml"
SUMMARY = re.compile(
    r"^(\d+) passed, (\d+) failed, (\d+) skipped, (\d+) failed as expected"
    r" \(suite [^,]+, adapter pluggy-outside, (\w+)\)$",
    re.MULTILINE,
)
XFAIL = re.compile(r"^XFAIL (\S+) \[", re.MULTILINE)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run(*args: object, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=_env(), capture_output=True, text=True,
        timeout=240,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"{args} exited {result.returncode}:\n{result.stdout}\n"
                             f"{result.stderr}")
    return result


@dataclass
class Suite:
    folder: Path
    python: Path
    runner: Path
    fixtures: Path
    trio: str  # "" when trio is installed, else why not


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    folder = tmp_path_factory.mktemp("outside")
    source = folder / "spec"
    shutil.copytree(ROOT / "spec", source,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    bindir = folder / "venv" / ("Scripts" if os.name == "nt" else "bin")
    _run(sys.executable, "-m", "venv", folder / "venv", cwd=folder)
    python = bindir / "python"
    _run(python, "-m", "pip", "wheel", "-q", "--no-deps", source, "-w", folder / "wheels",
         cwd=folder)
    (wheel,) = (folder / "wheels").glob("hookline_conformance-*.whl")
    _run(python, "-m", "pip", "install", "-q", "--no-deps", wheel, "pluggy>=1.7,<1.8",
         cwd=folder)
    extra = _run(python, "-m", "pip", "install", "-q", f"{wheel}[trio]", cwd=folder,
                 check=False)
    trio = "" if extra.returncode == 0 else f"trio could not be installed: {extra.stderr}"
    # Nothing of hookline: only the suite's distribution, pluggy (and trio's extra).
    probe = _run(python, "-c", "import hookline", cwd=folder, check=False)
    assert probe.returncode != 0 and "No module named 'hookline'" in probe.stderr
    listed = _run(python, "-m", "pip", "list", "--format=json", cwd=folder).stdout
    names = {p["name"].lower().replace("_", "-") for p in json.loads(listed)}
    assert not any(name.startswith("hookline") and name != "hookline-conformance"
                   for name in names), names
    location = _run(python, "-c", "import hookline_conformance as s; print(s.__file__)",
                    cwd=folder).stdout.strip()
    return Suite(folder, python, bindir / "hookline-conformance",
                 Path(location).parent / "fixtures", trio)


def _check_run(suite: Suite, backend: str) -> None:
    out = suite.folder / backend
    out.mkdir()
    junit, report = out / "suite.xml", out / "suite.json"
    result = _run(suite.runner, "--adapter", f"{ADAPTER}:make", "--expected", EXPECTED,
                  "--backend", backend, "--junit-xml", junit, "--json", report,
                  cwd=out, check=False)
    text = result.stdout + result.stderr
    assert result.returncode == 0, text

    fixtures = {
        path.relative_to(suite.fixtures).as_posix(): tomllib.loads(path.read_text())
        for path in suite.fixtures.glob("*/*.toml")
    }
    dispatch = {name for name, data in fixtures.items() if not data.get("framework")}
    expected = set(tomllib.loads(EXPECTED.read_text())["fixtures"])
    for name in expected:
        rules = fixtures[name]["rules"]
        assert any(rule.startswith("reference.difference.") for rule in rules), (name, rules)
    assert expected <= dispatch

    (summary,) = SUMMARY.findall(text)
    passed, failed, skipped, xfailed = map(int, summary[:4])
    assert summary[4] == backend
    assert failed == 0, text
    assert set(XFAIL.findall(text)) == expected, text
    assert xfailed == len(expected)
    assert passed == len(dispatch) - len(expected), text
    assert skipped == len(fixtures) - len(dispatch)

    data = json.loads(report.read_text())
    assert data["backend"] == backend and data["adapter"] == "pluggy-outside"
    assert data["counts"] == {"pass": passed, "fail": 0, "skip": skipped, "xfail": xfailed,
                              "timeout": 0, "error": 0}
    outcomes = {entry["fixture"]: entry["outcome"] for entry in data["fixtures"]}
    assert len(outcomes) == len(fixtures)
    assert {name for name, o in outcomes.items() if o == "xfail"} == expected
    assert {name for name, o in outcomes.items() if o == "pass"} == dispatch - expected

    tree = ET.parse(junit).getroot()
    assert tree.tag == "testsuite"
    assert int(tree.get("tests")) == len(fixtures)
    assert int(tree.get("failures")) == 0 and int(tree.get("errors")) == 0
    assert int(tree.get("skipped")) == skipped + xfailed
    xfails = {case.get("name") for case in tree.iter("testcase")
              if any(s.get("type") == "xfail" for s in case.iter("skipped"))}
    assert xfails == expected


def test_plain_pluggy_on_asyncio(suite: Suite) -> None:
    _check_run(suite, "asyncio")


def test_plain_pluggy_on_trio(suite: Suite) -> None:
    if suite.trio:
        pytest.skip(suite.trio)
    _check_run(suite, "trio")
