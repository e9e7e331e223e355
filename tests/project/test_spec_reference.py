"""The suite's record of the reference: docs/differences.md, bub_expected.toml and the
parts of spec/run_on_bub.py that need no Bub (the driver itself runs in CI on Bub)."""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path

import pytest
import spec_support

from hookline.spec import run_on_bub, runner

DIFFERENCE = "reference.difference."
DOCS_PAGE = spec_support.ROOT / "docs" / "differences.md"


def _difference_fixtures() -> set[str]:
    return {
        path.relative_to(runner.FIXTURE_DIR).as_posix()
        for path in runner.fixture_paths()
        if any(rule.startswith(DIFFERENCE) for rule in runner.fixture_rules(path))
    }


def test_every_reference_difference_is_on_the_differences_page() -> None:
    """spec/DIFFERENCES.md and docs/differences.md list the same rules (the former is
    checked against rules.toml by test_spec_suite.py)."""
    page = DOCS_PAGE.read_text(encoding="utf-8")
    rules = sorted(rule for rule in runner.load_rules() if rule.startswith(DIFFERENCE))
    missing = [rule for rule in rules if f"`{rule}`" not in page]
    assert not missing, f"docs/differences.md does not list: {missing}"


def test_bub_expected_has_one_entry_per_difference_fixture() -> None:
    entries = tomllib.loads(run_on_bub.EXPECTED_FILE.read_text(encoding="utf-8"))["fixtures"]
    assert set(entries) == _difference_fixtures()
    for name, entry in entries.items():
        fragments = entry["fails_with"]
        assert isinstance(fragments, list) and fragments, name
        assert all(isinstance(f, str) and f for f in fragments), name
        assert entry["why"], name


def test_steps_bub_cannot_run_become_empty_checks(tmp_path: Path) -> None:
    """Every fixture with get_tools steps: the copy has the same plugins and the same steps,
    each get_tools step replaced by an empty check (so step numbers stay); a fixture of
    get_tools steps only is not applicable at all."""
    missing = {"get_tools": "no provide_tools"}
    seen = 0
    for path in runner.fixture_paths():
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        steps = data.get("steps", [])
        if not any(step["action"] == "get_tools" for step in steps):
            continue
        seen += 1
        copy, notes = run_on_bub._applicable_copy(path, data, missing, tmp_path)
        assert notes and all("no provide_tools" in note for note in notes)
        if all(step["action"] in ("get_tools", "register", "unregister")
               for step in steps):
            assert copy is None, path.name
            continue
        assert copy is not None, path.name
        copied = tomllib.loads(copy.read_text(encoding="utf-8"))
        want = [{"action": "check"} if step["action"] == "get_tools" else step
                for step in steps]
        assert copied["steps"] == want, path.name
        assert {k: v for k, v in copied.items() if k != "steps"} == {
            k: v for k, v in data.items() if k != "steps"}, path.name
    assert seen >= 4


def test_unawaited_coroutine_warnings_are_counted_not_recorded() -> None:
    shim = run_on_bub._UnawaitedWarnings()
    with shim.catch_warnings(record=True) as records:
        shim.simplefilter("always")
        warnings.warn("coroutine 'f' was never awaited", RuntimeWarning, stacklevel=1)
        warnings.warn("something else", UserWarning, stacklevel=1)
    assert [str(w.message) for w in records] == ["something else"]
    assert shim.seen == ["coroutine 'f' was never awaited"]


WANT = {"fails_with": ["step 2 (register both):", "nothing was raised"], "why": "accepted"}


@pytest.mark.parametrize(("differences", "failure", "want", "kind"), [
    ([], None, None, "passed"),
    ([], "x.toml step 1: calls differ", None, "unexpected"),
    ([f"{DIFFERENCE}a"], None, WANT, "unexpected"),
    ([f"{DIFFERENCE}a"], "step 2 (register both): expected X, nothing was raised", None,
     "unexpected"),
    ([f"{DIFFERENCE}a"], "step 2 (register both): expected X, nothing was raised", WANT,
     "documented"),
    ([f"{DIFFERENCE}a"], "step 3 (register other): expected X, nothing was raised", WANT,
     "unexpected"),
])
def test_classification(differences: list[str], failure: str | None, want: dict | None,
                        kind: str) -> None:
    assert run_on_bub._judge("f.toml", differences, failure, want, []).kind == kind


def test_a_documented_failure_is_on_a_check_of_the_difference() -> None:
    """The failure bub_expected.toml gives, but on a check of a rule the reference is meant
    to pass (the fixture's attribution is wrong, or Bub fails something else first)."""
    failure = "step 2 (register both): expected X, nothing was raised"
    judged = run_on_bub._judge("f.toml", [f"{DIFFERENCE}a"], failure, WANT, [],
                               "registration.tryfirst-trylast-rejected")
    assert judged.kind == "unexpected" and "registration.tryfirst-trylast-rejected" in judged.detail
    assert run_on_bub._judge("f.toml", [f"{DIFFERENCE}a"], failure, WANT, [],
                             f"{DIFFERENCE}a").kind == "documented"


def test_the_bub_plugin_checks_refuse_a_jobs_count_below_one(
        capsys: pytest.CaptureFixture[str]) -> None:
    from hookline.spec import run_bub_plugins

    with pytest.raises(SystemExit) as stopped:
        run_bub_plugins.main(["--jobs", "0"])
    assert stopped.value.code == 2
    assert "--jobs must be 1 or more" in capsys.readouterr().err
