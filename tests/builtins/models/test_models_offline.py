"""The embedded offline model: labelled, deterministic, streams, demonstrates tool use."""

from __future__ import annotations

import json
import logging
import re
import threading
from contextlib import aclosing
from typing import Any

import pytest
import republic

from hookline.builtins.models import (
    Finished,
    ModelClient,
    ModelMessage,
    OfflineModel,
    TextDelta,
    ToolCallEvent,
    ToolSchema,
    Usage,
    open_model,
)
from hookline.builtins.models import offline as offline_module

pytestmark = pytest.mark.anyio

ECHO = ToolSchema(
    "echo",
    "Repeat the text.",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)


async def collect(model: Any, messages: list[Any], tools: list[ToolSchema] = (), **kw: Any):
    async with aclosing(model.stream(messages, tools, **kw)) as events:
        return [event async for event in events]


def final(events: list[Any]) -> Finished:
    assert isinstance(events[-1], Finished)
    assert sum(isinstance(event, Finished) for event in events) == 1
    return events[-1]


async def test_reply_is_labelled_echoes_and_says_how_to_configure(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(offline_module, "_noticed", threading.Event())
    with caplog.at_level(logging.WARNING, logger=offline_module.__name__):
        events = await collect(OfflineModel(), [ModelMessage.user("hello there, model")])
        await collect(OfflineModel(), [ModelMessage.user("again")])
        await collect(OfflineModel(notice=False), [ModelMessage.user("chosen")])
    done = final(events)
    deltas = [event.text for event in events if isinstance(event, TextDelta)]
    assert len(deltas) >= 2, "the text is streamed in several deltas"
    assert "".join(deltas) == done.text
    assert done.text.startswith("[offline model]")
    assert '"hello there, model"' in done.text
    assert "HOOKLINE_MODEL" not in done.text, "the notice is never part of a reply"
    notices = [r.getMessage() for r in caplog.records if r.name == offline_module.__name__]
    assert notices == [offline_module.notice()], "once per process"
    assert "HOOKLINE_MODEL" in notices[0] and "config.toml" in notices[0]
    assert done.tool_calls == []
    assert done.usage is not None and done.usage["total_tokens"] > 0
    assert any(isinstance(event, Usage) for event in events)


async def test_deterministic() -> None:
    messages = [ModelMessage.system("be nice"), ModelMessage.user("same input " * 10)]
    first = await collect(OfflineModel(), messages, [ECHO])
    second = await collect(OfflineModel(), messages, [ECHO])
    assert first == second


async def test_long_message_is_summarised() -> None:
    text = "word " * 400
    done = final(await collect(OfflineModel(), [ModelMessage.user(text)]))
    assert "(400 words, 1 lines)" in done.text
    assert len(done.text) < 1200


async def test_tool_command_calls_the_tool_then_summarises_the_result() -> None:
    model = OfflineModel()
    conversation = [ModelMessage.user('/tool echo {"text": "ping"}')]
    events = await collect(model, conversation, [ECHO])
    calls = [event.call for event in events if isinstance(event, ToolCallEvent)]
    assert len(calls) == 1
    call = calls[0]
    assert call.name == "echo" and call.args == {"text": "ping"}
    done = final(events)
    assert done.tool_calls == [call]
    assert done.text.startswith("[offline model]")

    conversation += [
        ModelMessage.assistant(done.text, [call]),
        ModelMessage.tool(call, "ping"),
    ]
    events = await collect(model, conversation, [ECHO])
    done = final(events)
    assert done.tool_calls == []
    assert done.text.startswith("[offline model]")
    assert "Tool `echo` returned" in done.text and "ping" in done.text


async def test_every_tool_call_gets_a_new_id() -> None:
    """The same conversation gets the same reply, but never the same call id: a session
    that sends the same command every turn must not show the model one id twice."""
    conversation = [ModelMessage.user('/tool echo {"text": "ping"}')]
    calls = [final(await collect(OfflineModel(), conversation, [ECHO])).tool_calls[0]
             for _ in range(20)]
    assert len({call.id for call in calls}) == 20
    assert all(re.fullmatch(r"offline-call-[0-9a-f]{16}", call.id) for call in calls)
    assert {(call.name, call.arguments) for call in calls} == {("echo", '{"text": "ping"}')}


async def test_tool_failure_is_reported() -> None:
    call_messages = [
        ModelMessage.user("/tool echo"),
        ModelMessage.tool("offline-call-1", "boom: no text", name="echo", is_error=True),
    ]
    done = final(await collect(OfflineModel(), call_messages, [ECHO]))
    assert "Tool `echo` failed" in done.text and "boom: no text" in done.text


async def test_tool_command_without_arguments_uses_empty_object() -> None:
    done = final(await collect(OfflineModel(), [ModelMessage.user("/tool echo")], [ECHO]))
    assert [call.args for call in done.tool_calls] == [{}]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('/tool missing {"a": 1}', "No tool named `missing`"),
        ("/tool echo {not json", "Could not read the tool arguments as JSON"),
        ("/tool echo [1, 2]", "must be a JSON object"),
        ("/tool", "Usage: /tool NAME"),
    ],
)
async def test_bad_tool_commands_explain_themselves(line: str, expected: str) -> None:
    done = final(await collect(OfflineModel(), [ModelMessage.user(line)], [ECHO]))
    assert done.tool_calls == []
    assert done.text.startswith("[offline model]")
    assert expected in done.text
    assert "echo" in done.text


async def test_accepts_republic_messages_and_media() -> None:
    picture = republic.image(b"\x89PNG....", media_type="image/png")
    messages = [republic.system("sys"), republic.user("look at this", picture)]
    done = final(await collect(OfflineModel(), messages))
    assert '"look at this"' in done.text
    assert "image (image/png)" in done.text


async def test_max_tokens_limits_the_reply() -> None:
    done = final(await collect(OfflineModel(), [ModelMessage.user("hi")], max_tokens=3))
    assert len(done.text.split()) == 3
    assert done.text.startswith("[offline model]")


async def test_early_close_is_clean() -> None:
    stream = OfflineModel().stream([ModelMessage.user("hello " * 50)])
    first = await anext(stream)
    assert isinstance(first, TextDelta)
    await stream.aclose()
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


async def test_no_user_message() -> None:
    done = final(await collect(OfflineModel(), [ModelMessage.system("only a system prompt")]))
    assert done.text.startswith("[offline model] There is no user message")


def test_open_model_defaults_to_offline() -> None:
    for spec in (None, "", "offline", "  offline  "):
        model = open_model(spec)
        assert isinstance(model, OfflineModel)
        assert model.name == "offline"
    assert isinstance(OfflineModel(), ModelClient)


async def test_usage_counts_are_json() -> None:
    events = await collect(OfflineModel(), [ModelMessage.user("a b c")])
    assert json.loads(json.dumps(final(events).usage)) == final(events).usage
