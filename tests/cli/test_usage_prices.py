"""`run --usage` and the chat's `/usage` with the `model_prices` setting: the cost of the
turn and of the whole session (every turn on its tape, also those of earlier processes),
through the console script on the scripted model."""

from __future__ import annotations

from pathlib import Path

from test_chat_piped import chat
from test_cli import hookline
from test_run_what_ran import BUGGY, fixing_script, workspace_and_env

TURN = "usage: 320 tokens in (100 cached), 13 out, over 2 model calls; "
"""The fixing script's counts: 120 in (100 cached) and 8 out, then 200 in and 5 out."""
COST = 20 * 2 + 100 * 1 + 8 * 10 + 200 * 2 + 5 * 10  # at 2 / 10 / 1 per million


def priced(tmp_path: Path) -> tuple[Path, dict[str, str], str]:
    workspace, env = workspace_and_env(tmp_path)
    spec = fixing_script(tmp_path)
    env["HOOKLINE_MODEL"] = spec
    home = Path(env["HOOKLINE_HOME"])
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[model_prices."{spec}"]\ninput = 2\noutput = 10\ncached_input = 1\n')
    return workspace, env, spec


def test_run_usage_prices_the_turn_and_the_session(tmp_path: Path) -> None:
    workspace, env, _ = priced(tmp_path)
    (workspace / "calc.py").write_text(BUGGY)
    first = hookline("run", "-q", "--usage", "--session", "p", "fix it", env=env, cwd=workspace)
    assert first.returncode == 0, first.stderr
    cost = f"cost {COST / 1e6:.6g} (from model_prices)"
    assert first.stderr.splitlines() == [
        TURN + cost, "session:" + TURN.removeprefix("usage:") + cost,
        "context: 200 of 128,000 tokens (0%)"]  # the last call's input
    (workspace / "calc.py").write_text(BUGGY)
    again = hookline("run", "-q", "--usage", "--session", "p", "fix it again", env=env,
                     cwd=workspace)
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines() == [
        TURN + cost,
        f"session: 640 tokens in (200 cached), 26 out, over 4 model calls; "
        f"cost {2 * COST / 1e6:.6g} (from model_prices)",
        "context: 200 of 128,000 tokens (0%)"]


def test_a_model_without_a_price_is_named(tmp_path: Path) -> None:
    workspace, env, _ = priced(tmp_path)
    env["HOOKLINE_MODEL"] = "offline"
    done = hookline("run", "-q", "--usage", "hello", env=env, cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0].endswith(
        "cost not reported (no price in model_prices for offline)"), done.stderr


def test_chat_usage_prices_this_chat_and_the_whole_session(tmp_path: Path) -> None:
    workspace, env, _ = priced(tmp_path)
    (workspace / "calc.py").write_text(BUGGY)
    hookline("run", "-q", "--session", "c", "fix it", env=env, cwd=workspace)  # earlier
    (workspace / "calc.py").write_text(BUGGY)
    out = chat(["fix it", "/usage"], env, workspace, "--session", "c")
    cost = f"cost {COST / 1e6:.6g} (from model_prices)"
    lines = [line for line in out.splitlines() if line.startswith(("usage:", "session:"))]
    assert lines == [
        f"{TURN}{cost} (session c, the turns of this chat)",
        f"session: 640 tokens in (200 cached), 26 out, over 4 model calls; "
        f"cost {2 * COST / 1e6:.6g} (from model_prices) (every turn and compaction on its tape)"]


def test_a_summary_call_does_not_say_how_full_the_context_is() -> None:
    """The meter shows the last request of the conversation: a summary call's input (the
    whole context, sent once more) is counted in the usage, not in the meter."""
    from hookline.builtins.terminal import UsageTotals
    from hookline.cli.output import TurnUsage
    from hookline.kernel.streaming import StreamEvent

    turn = TurnUsage(enabled=True)
    for tokens, summary in ((900, False), (5000, True)):
        turn.take(StreamEvent("usage", {"usage": {"input_tokens": tokens, "output_tokens": 1},
                                        "model": "m", "summary": summary}))
    assert turn.last_input == ("m", 900) and turn.totals().tokens["in"] == 5900
    totals = UsageTotals({})
    totals.add({"input_tokens": 900, "output_tokens": 1}, "m")
    totals.add({"input_tokens": 5000, "output_tokens": 1}, "m", summary=True)
    assert totals.last_input == ("m", 900)


def test_the_long_session_warning_needs_more_than_one_turn() -> None:
    """One turn since the last anchor (the first, or right after a compaction) that fills
    the request: the system prompt, the tools or the message do, which a new session or a
    compaction would not mend."""
    from hookline.cli.usage import long_session

    assert long_session("s", 1, ("m", 900), lambda model: 1000) is None
    said = long_session("s", 2, ("m", 900), lambda model: 1000)
    assert said is not None and "(2 turns in its context;" in said
