"""ScriptedModel: plays back JSON/TOML turns, one per call, and fails clearly when out."""

from __future__ import annotations

import json
import re
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from hookline.builtins.models import (
    Finished,
    ModelClient,
    ModelMessage,
    ModelOpener,
    ScriptedModel,
    TextDelta,
    ToolCallEvent,
    ToolSchema,
    Usage,
    open_model,
)
from hookline.kernel.errors import ErrorKind, HooklineError

pytestmark = pytest.mark.anyio

TOML_TURNS = """
[[turns]]
text = "Let me read the file."
[[turns.tool_calls]]
name = "fs.read"
arguments = { path = "notes.txt" }

[[turns]]
text = ["The file ", "says hello."]
usage = { input_tokens = 120, output_tokens = 8 }
"""

JSON_TURNS = [
    {"text": "first", "tool_calls": [{"name": "a"}, {"name": "b", "id": "mine"}]},
    {"text": "second", "tool_calls": [{"name": "raw", "arguments": "{not json"}]},
]


async def collect(model: Any, messages: list[Any] | None = None, tools: Any = (), **kw: Any):
    messages = messages or [ModelMessage.user("go")]
    async with aclosing(model.stream(messages, tools, **kw)) as events:
        return [event async for event in events]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


async def test_toml_file_plays_turns_in_order(tmp_path: Path) -> None:
    path = write(tmp_path, "demo.toml", TOML_TURNS)
    model = ScriptedModel(path)
    assert isinstance(model, ModelClient)
    assert model.name == f"scripted:{path}"

    first = await collect(model)
    assert first[0] == TextDelta("Let me read the file.")
    (call,) = [event.call for event in first if isinstance(event, ToolCallEvent)]
    assert re.fullmatch(r"call-1-1-[0-9a-f]{8}", call.id), call.id
    assert (call.name, call.args) == ("fs.read", {"path": "notes.txt"})
    assert first[-1] == Finished("Let me read the file.", [call], None)
    assert not any(isinstance(event, Usage) for event in first)

    second = await collect(model)
    assert [e.text for e in second if isinstance(e, TextDelta)] == ["The file ", "says hello."]
    done = second[-1]
    assert isinstance(done, Finished)
    assert done.text == "The file says hello." and done.tool_calls == []
    assert done.usage is not None
    assert done.usage["input_tokens"] == 120 and done.usage["total_tokens"] == 128
    assert Usage(done.usage) in second
    assert model.remaining == 0 and model.used == 2


async def test_json_file_list_and_object_forms(tmp_path: Path) -> None:
    for name, data in (("list.json", JSON_TURNS), ("obj.json", {"turns": JSON_TURNS})):
        model = ScriptedModel(write(tmp_path, name, json.dumps(data)))
        first = (await collect(model))[-1]
        made, given = first.tool_calls
        assert re.fullmatch(r"call-1-1-[0-9a-f]{8}", made.id), made.id
        assert (made.name, made.arguments) == ("a", "{}")
        assert (given.id, given.name, given.arguments) == ("mine", "b", "{}")
        second = (await collect(model))[-1]
        assert second.tool_calls[0].arguments == "{not json", "string arguments are kept as is"


async def test_made_ids_never_repeat_and_given_ids_are_kept_even_empty() -> None:
    turns = [{"tool_calls": [{"name": "a"}, {"name": "a"}, {"name": "b", "id": ""},
                             {"name": "c", "id": "call_1"}]}]
    model = ScriptedModel(turns)
    plays = []
    for _ in range(3):
        plays.append((await collect(model))[-1].tool_calls)
        model.reset()  # the same turn again, as a new process playing the file would
    made = [call.id for play in plays for call in play[:2]]
    assert len(set(made)) == 6, made
    assert all(re.fullmatch(r"call-1-[12]-[0-9a-f]{8}", call_id) for call_id in made)
    assert {(play[2].id, play[3].id) for play in plays} == {("", "call_1")}
    events = await collect(model)
    streamed = [event.call for event in events if isinstance(event, ToolCallEvent)]
    assert streamed == events[-1].tool_calls, "the events and Finished carry the same ids"


async def test_running_out_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "one.json", json.dumps([{"text": "only"}]))
    model = ScriptedModel(path)
    await collect(model)
    with pytest.raises(HooklineError) as caught:
        await collect(model)
    error = caught.value
    assert error.kind is ErrorKind.config
    assert str(path) in error.message
    assert "model call 2" in error.message and "1 turn(s)" in error.message
    assert error.details == {"path": str(path), "turns": 1, "call": 2}
    assert len(model.calls) == 2, "the failed call is recorded too"


async def test_calls_record_what_the_model_saw() -> None:
    model = ScriptedModel([{"text": "a"}, {"text": "b"}])
    tool = ToolSchema("echo", "Echo", {"type": "object", "properties": {}})
    await collect(model, [ModelMessage.system("s"), ModelMessage.user("hi")], [tool], max_tokens=9)
    await collect(model, [ModelMessage.user("again")])
    first, second = model.calls
    assert [m.role for m in first.messages] == ["system", "user"]
    assert first.tool_names == ["echo"] and first.max_tokens == 9
    assert second.messages[-1].text == "again" and second.tools == []
    model.reset()
    assert model.calls == [] and model.remaining == 2


async def test_error_turn_raises_after_its_text() -> None:
    model = ScriptedModel([{"text": "partial", "error": {"kind": "temporary", "message": "x"}}])
    seen: list[Any] = []
    with pytest.raises(HooklineError) as caught:
        async with aclosing(model.stream([ModelMessage.user("go")])) as events:
            async for event in events:
                seen.append(event)
    assert seen == [TextDelta("partial")]
    assert caught.value.kind is ErrorKind.temporary and caught.value.message == "x"


async def test_delay_waits_before_the_first_event() -> None:
    import anyio

    model = ScriptedModel([{"text": "late", "delay": 0.2}, {"text": "soon"}])
    assert model.turns[0].delay == 0.2 and model.turns[1].delay == 0.0
    with anyio.move_on_after(0.05) as scope:
        async with aclosing(model.stream([ModelMessage.user("go")])) as events:
            async for _ in events:
                pass
    assert scope.cancelled_caught, "the delayed turn answered before its delay"
    start = anyio.current_time()
    async with aclosing(model.stream([ModelMessage.user("again")])) as events:
        seen = [event async for event in events]
    assert seen[0] == TextDelta("soon") and anyio.current_time() - start < 0.2


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("bad.json", "{oops", "is not valid JSON"),
        ("bad.toml", "[[turns]\n", "is not valid TOML"),
        (
            "keys.json",
            '[{"txt": "typo"}]',
            "turn 1 has unknown key(s) txt; known keys: delay, error, text, tool_calls, usage.",
        ),
        (
            "callkeys.json",
            '[{"tool_calls": [{"name": "t", "args": {}}]}]',
            "turn 1, tool call 1 has unknown key(s) args; known keys: arguments, id, name.",
        ),
        ("call.json", '[{}, {"tool_calls": [{"arguments": {}}]}]', "turn 2, tool call 1"),
        ("id.json", '[{"tool_calls": [{"name": "t", "id": 7}]}]', "'id' must be a string"),
        ("usage.json", '[{"usage": {"input_tokens": -1}}]', "non-negative integer"),
        ("kind.json", '[{"error": {"kind": "nope", "message": "m"}}]', "unknown error kind"),
        ("top.json", '{"turn": []}', "unknown top-level key(s) turn"),
        ("shape.json", '"just text"', "must hold a list of turns"),
        ("delay.json", '[{"delay": -1}]', "'delay' must be a non-negative number"),
        ("delaytype.json", '[{"delay": "1s"}]', "'delay' must be a non-negative number"),
    ],
)
def test_invalid_files_are_config_errors(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(HooklineError) as caught:
        ScriptedModel(path)
    assert caught.value.kind is ErrorKind.config
    assert str(path) in caught.value.message
    assert expected in caught.value.message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(HooklineError, match="cannot be read") as caught:
        ScriptedModel(tmp_path / "absent.json")
    assert caught.value.kind is ErrorKind.config


async def test_open_model_scripted_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "turns.json", json.dumps([{"text": "from file"}]))
    monkeypatch.chdir(tmp_path)
    model = open_model("scripted:turns.json")
    assert isinstance(model, ScriptedModel)
    assert model.name == "scripted:turns.json"
    assert (await collect(model))[-1].text == "from file"
    with pytest.raises(HooklineError, match="scripted:<path>"):
        open_model("scripted:")


async def test_early_close() -> None:
    model = ScriptedModel([{"text": ["a", "b", "c"]}])
    stream = model.stream([ModelMessage.user("go")])
    assert await anext(stream) == TextDelta("a")
    await stream.aclose()
    with pytest.raises(StopAsyncIteration):
        await anext(stream)
    assert model.remaining == 0, "a started turn counts as played"


async def test_model_opener_keeps_the_scripted_place(tmp_path: Path) -> None:
    path = write(tmp_path, "two.json", json.dumps([{"text": "one"}, {"text": "two"}]))
    opener = ModelOpener()
    first = opener(f"scripted:{path}")
    assert (await collect(first))[-1].text == "one"
    again = opener(f" scripted:{path} ")
    assert again is first
    assert (await collect(again))[-1].text == "two"
    assert opener(None) is opener("offline")
    opener.clear()
    assert opener(f"scripted:{path}") is not first
