"""Runs every conformance fixture on asyncio and trio, and checks the rule index."""

from __future__ import annotations

from pathlib import Path

import pytest
import runner
import spec_support  # noqa: F401  (puts spec/ on sys.path)
from hookline_adapter import HooklineAdapter

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
