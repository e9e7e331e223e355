"""Runs every conformance fixture on asyncio and trio, and checks the rule index."""

from __future__ import annotations

import re
import textwrap
import tomllib
from pathlib import Path

import pytest

from hookline.spec import runner, suite
from hookline.spec.hookline_adapter import HooklineAdapter

FIXTURES = runner.fixture_paths()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(runner.FIXTURE_DIR)))
def test_fixture(path: Path, backend: str) -> None:
    runner.run_sync(path, HooklineAdapter(), backend)


def test_every_rule_has_a_fixture() -> None:
    rules = runner.load_rules()
    covered = {rule for path in FIXTURES for rule in runner.fixture_rules(path)}
    missing = sorted(set(rules) - covered)
    assert not missing, f"rules without a fixture: {missing}"


def test_every_fixture_names_known_rules() -> None:
    rules = runner.load_rules()
    for path in FIXTURES:
        named = runner.fixture_rules(path)
        assert named, f"{path.name} names no rule"
        unknown = sorted(set(named) - set(rules))
        assert not unknown, f"{path.name} names rules missing from rules.toml: {unknown}"


def _fixture(path: Path) -> tuple[list[str], list[dict]]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return list(data["rules"]), list(data.get("steps", []))


def test_every_check_is_filed_under_a_rule_of_its_fixture() -> None:
    """A failure names the rule of its check: every step of a fixture with several rules
    names one, and every rule a step or an expectation names is one of the fixture's
    and in rules.toml."""
    known = runner.load_rules()
    for path in FIXTURES:
        rules, steps = _fixture(path)
        for number, step in enumerate(steps, 1):
            where = f"{path.name} step {number}"
            assert len(rules) == 1 or step.get("rule"), f"{where} names no rule"
            for rule in runner.step_rules(step, rules):
                assert rule in rules, f"{where} names {rule}, not among the fixture's rules"
                assert rule in known, f"{where} names {rule}, missing from rules.toml"
            unknown = set(step.get("rules", {})) - runner.EXPECTATIONS
            assert not unknown, f"{where} files {sorted(unknown)}, which are not expectations"


def test_every_rule_of_a_fixture_is_checked_by_one_of_its_steps() -> None:
    for path in FIXTURES:
        rules, steps = _fixture(path)
        checked = set().union(*(runner.step_rules(step, rules) for step in steps))
        unchecked = sorted(set(rules) - checked)
        assert not unchecked, f"{path.name}: no step checks {unchecked}"


def test_a_failure_names_the_rule_of_the_check_that_failed() -> None:
    """A kernel whose call_many drops None results fails order-markers on the check of
    dispatch.many.all-values, not on the ordering rules the fixture is named after."""

    class DropsNone(HooklineAdapter):
        def new_kernel(self):  # type: ignore[override]
            kernel = super().new_kernel()
            real = kernel.dispatch

            def dispatch(call, hook, kwargs):
                result = real(call, hook, kwargs)
                if call == "call_many_sync":
                    return [value for value in result if value is not None]
                return result

            kernel.dispatch = dispatch  # type: ignore[method-assign]
            return kernel

    path = runner.FIXTURE_DIR / "dispatch" / "order-markers.toml"
    with pytest.raises(runner.FixtureFailure) as failed:
        runner.run_sync(path, DropsNone())
    assert failed.value.rule == "dispatch.many.all-values"
    assert str(failed.value).startswith(
        "order-markers.toml step 2 (call_many_sync resolve_session): result:")


def test_a_step_may_name_only_the_fixtures_rules(tmp_path: Path) -> None:
    path = tmp_path / "stray.toml"
    path.write_text(textwrap.dedent("""
        rules = ["dispatch.first.non-none", "dispatch.first.none"]
        [[plugins]]
        name = "only"
        impls = [{ hook = "resolve_session", params = "message", returns = "s" }]
        [[steps]]
        action = "call_first_sync"
        hook = "resolve_session"
        args = { message = "m" }
        rule = "dispatch.first.non-none"
        [steps.expect]
        result = "s"
        [steps.rules]
        result = "dispatch.many.all-values"
    """), encoding="utf-8")
    with pytest.raises(runner.FixtureFailure) as failed:
        runner.run_sync(path, HooklineAdapter())
    assert "'dispatch.many.all-values' is not one of the fixture's rules" in str(failed.value)
    assert failed.value.rule is None


SEED_SECTIONS = {
    "应用 Hooks", "轮次 Hooks", "应用资源与配置", "Agent 拦截 Hooks", "优先级与分发",
    "提示词内容", "运行时资源", "通过 PluginAgentHooks 拦截调用",
}


def test_every_rule_maps_to_a_seed_section() -> None:
    for rule_id, rule in runner.load_rules().items():
        assert rule.get("section") in SEED_SECTIONS, f"{rule_id}: unknown seed section"
        assert rule.get("text"), f"{rule_id} has no text"


def test_runner_reports_a_broken_kernel(tmp_path: Path) -> None:
    """The suite can fail: a kernel that runs implementations in registration order
    must not pass the ordering fixture."""

    class Backwards(HooklineAdapter):
        def new_kernel(self):  # type: ignore[override]
            kernel = super().new_kernel()
            real = kernel.dispatch

            def dispatch(call, hook, kwargs):
                impls = kernel.registry.hook_impls(hook)
                if call == "call_many_sync":
                    return [impl.call(kwargs) for impl in reversed(impls)]
                return real(call, hook, kwargs)

            kernel.dispatch = dispatch  # type: ignore[method-assign]
            return kernel

    path = runner.FIXTURE_DIR / "dispatch" / "order-markers.toml"
    with pytest.raises(runner.FixtureFailure, match="calls"):
        runner.run_sync(path, Backwards())


DIFFERENCES = runner.SPEC_DIR / "DIFFERENCES.md"


def test_every_reference_difference_is_documented() -> None:
    """Each ``reference.difference.*`` rule appears in DIFFERENCES.md, and every fixture
    that checks it is named there (and every fixture named there exists)."""
    text = DIFFERENCES.read_text(encoding="utf-8")
    differences = sorted(r for r in runner.load_rules() if r.startswith("reference.difference."))
    assert differences, "rules.toml lists no reference.difference.* rule"
    missing = [rule for rule in differences if f"`{rule}`" not in text]
    assert not missing, f"DIFFERENCES.md does not list: {missing}"
    for path in FIXTURES:
        named = [r for r in runner.fixture_rules(path) if r.startswith("reference.difference.")]
        relative = path.relative_to(runner.SPEC_DIR).as_posix()
        if named:
            assert f"`{relative}`" in text, f"DIFFERENCES.md does not name {relative}"
    for mentioned in re.findall(r"`(fixtures/[^`]+\.toml)`", text):
        assert (runner.SPEC_DIR / mentioned).is_file(), f"DIFFERENCES.md names {mentioned}"


def test_runner_reports_a_broken_framework() -> None:
    """A framework fixture can fail too: a framework whose get_tools lets the last
    provider win a name must not pass the de-duplication fixture."""

    class LastWins(HooklineAdapter):
        def new_framework(self):  # type: ignore[override]
            framework = super().new_framework()
            real = framework.get_tools
            framework.get_tools = lambda: list(reversed(real()))  # type: ignore[method-assign]
            return framework

    path = runner.FIXTURE_DIR / "resources" / "tools-dedupe.toml"
    runner.run_sync(path, HooklineAdapter())
    with pytest.raises(runner.FixtureFailure, match="result"):
        runner.run_sync(path, LastWins())


def test_framework_actions_need_a_framework_fixture(tmp_path: Path) -> None:
    path = tmp_path / "not-framework.toml"
    path.write_text('rules = ["x"]\nplugins = []\n[[steps]]\naction = "get_tools"\n')
    with pytest.raises(runner.FixtureFailure, match="framework = true"):
        runner.run_sync(path, HooklineAdapter())


def test_the_runner_plays_a_fixture_from_anywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fixture outside spec/ (an adapter author's own) is played and shown by its path."""
    fixture = tmp_path / "mine.toml"
    fixture.write_text(textwrap.dedent("""
        rules = ["dispatch.first.non-none"]
        description = "expects the wrong answer, so it fails"
        [[plugins]]
        name = "only"
        impls = [{ hook = "resolve_session", params = "message", returns = "s" }]
        [[steps]]
        action = "call_first_sync"
        hook = "resolve_session"
        args = { message = "m" }
        [steps.expect]
        result = "not s"
    """), encoding="utf-8")
    assert suite.main([str(fixture)]) == 1
    out = capsys.readouterr().out
    assert (f"FAIL {fixture} [dispatch.first.non-none]: mine.toml step 1 "
            "(call_first_sync resolve_session)") in out, out
