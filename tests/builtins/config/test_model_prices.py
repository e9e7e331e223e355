"""The `model_prices` setting and the cost it gives: parsed from the file and the
environment (bad values fail naming the key and the fix), and the cost of token counts
at those prices, next to what a provider reports itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookline.builtins.agent import add_usage
from hookline.builtins.config import ModelPrice, SettingsError, load_settings
from hookline.builtins.terminal import UsageTotals

SPEC = "openai:gpt-4o-mini"


def test_prices_come_from_the_file_and_the_environment(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        f'[model_prices."{SPEC}"]\ninput = 0.15\noutput = 0.6\ncached_input = 0.075\n'
        '[model_prices."anthropic:claude"]\ninput = 3\noutput = 15\ncached_input = 0.3\n'
        'cache_write_input = 3.75\n')
    settings = load_settings({}, home=tmp_path)
    assert settings.model_prices == {SPEC: ModelPrice(0.15, 0.6, 0.075, 0.15),
                                     "anthropic:claude": ModelPrice(3.0, 15.0, 0.3, 3.75)}
    env = {"HOOKLINE_MODEL_PRICES": f"{SPEC}=1/2, ollama:llama3=0/0/0, anthropic:c=3/15/0.3/3.75"}
    assert load_settings(env, home=tmp_path).model_prices == {
        SPEC: ModelPrice(1.0, 2.0, 1.0, 1.0), "ollama:llama3": ModelPrice(0.0, 0.0, 0.0, 0.0),
        "anthropic:c": ModelPrice(3.0, 15.0, 0.3, 3.75)}
    assert load_settings({}, home=tmp_path / "none").model_prices == {}


@pytest.mark.parametrize("row", ["input = -1\noutput = 1", "input = 1", "input = 1\noutput = 2\n"
                                 "currency = 'EUR'", "input = 'cheap'\noutput = 1",
                                 "input = true\noutput = 1"])
def test_a_bad_price_names_the_setting_and_the_fix(tmp_path: Path, row: str) -> None:
    (tmp_path / "config.toml").write_text(f'[model_prices."{SPEC}"]\n{row}\n')
    with pytest.raises(SettingsError) as caught:
        load_settings({}, home=tmp_path)
    message = str(caught.value)
    assert "model_prices" in message and "per million tokens" in message, message


@pytest.mark.parametrize("value", [f"{SPEC}=1", f"{SPEC}=1/2/3/4/5", "nospec=1/2", f"{SPEC}=a/b"])
def test_a_bad_price_in_the_environment_fails(tmp_path: Path, value: str) -> None:
    with pytest.raises(SettingsError, match="HOOKLINE_MODEL_PRICES"):
        load_settings({"HOOKLINE_MODEL_PRICES": value}, home=tmp_path)


def test_the_cost_of_a_turn_at_the_configured_prices() -> None:
    totals = UsageTotals({SPEC: ModelPrice(2.0, 10.0, 1.0, 2.0)})
    totals.add({"input_tokens": 1_000_000, "output_tokens": 200_000,
                "cached_tokens": 400_000}, SPEC)
    totals.add({"prompt_tokens": 500_000, "completion_tokens": 100_000}, SPEC)
    # 600k uncached x 2 + 400k cached x 1 + 200k out x 10, then 500k x 2 + 100k x 10
    assert totals.priced == pytest.approx(5.6)
    assert totals.line().endswith("over 2 model calls; cost 5.6 (from model_prices)")
    totals.add({"input_tokens": 10, "output_tokens": 1, "cost": 0.25}, SPEC)
    totals.add({"input_tokens": 10, "output_tokens": 1}, "other:model")
    assert totals.line().endswith(
        "cost 5.85 (0.25 as reported, 5.6 from model_prices) "
        "(no price in model_prices for other:model)")


def test_without_prices_only_a_reported_cost_is_shown() -> None:
    totals = UsageTotals()
    totals.add({"input_tokens": 10, "output_tokens": 1}, SPEC)
    assert totals.line().endswith("; cost not reported")
    totals.add({"input_tokens": 10, "output_tokens": 1, "cost": 0.5}, SPEC)
    assert totals.line().endswith("; cost 0.5 (as reported)")


def test_a_session_sums_the_run_events_by_model() -> None:
    by_model: dict[str, dict[str, object]] = {}
    add_usage(by_model, SPEC, {"input_tokens": 100, "output_tokens": 10, "cached_tokens": 50})
    add_usage(by_model, SPEC, {"input_tokens": 200, "output_tokens": 20})
    assert by_model == {SPEC: {"input_tokens": 300, "output_tokens": 30, "cached_tokens": 50,
                               "calls": 2}}
    session = UsageTotals({SPEC: ModelPrice(1.0, 1.0, 0.0, 1.0)})
    session.add_run({"usage_by_model": by_model, "model": SPEC})
    # a turn recorded before usage_by_model: the last call's usage only
    session.add_run({"usage": {"input_tokens": 1000, "output_tokens": 0}, "model": SPEC})
    assert (session.calls, session.tokens) == (3, {"in": 1300, "out": 30, "cached": 50})
    assert session.priced == pytest.approx((250 + 30 + 1000) / 1_000_000)


def test_tokens_written_to_the_cache_are_priced_apart_and_shown() -> None:
    """Anthropic bills an input token written to its prompt cache a quarter above the
    input price: its counts go into the turn's row (only where a provider reports them)
    and the cost, and the usage line says how many."""
    claude = "anthropic:claude"
    by_model: dict[str, dict[str, object]] = {}
    add_usage(by_model, claude, {"input_tokens": 10_000, "output_tokens": 100,
                                 "cached_tokens": 0, "cache_write_tokens": 9_000})
    add_usage(by_model, claude, {"input_tokens": 12_000, "output_tokens": 100,
                                 "cached_tokens": 9_000, "cache_write_tokens": 2_500})
    assert by_model[claude]["cache_write_tokens"] == 11_500
    session = UsageTotals({claude: ModelPrice(3.0, 15.0, 0.3, 3.75)})
    session.add_run({"usage_by_model": by_model, "model": claude})
    # 1,000 + 500 fresh x 3, 9,000 cached x 0.3, 11,500 written x 3.75, 200 out x 15
    assert session.priced == pytest.approx((4_500 + 2_700 + 43_125 + 3_000) / 1_000_000)
    assert session.line().startswith(
        "usage: 22,000 tokens in (9,000 cached, 11,500 written to the cache), 200 out")
    plain: dict[str, dict[str, object]] = {}
    add_usage(plain, SPEC, {"input_tokens": 10, "output_tokens": 1, "cache_write_tokens": 0})
    assert "cache_write_tokens" not in plain[SPEC]
