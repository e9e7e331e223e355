"""OpenTelemetry spans of real turns: the builtin plugin, a scripted model, real tools.

Each test installs `Telemetry` with the SDK's in-memory exporter on a framework, runs
turns inside `running()` (whose builtin lifespan attaches the model and tool spans to the
agent), and reads the finished spans back: names, attributes and parent links.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from builtin_support import build_builtin
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hookline.builtins.telemetry import active
from hookline.builtins.telemetry.setup import Telemetry
from hookline.kernel import Framework, ToolCall, ToolCallDecision, hookimpl

pytestmark = pytest.mark.anyio

WRITE = {"name": "fs.write", "id": "call-w1",
         "arguments": {"path": "notes.txt", "content": "hello there"}}


def install(framework: Framework, capture_content: bool = False
            ) -> tuple[Telemetry, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(capture_content=capture_content,
                          span_processors=[SimpleSpanProcessor(exporter)])
    telemetry.install(framework)
    return telemetry, exporter


def by_name(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def one(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = by_name(spans, name)
    assert len(found) == 1, f"{name}: {[s.name for s in spans]}"
    return found[0]


def parent_of(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> ReadableSpan | None:
    if span.parent is None:
        return None
    return next(s for s in spans if s.context.span_id == span.parent.span_id)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def run_turn(framework: Framework, text: str) -> Any:
    async with framework.running():
        return await framework.process_inbound(
            {"content": text, "channel": "cli", "chat_id": "default"}, stream_output=True)


async def test_a_turn_with_a_tool_call_is_one_tree_with_genai_attributes(
        tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    framework, _ = build_builtin(workspace, [
        {"text": "Writing.", "tool_calls": [WRITE],
         "usage": {"input_tokens": 30, "output_tokens": 12}},
        {"text": "Done.", "usage": {"input_tokens": 50, "output_tokens": 9}},
    ])
    telemetry, exporter = install(framework)
    try:
        result = await run_turn(framework, "please write")
    finally:
        telemetry.uninstall()
    assert (workspace / "notes.txt").read_text() == "hello there"
    spans = exporter.get_finished_spans()

    turn = one(spans, "hookline.turn")
    assert turn.parent is None
    assert attrs(turn)["hookline.session.id"] == result.session_id
    assert attrs(turn)["hookline.channel"] == "cli"
    assert attrs(turn)["hookline.turn.outcome"] == "ok"
    in_turn = [span for span in spans if span.context.trace_id == turn.context.trace_id]
    assert all(parent_of(span, spans) is not None for span in in_turn if span is not turn)

    # Hook dispatches are children of the turn, with kind, implementations and answer.
    prompt = one(spans, "hookline.hook build_prompt")
    assert parent_of(prompt, spans) is turn
    assert attrs(prompt)["hookline.hook.kind"] == "first_each"  # the answer and its plugin
    assert list(attrs(prompt)["hookline.hook.implementations"]) == ["builtin"]
    assert attrs(prompt)["hookline.hook.answered_by"] == "builtin"
    for hook in ("load_state", "render_outbound", "dispatch_outbound"):
        assert parent_of(one(spans, f"hookline.hook {hook}"), spans) is turn, hook

    # Two model calls, GenAI attributes, under the turn (the model runs in its stream).
    chats = [span for span in spans if span.name.startswith("chat ")]
    assert len(chats) == 2
    first, second = sorted(chats, key=lambda span: span.start_time or 0)
    for chat in chats:
        assert parent_of(chat, spans) is turn
        assert attrs(chat)["gen_ai.operation.name"] == "chat"
        assert attrs(chat)["gen_ai.provider.name"] == "scripted"
        assert attrs(chat)["gen_ai.request.model"] == chat.name.removeprefix("chat ")
    assert (attrs(first)["gen_ai.usage.input_tokens"],
            attrs(first)["gen_ai.usage.output_tokens"]) == (30, 12)
    assert (attrs(second)["gen_ai.usage.input_tokens"],
            attrs(second)["gen_ai.usage.output_tokens"]) == (50, 9)
    assert list(attrs(first)["gen_ai.response.finish_reasons"]) == ["tool_calls"]
    assert list(attrs(second)["gen_ai.response.finish_reasons"]) == ["stop"]

    # The tool call, between the two model calls, with its call id and outcome.
    tool = one(spans, "execute_tool fs.write")
    assert parent_of(tool, spans) is turn
    assert attrs(tool)["gen_ai.operation.name"] == "execute_tool"
    assert attrs(tool)["gen_ai.tool.name"] == "fs.write"
    assert attrs(tool)["gen_ai.tool.call.id"] == "call-w1"
    assert attrs(tool)["hookline.tool.outcome"] == "ran"
    assert attrs(tool)["hookline.tool.duration_ms"] > 0
    assert (first.end_time or 0) <= (tool.start_time or 0)
    assert (tool.end_time or 0) <= (second.start_time or 0)

    # The run's commit to the tape store is timed inside the turn too.
    assert parent_of(one(spans, "hookline.store.commit"), spans) is turn
    assert telemetry.metrics.value("hookline_tool_calls_total", tool="fs.write",
                                   outcome="ran") == 1
    assert telemetry.metrics.value("hookline_turns_total", outcome="ok") == 1
    assert telemetry.metrics.value("hookline_model_tokens_total", model=first.attributes[
        "hookline.model.spec"], direction="input") == 80


class Exploding:
    @hookimpl
    def load_state(self, message: Any, session_id: str) -> dict[str, Any]:
        raise RuntimeError("state store is down")


async def test_a_failing_hook_records_the_exception_and_the_plugin_on_its_span(
        tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    framework, _ = build_builtin(workspace, [{"text": "never"}], Exploding())
    telemetry, exporter = install(framework)
    try:
        with pytest.raises(RuntimeError, match="state store is down"):
            await run_turn(framework, "hi")
    finally:
        telemetry.uninstall()
    spans = exporter.get_finished_spans()
    failed = one(spans, "hookline.hook load_state")
    assert attrs(failed)["hookline.hook.failed_plugin"] == "exploding-0"
    assert failed.status.status_code.name == "ERROR"
    (event,) = [e for e in failed.events if e.name == "exception"]
    assert event.attributes is not None
    assert event.attributes["exception.type"] == "RuntimeError"
    assert event.attributes["exception.message"] == "state store is down"
    assert event.attributes["hookline.plugin"] == "exploding-0"
    turn = one(spans, "hookline.turn")
    assert attrs(turn)["hookline.turn.outcome"] == "error"
    assert parent_of(failed, spans) is turn
    # on_error observers ran through the slow path: a span per implementation call.
    assert by_name(spans, "hookline.hook on_error")
    assert telemetry.metrics.value("hookline_hook_failures_total", plugin="exploding-0",
                                   hook="load_state") == 1
    assert telemetry.metrics.value("hookline_turns_total", outcome="error") == 1


async def test_a_turn_the_model_failed_is_an_error_though_it_answered(tmp_path: Path) -> None:
    """The pipeline turns the failure into an error reply rather than raising it: the
    turn's span and the metrics still say error."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    failing = {"error": {"kind": "provider", "message": "HTTP 500: upstream down"}}
    framework, _ = build_builtin(workspace, [failing])
    telemetry, exporter = install(framework)
    try:
        await run_turn(framework, "hi")
    finally:
        telemetry.uninstall()
    turn = one(exporter.get_finished_spans(), "hookline.turn")
    assert attrs(turn)["hookline.turn.outcome"] == "error"
    assert turn.status.status_code.name == "ERROR" and "upstream down" in str(
        turn.status.description)
    assert telemetry.metrics.value("hookline_turns_total", outcome="error") == 1
    assert telemetry.metrics.value("hookline_turns_total", outcome="ok") == 0


async def test_a_tool_the_model_made_up_is_no_metric_label(tmp_path: Path) -> None:
    """Labels hold names this process offered; a model's own would grow every scrape."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    made_up = "x" * 20_000
    framework, _ = build_builtin(workspace, [
        {"tool_calls": [{"name": made_up, "arguments": {}}]}, {"text": "ok"}])
    telemetry, _exporter = install(framework)
    try:
        await run_turn(framework, "hi")
    finally:
        telemetry.uninstall()
    assert telemetry.metrics.value("hookline_tool_calls_total", tool="(not offered)",
                                   outcome="failed") == 1
    assert made_up not in telemetry.metrics.prometheus()


class DenyWrites:
    @hookimpl
    def before_tool_call(self, call: ToolCall) -> ToolCallDecision | None:
        return ToolCallDecision.deny("no writes") if call.tool == "fs.write" else None


@pytest.mark.parametrize("capture", [False, True])
async def test_content_is_on_spans_only_when_capture_is_enabled(
        tmp_path: Path, capture: bool) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    framework, _ = build_builtin(workspace, [
        {"text": "Writing.", "tool_calls": [WRITE]}, {"text": "Refused, sorry."}],
        DenyWrites())
    telemetry, exporter = install(framework, capture_content=capture)
    try:
        await run_turn(framework, "my secret prompt")
    finally:
        telemetry.uninstall()
    spans = exporter.get_finished_spans()
    tool = one(spans, "execute_tool fs.write")
    assert attrs(tool)["hookline.tool.outcome"] == "denied"
    assert not (workspace / "notes.txt").exists()
    everything = json.dumps([attrs(span) for span in spans], default=str)
    content_keys = {"gen_ai.input.messages", "gen_ai.output.messages",
                    "gen_ai.tool.call.arguments"}
    present = {key for span in spans for key in attrs(span) if key in content_keys}
    if capture:
        assert present == content_keys
        assert "my secret prompt" in everything and "hello there" in everything
        chat = next(span for span in spans if span.name.startswith("chat "))
        (reply,) = json.loads(attrs(chat)["gen_ai.output.messages"])
        assert reply["role"] == "assistant" and reply["content"] == "Writing."
    else:
        assert present == set()
        assert "my secret prompt" not in everything and "hello there" not in everything


async def test_uninstall_restores_the_plain_plans_and_the_turn(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    framework, _ = build_builtin(workspace, [{"text": "one"}, {"text": "two"}])
    plain_source = framework.registry.plans["build_prompt"].source("first")
    telemetry, exporter = install(framework)
    assert active.installed(framework) is telemetry
    await run_turn(framework, "hi")
    telemetry.uninstall()
    assert active.installed(framework) is None
    assert framework.registry.tracer is None
    assert "process_inbound" not in vars(framework)
    assert framework.registry.plans["build_prompt"].source("first") == plain_source
    count = len(exporter.get_finished_spans())
    await run_turn(framework, "again")
    assert len(exporter.get_finished_spans()) == count


class BrokenTools:
    @hookimpl
    def provide_tools(self) -> list[Any]:
        raise ValueError("tool registry unreadable")


async def test_a_failure_inside_a_nested_dispatch_is_counted_once(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    framework, _ = build_builtin(workspace, [{"text": "never"}], BrokenTools())
    telemetry, exporter = install(framework)
    try:
        with pytest.raises(ValueError, match="tool registry unreadable"):
            await run_turn(framework, "hi")
    finally:
        telemetry.uninstall()
    spans = exporter.get_finished_spans()
    inner = next(span for span in spans if span.name == "hookline.hook provide_tools"
                 and attrs(span).get("hookline.hook.failed_plugin") == "brokentools-0")
    assert inner.status.status_code.name == "ERROR"
    # The exception passed out through run_model_stream: recorded there too, counted once.
    outer = one(spans, "hookline.hook run_model_stream")
    assert outer.status.status_code.name == "ERROR"
    assert parent_of(inner, spans) is outer
    assert telemetry.metrics.value("hookline_hook_failures_total", plugin="brokentools-0",
                                   hook="provide_tools") == 1
    assert telemetry.metrics.value("hookline_hook_failures_total", plugin="builtin",
                                   hook="run_model_stream") == 0


async def test_a_summary_call_is_a_model_call_span_that_says_why(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    framework, _ = build_builtin(workspace, [{"text": "a" * 6000}, {"text": "b" * 6000},
                                             {"text": "SUMMARY"}, {"text": "c"}],
                                 context_window=4000)
    telemetry, exporter = install(framework)
    try:
        for text in ("one", "two", "three"):
            await run_turn(framework, text)
    finally:
        telemetry.uninstall()
    calls = [attrs(span) for span in exporter.get_finished_spans()
             if span.name.startswith("chat ")]
    assert [call.get("hookline.compaction.reason") for call in calls] == [
        None, None, "budget", None]
