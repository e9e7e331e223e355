"""Where compaction cannot help, or fails, and what a later process knows: a message that
alone passes the model's window is refused before any call and kept out of the context; a
failed summary call keeps the turn's message, unanswered, and says what to do; what a run
learned of its model (tokens per character, the window an error stated) is recalled by
the next process from the tape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from builtin_support import build_builtin, model_of

from hookline.builtins.agent.compaction import RATIO_BOUNDS, ContextMeter
from hookline.builtins.tape import Tape, session_tape_name

pytestmark = pytest.mark.anyio

SESSION = "limits:chat"
WINDOW = 4000
MODEL_ERROR = {"error": {"kind": "provider", "message": (
    "openai-compatible:m: the provider rejected the request (HTTP 400: This model's "
    "maximum context length is 5000 tokens. However, you requested 9000 tokens)")}}


async def turns(workspace: Path, script: list[dict[str, Any]], messages: list[str],
                **settings: Any) -> tuple[Any, list[Any], Any]:
    """`messages` as turns of one session: the scripted model, the tape, the agent."""
    framework, builtin = build_builtin(workspace, script,
                                       **{"context_window": WINDOW, **settings})
    async with framework.running():
        for text in messages:
            await framework.process_inbound({"content": text, "session_id": SESSION})
        entries = await Tape(framework.get_tape_store(),
                             session_tape_name(SESSION, workspace)).entries()
    return model_of(builtin), entries, builtin.get_agent()


def run_events(entries: list[Any]) -> list[dict[str, Any]]:
    return [e.payload["data"] for e in entries
            if e.kind == "event" and e.payload["name"] == "run"]


async def test_a_message_that_alone_passes_the_window_is_refused_before_any_call(
        workspace: Path) -> None:
    model, entries, _agent = await turns(workspace, [{"text": "fine"}],
                                         ["x" * 20_000, "hi"])
    assert len(model.calls) == 1, "the long message was never sent, nor summarised"
    assert "x" * 100 not in str(model.calls[0].messages), "kept out of the next request"
    (kept,) = [e for e in entries if e.kind == "message" and "x" * 100 in str(e.payload)]
    assert kept.meta.get("context") is False, "on the tape, out of the context"
    first, second = run_events(entries)
    assert first["status"] == "error" and "the message is too long for" in first["error"]
    assert "4,000-token window" in first["error"] and "shorten it" in first["error"]
    assert second["status"] == "ok"


async def test_a_failed_summary_call_keeps_the_message_and_says_what_to_do(
        workspace: Path) -> None:
    failed = {"error": {"kind": "provider", "message": "m: the provider failed (HTTP 500)"}}
    _model, entries, _agent = await turns(
        workspace, [{"text": "a" * 6000}, {"text": "b" * 6000}, failed],
        ["first", "second", "third"])
    said = [e.payload["content"] for e in entries
            if e.kind == "message" and e.payload.get("role") == "user"]
    assert said == ["first", "second", "third"], "the message that waited is kept"
    assert not any(e.kind == "anchor" and e.payload["name"] == "compaction" for e in entries)
    error = run_events(entries)[-1]["error"]
    assert error.startswith("[provider] compacting the context failed: m: the provider failed")
    assert "kept in the session, unanswered" in error and "compaction = false" in error


async def test_what_a_run_learned_of_its_model_is_recalled_by_the_next_process(
        workspace: Path) -> None:
    measured = {"text": "b" * 10, "usage": {"input_tokens": 2400, "output_tokens": 3}}
    _model, entries, first = await turns(
        workspace, [{"text": "a" * 200}, MODEL_ERROR, {"text": "SUMMARY"}, measured],
        ["one", "two"], context_budget=1.0, context_window=None)
    (spec,) = first.meter.ratio
    assert first.meter.window(spec) == 5000
    kept = run_events(entries)[-1]["context"]
    assert kept == {"tokens_per_char": first.meter.ratio[spec], "stated_window": 5000}
    # A new process (a new framework on the same store), a reply that reports no usage.
    _model, _entries, second = await turns(workspace, [{"text": "c"}], ["three"],
                                           context_budget=1.0, context_window=None)
    assert second.meter.window(spec) == 5000
    assert second.meter.ratio[spec] == first.meter.ratio[spec]


def test_a_measured_ratio_may_be_one_of_chinese_text() -> None:
    """About one and a half tokens a character for CJK text: not cut to half a token."""
    meter = ContextMeter()
    meter.measured("m", 1000, {"input_tokens": 1300})
    assert meter.ratio["m"] == 1.3
    meter.measured("m", 1000, {"input_tokens": 9000})
    assert meter.ratio["m"] == RATIO_BOUNDS[1]
    meter.recall("other", {"tokens_per_char": 99, "stated_window": True})
    assert meter.ratio["other"] == RATIO_BOUNDS[1] and "other" not in meter.learned


@pytest.mark.parametrize(("said", "window"), [
    ("This model's maximum context length is 8,192 tokens. However, you requested 9000", 8192),
    ("prompt is too long: 208000 tokens > 200000 maximum", 200_000),
    ("Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 "
     "maximum context length", 32_768),
    ("The input token count (1234567) exceeds the maximum number of tokens allowed "
     "(1048576).", 1_048_576),
    ('{"message": "the request exceeds the available context size, try increasing it", '
     '"type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}', 4096),
    ("prompt too long; exceeded max context length by 100 tokens", 0),
    ("Input is too long for requested model.", 0),
], ids=["openai", "anthropic", "mistral", "gemini", "llama.cpp", "ollama", "bedrock"])
def test_an_overflow_error_is_told_with_the_window_it_states(said: str, window: int) -> None:
    """Each provider's words for a request too long are an overflow, and the window they
    state is read (not by how much the request passed it)."""
    from hookline.builtins.agent.compaction import overflow_limit
    from hookline.kernel.errors import ErrorKind, HooklineError

    error = HooklineError(ErrorKind.provider, f"openai-compatible:m: refused (HTTP 400: {said})")
    assert overflow_limit(error) == window
    assert overflow_limit(HooklineError(ErrorKind.provider, "HTTP 400: bad tool schema")) is None
