"""Compaction through real turns of the builtin agent on a scripted model: a session that
crosses its token budget is summarised by one model call, written as a `compaction`
anchor with the summary as its handoff state, and the next request starts from the
summary; between compactions each request extends the one before; an overflow error
compacts and retries once; a plugin can answer the summary call or turn compaction off."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from builtin_support import build_builtin, model_of

from hookline.builtins.agent import COMPACT_EVENT
from hookline.builtins.agent.compaction import COMPACTION_PROMPT, OPENING_NOTE
from hookline.builtins.tape import RESUMES, Tape, session_tape_name, starts_turn, transcript
from hookline.builtins.terminal.tool_notes import turn_note
from hookline.kernel import HooklineError, LLMCallDecision, LLMCallRequest, StepFinished, hookimpl

pytestmark = pytest.mark.anyio

SESSION = "long:chat"
WINDOW = 4000  # tokens: the system prompt and tool schemas take about 1,250 (5,000 characters)


def reply(letter: str, size: int = 6000) -> dict[str, Any]:
    """A reply of `size` characters (no usage reported: the estimate stays 4 characters a
    token, which is what these sizes are chosen for)."""
    return {"text": letter * size}


SUMMARY = {"text": "SUMMARY: the user sent three messages; replies were long letters."}


async def session(workspace: Path, turns: list[dict[str, Any]], messages: list[str],
                  *plugins: object, **settings: Any) -> tuple[Any, list[Any], list[Any]]:
    """Run `messages` as turns of one session: the scripted model, the tape's entries and
    the step statuses announced."""
    framework, builtin = build_builtin(workspace, turns, *plugins,
                                       **{"context_window": WINDOW, **settings})
    statuses: list[str] = []
    builtin.get_agent().bus.on(StepFinished, lambda event: statuses.append(event.status))
    async with framework.running():
        for text in messages:
            await framework.process_inbound({"content": text, "session_id": SESSION})
        tape = Tape(framework.get_tape_store(), session_tape_name(SESSION, workspace))
        entries = await tape.entries()
    return model_of(builtin), entries, statuses


def is_summary_call(call: Any) -> bool:
    """A summary call: the prompt as its system message (the conversation as a text), or
    at the start of its last message (the conversation's own request repeated)."""
    return bool(call.messages) and (call.messages[0].content == COMPACTION_PROMPT or str(
        call.messages[-1].content).startswith(COMPACTION_PROMPT))


def size(call: Any) -> int:
    return sum(len(str(message.content)) for message in call.messages)


async def test_a_session_past_its_budget_is_compacted_and_goes_on_from_the_summary(
        workspace: Path) -> None:
    model, entries, statuses = await session(
        workspace, [reply("a"), reply("b"), SUMMARY, reply("c")],
        ["first", "second", "third"])
    calls = model.calls
    assert [is_summary_call(call) for call in calls] == [False, False, True, False]
    summary_call, after = calls[2], calls[3]
    text = str(summary_call.messages[1].content)
    assert "user: first" in text and "assistant: aaaa" in text and "user: third" in text
    assert not summary_call.tools, "past the budget: sent as a text, without tools"
    # The request after it starts from the summary, then the message that was waiting.
    assert size(after) < size(calls[1]) - 5000
    contents = [str(message.content) for message in after.messages]
    assert any("SUMMARY: the user sent three messages" in text for text in contents)
    # It opens with a user message (Anthropic refuses an assistant's first), then the note.
    assert [m.role for m in after.messages[:3]] == ["system", "user", "assistant"]
    assert contents[1] == OPENING_NOTE and "SUMMARY" in contents[2]
    assert contents[-1] == "third" and not any("aaaa" in text for text in contents)
    # On the tape: everything kept, a compaction anchor with the summary as its state.
    anchors = [entry for entry in entries if entry.kind == "anchor"]
    assert [anchor.payload["name"] for anchor in anchors] == ["session/start", "compaction"]
    state = anchors[1].payload["state"]
    assert state["summary"].startswith("SUMMARY:") and state["reason"] == "budget"
    assert state["tokens"] > WINDOW * 0.8
    assert any(entry.kind == "message" and "aaaa" in str(entry.payload.get("content"))
               for entry in entries), "nothing before the anchor is lost"
    assert "auto_handoff" in statuses


async def test_more_messages_than_the_window_keeps_is_its_own_reason(workspace: Path) -> None:
    """Short turns, far within the budget: past the 100 messages the context keeps, the
    compaction says that is why, not that the budget was passed."""
    turns = [{"text": "ok"}] * 50 + [SUMMARY, {"text": "after"}]
    model, entries, _statuses = await session(workspace, turns,
                                              [f"message {n}" for n in range(51)])
    assert [is_summary_call(call) for call in model.calls].index(True) == 50
    anchors = [entry for entry in entries if entry.kind == "anchor"]
    assert anchors[-1].payload["name"] == "compaction"
    assert anchors[-1].payload["state"]["reason"] == "messages"
    assert anchors[-1].payload["state"]["tokens"] < WINDOW * 0.8
    note = turn_note("compaction", {"reason": "messages", "tokens_before": 900})
    assert note is not None and note.startswith(
        "[context] compacted (more messages than the context window keeps; about 900 tokens)")


async def test_between_compactions_each_request_extends_the_previous_one(
        workspace: Path) -> None:
    turns = [reply(letter, 300) for letter in "abcdef"]
    model, _entries, _statuses = await session(
        workspace, turns, ["one", "two", "three", "four", "five", "six"])
    calls = model.calls
    assert not any(is_summary_call(call) for call in calls)
    for before, after in itertools.pairwise(calls):
        assert after.messages[:len(before.messages)] == before.messages, "a prefix changed"
        assert after.tools == before.tools


async def compact_between(workspace: Path, turns: list[dict[str, Any]]
                          ) -> tuple[list[Any], list[Any]]:
    """Two turns, `/compact` with instructions, one more turn, in a window four times as
    large: the scripted model's calls and the tape's entries."""
    framework, builtin = build_builtin(workspace, turns, context_window=WINDOW * 4)
    async with framework.running():
        for text in ("one", "two"):
            await framework.process_inbound({"content": text, "session_id": SESSION})
        assert await builtin.compact_session(SESSION, "the letters") is not None
        await framework.process_inbound({"content": "three", "session_id": SESSION})
        tape = Tape(framework.get_tape_store(), session_tape_name(SESSION, workspace))
        entries = await tape.entries()
    return model_of(builtin).calls, entries


async def test_a_summary_call_repeats_the_request_when_it_fits(workspace: Path) -> None:
    """Within the budget, the summary call repeats the last request (a provider's prompt
    cache serves it), then the reply, then the prompt; it offers the same tools but may
    call none. An answer without text falls back to the conversation as a text."""
    calls, entries = await compact_between(workspace, [reply("a"), reply("b"), SUMMARY,
                                                       reply("c")])
    assert [is_summary_call(call) for call in calls] == [False, False, True, False]
    previous, summary_call = calls[1], calls[2]
    count = len(previous.messages)
    assert summary_call.messages[:count] == previous.messages, "the prefix is repeated"
    assert str(summary_call.messages[count].content) == "b" * 6000
    assert str(summary_call.messages[-1].content).startswith(COMPACTION_PROMPT)
    assert "focus on: the letters" in str(summary_call.messages[-1].content)
    assert summary_call.tools == previous.tools and summary_call.tools
    (anchor,) = [e for e in entries if e.kind == "anchor" and e.payload["name"] == "compaction"]
    assert anchor.payload["state"]["summary"].startswith("SUMMARY:")

    no_text = {"tool_calls": [{"name": "fs_read", "arguments": {"path": "x"}}]}
    calls, entries = await compact_between(
        workspace.parent, [reply("a"), reply("b"), no_text, SUMMARY, reply("c")])
    assert is_summary_call(calls[2]) and calls[2].tools, "repeated first"
    assert calls[3].messages[0].content == COMPACTION_PROMPT and not calls[3].tools
    assert "user: one" in str(calls[3].messages[1].content)
    (anchor,) = [e for e in entries if e.kind == "anchor" and e.payload["name"] == "compaction"]
    assert anchor.payload["state"]["summary"].startswith("SUMMARY:")
    assert not any(e.kind == "tool_result" for e in entries), "no tool ran"


async def test_a_compaction_asked_for_records_what_its_summary_calls_used(
        workspace: Path) -> None:
    """No turn's `run` event holds a `/compact`'s summary calls: a `compact` event does,
    also when the compaction fails (here: no summary, repeated nor as a text)."""
    used = {"input_tokens": 70, "output_tokens": 0}
    empty = {"text": "", "usage": used}
    framework, builtin = build_builtin(workspace, [reply("a"), reply("b"), empty, empty],
                                       context_window=WINDOW * 4)
    async with framework.running():
        for text in ("one", "two"):
            await framework.process_inbound({"content": text, "session_id": SESSION})
        with pytest.raises(HooklineError, match="returned an empty summary"):
            await builtin.compact_session(SESSION)
        tape = Tape(framework.get_tape_store(), session_tape_name(SESSION, workspace))
        entries = await tape.entries()
    (event,) = [e.payload["data"] for e in entries
                if e.kind == "event" and e.payload["name"] == COMPACT_EVENT]
    (row,) = event["usage_by_model"].values()
    assert (row["input_tokens"], row["calls"]) == (140, 2)
    assert not any(e.kind == "anchor" and e.payload["name"] == "compaction" for e in entries)


async def test_an_overflow_error_compacts_once_and_retries(workspace: Path) -> None:
    overflow = {"error": {"kind": "provider", "message": (
        "openai-compatible:m: the provider rejected the request (HTTP 400: This model's "
        "maximum context length is 5000 tokens. However, you requested 9000 tokens)")}}
    model, entries, statuses = await session(
        workspace, [reply("a", 200), overflow, SUMMARY, reply("b", 10), reply("c", 10)],
        ["first", "second", "third"], context_budget=1.0)
    assert [is_summary_call(call) for call in model.calls] == [False, False, True, False, False]
    assert model.calls[2].messages[0].content == COMPACTION_PROMPT, "refused: not repeated"
    assert str(model.calls[3].messages[-1].content) == "second", "asked again, after it"
    # The next turn's context holds the message the reply after the compaction answers.
    assert [(m.role, str(m.content)) for m in model.calls[4].messages[-3:]] == [
        ("user", "second"), ("assistant", "b" * 10), ("user", "third")]
    turns = [e.payload["content"] for e in entries if starts_turn(e)]
    assert turns == ["first", "second", "third"], "each message starts one turn"
    again = [e for e in entries if e.meta.get(RESUMES)]
    assert [e.payload["content"] for e in again] == ["second"]
    assert again[0].id > next(e.id for e in entries if e.kind == "anchor"
                              and e.payload["name"] == "compaction")
    shown = [line for entry in entries for line in transcript([entry])]
    assert shown.count("you: second") == 1, "the transcript shows it once"
    (anchor,) = [e for e in entries if e.kind == "anchor" and e.payload["name"] == "compaction"]
    assert anchor.payload["state"]["reason"] == "overflow"
    assert statuses.count("auto_handoff") == 1


async def test_a_second_overflow_is_an_error_that_says_what_was_tried(workspace: Path) -> None:
    overflow = {"error": {"kind": "provider", "message": "HTTP 400: prompt is too long"}}
    _model, entries, statuses = await session(
        workspace, [{"text": "earlier"}, overflow, SUMMARY, overflow], ["before", "hi"])
    *_, run = [e.payload["data"] for e in entries
               if e.kind == "event" and e.payload["name"] == "run"]
    assert run["status"] == "error"
    assert "even after the context was compacted" in run["error"]
    assert "context_window" in run["error"] and "prompt is too long" in run["error"]
    assert run["error"].count("Set context_window") == 1, "the fix once"
    assert "the system prompt and the tools alone" not in run["error"].lower()
    assert statuses[-2:] == ["auto_handoff", "error"]


async def test_an_overflow_with_nothing_before_the_message_is_not_compacted(
        workspace: Path) -> None:
    """The message waiting comes back after a summary: with no context before it there is
    nothing to summarise, so no call is paid for one."""
    overflow = {"error": {"kind": "provider", "message": "HTTP 400: prompt is too long"}}
    model, entries, statuses = await session(workspace, [overflow, SUMMARY], ["hi"])
    (run,) = [e.payload["data"] for e in entries
              if e.kind == "event" and e.payload["name"] == "run"]
    assert len(model.calls) == 1 and statuses == ["error"]
    assert run["error"].startswith("[provider] the model refused the request as too long "
                                   "(HTTP 400: prompt is too long).")


async def test_a_request_whose_system_prompt_and_tools_pass_the_budget_says_so(
        workspace: Path) -> None:
    """No compaction can make room that the fixed part of every request takes."""
    overflow = {"error": {"kind": "provider", "message": "HTTP 400: prompt is too long"}}
    model, entries, _statuses = await session(
        workspace, [{"text": "earlier"}, overflow, SUMMARY, overflow], ["before", "hi"],
        context_window=200)
    *_, run = [e.payload["data"] for e in entries
               if e.kind == "event" and e.payload["name"] == "run"]
    assert not any(is_summary_call(call) for call in model.calls), "no summary makes room"
    assert "The system prompt and the tools alone are about " in run["error"]
    assert "more than the 160 a request may use (0.8 of a 200-token window)" in run["error"]


async def test_no_compaction_is_tried_where_the_system_prompt_and_tools_fill_the_budget(
        workspace: Path) -> None:
    """The window is too small for the fixed part of every request: summarising the
    conversation at every turn would lose it and cost a call each time, for nothing."""
    model, entries, statuses = await session(
        workspace, [{"text": "one"}, {"text": "two"}, {"text": "three"}],
        ["first", "second", "third"], context_window=1000)
    assert not any(is_summary_call(call) for call in model.calls)
    assert len(model.calls) == 3 and "auto_handoff" not in statuses
    assert [e.payload["name"] for e in entries if e.kind == "anchor"] == ["session/start"]


class OwnSummary:
    """A plugin that writes the summary itself, without a model call."""

    @hookimpl
    def before_llm_call(self, request: LLMCallRequest, state: dict[str, Any]
                        ) -> LLMCallDecision | None:
        if state.get("compaction"):
            return LLMCallDecision.finish("OWN SUMMARY")
        return None


class NoCompaction:
    @hookimpl
    def load_state(self) -> dict[str, Any]:
        return {"compaction": False}


async def test_a_plugin_may_answer_the_summary_call_or_turn_compaction_off(
        workspace: Path) -> None:
    model, entries, _statuses = await session(
        workspace, [reply("a"), reply("b"), reply("c")], ["first", "second", "third"],
        OwnSummary())
    assert not any(is_summary_call(call) for call in model.calls)
    (anchor,) = [e for e in entries if e.kind == "anchor" and e.payload["name"] == "compaction"]
    assert anchor.payload["state"]["summary"] == "OWN SUMMARY"

    model, entries, _statuses = await session(
        workspace.parent, [reply("a"), reply("b"), reply("c")], ["first", "second", "third"],
        NoCompaction())
    assert not any(e.kind == "anchor" and e.payload["name"] == "compaction" for e in entries)


class SlowSummary:
    """A summary call that takes its time: the turn is cancelled while it runs."""

    def __init__(self) -> None:
        import anyio

        self.summarising = anyio.Event()

    @hookimpl
    async def before_llm_call(self, request: LLMCallRequest, state: dict[str, Any]
                              ) -> LLMCallDecision | None:
        import anyio

        if state.get("compaction"):
            self.summarising.set()
            await anyio.sleep(60)
        return None


async def test_a_message_whose_compaction_is_cancelled_stays_on_the_tape(
        workspace: Path) -> None:
    """Ctrl-C while the context is summarised: the message that was waiting is recorded,
    then the turn's cancellation, as when a model call or a tool is cancelled."""
    import anyio

    slow = SlowSummary()
    framework, _builtin = build_builtin(workspace, [reply("a"), reply("b"), SUMMARY], slow,
                                        context_window=WINDOW)
    async with framework.running():
        for text in ("first", "second"):
            await framework.process_inbound({"content": text, "session_id": SESSION})
        async with anyio.create_task_group() as group:
            group.start_soon(framework.process_inbound,
                             {"content": "third, note 4711", "session_id": SESSION})
            await slow.summarising.wait()
            group.cancel_scope.cancel()
        tape = Tape(framework.get_tape_store(), session_tape_name(SESSION, workspace))
        entries = await tape.entries()
    said = [entry.payload.get("content") for entry in entries if entry.kind == "message"
            and entry.payload.get("role") == "user"]
    assert said == ["first", "second", "third, note 4711"]
    (last_run,) = [e.payload["data"] for e in entries
                   if e.kind == "event" and e.payload["name"] == "run"][-1:]
    assert last_run["status"] == "cancelled"


async def test_a_summary_is_kept_to_what_makes_room_in_a_small_window(
        workspace: Path) -> None:
    """A summary asked for in half of what the budget leaves beside the system prompt and
    the tools, and cut there when the model writes more (one that ignores `max_tokens`):
    the next requests fit, and the session is not compacted at every turn."""
    huge = {"text": "summary " * 5000}
    model, entries, statuses = await session(
        workspace, [{"text": "a" * 6000}, huge, {"text": "b"}, {"text": "c"}],
        ["one", "two", "three"])
    (summary_call,) = [call for call in model.calls if is_summary_call(call)]
    assert 200 <= summary_call.max_tokens < 1000, summary_call.max_tokens
    (anchor,) = [e for e in entries if e.kind == "anchor" and e.payload["name"] == "compaction"]
    assert len(anchor.payload["state"]["summary"]) < 4000
    assert statuses.count("auto_handoff") == 1
    assert [e.payload["data"]["status"] for e in entries
            if e.kind == "event" and e.payload["name"] == "run"] == ["ok"] * 3


async def test_a_summary_call_answered_with_a_tool_call_says_so(workspace: Path) -> None:
    called = {"tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}]}
    framework, builtin = build_builtin(workspace, [reply("a"), reply("b"), called, called],
                                       context_window=WINDOW * 4)
    async with framework.running():
        for text in ("one", "two"):
            await framework.process_inbound({"content": text, "session_id": SESSION})
        with pytest.raises(HooklineError, match="called a tool instead of writing a summary"):
            await builtin.compact_session(SESSION)
