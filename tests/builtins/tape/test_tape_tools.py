"""tape.info, tape.search and tape.handoff as kernel Tools over the session tape."""

from __future__ import annotations

from typing import Any

import pytest

from hookline.builtins.store import InMemoryTapeStore
from hookline.builtins.tape.tape import Tape
from hookline.builtins.tape.tools import SEARCH_LIMIT_MAX, tape_tools
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tools import Tool, ToolContext

pytestmark = pytest.mark.anyio


def tools() -> dict[str, Tool]:
    return {tool.name: tool for tool in tape_tools()}


async def session() -> tuple[Tape, ToolContext]:
    tape = Tape(InMemoryTapeStore(), "main")
    await tape.ensure_bootstrap_anchor()
    await tape.append("message", {"role": "user", "content": "Where is the needle?"})
    await tape.append("message", {"role": "assistant", "content": "The needle is here. " * 40})
    await tape.append_event("run", {"usage": {"input_tokens": 40, "cached_tokens": 10}})
    return tape, ToolContext(tape=tape, run_id="run-7")


async def test_tool_definitions() -> None:
    made = tape_tools()
    assert [tool.name for tool in made] == ["tape.info", "tape.search", "tape.handoff"]
    for tool in made:
        assert tool.context is True and tool.exposure == "auto" and tool.description
        assert tool.parameters["type"] == "object"
        assert tool.parameters["additionalProperties"] is False
    by_name = tools()
    assert by_name["tape.search"].parameters["required"] == ["query"]
    assert by_name["tape.search"].parameters["properties"]["limit"]["maximum"] == SEARCH_LIMIT_MAX
    assert by_name["tape.handoff"].parameters["required"] == ["name"]
    assert by_name["tape.handoff"].model_name == "tape_handoff"


async def test_info() -> None:
    _, context = await session()
    result = await tools()["tape.info"].invoke({}, context)
    assert result["entries"] == 4 and result["anchors"] == 1
    assert result["last_anchor"] == "session/start"
    assert result["entries_since_last_anchor"] == 3
    assert result["cache_hit_rate"] == 0.25
    assert '"entries": 4' in tools()["tape.info"].render(result)


async def test_search() -> None:
    _, context = await session()
    tool = tools()["tape.search"]
    result = await tool.invoke({"query": "NEEDLE"}, context)
    assert [item["id"] for item in result] == [2, 3]
    assert result[1]["kind"] == "message" and result[1]["payload"].endswith("...")
    assert len(result[1]["payload"]) < 400
    assert [item["id"] for item in await tool.invoke({"query": "needle", "limit": 1}, context)] == [
        3
    ]
    rendered = tool.render(result)
    assert rendered.splitlines()[0].startswith("#2 [message] ")
    assert tool.render(await tool.invoke({"query": "absent"}, context)) == (
        "No matching tape entries."
    )


async def test_handoff() -> None:
    tape, context = await session()
    text = await tools()["tape.handoff"].invoke(
        {"name": "phase/2", "summary": "Needle located."}, context
    )
    assert "phase/2" in text and "entry 5" in text
    entries = await tape.entries()
    assert [e.kind for e in entries[-2:]] == ["anchor", "event"]
    assert entries[-2].payload == {"name": "phase/2", "state": {"summary": "Needle located."}}
    assert entries[-2].meta == {"run_id": "run-7"}
    assert await tape.read_messages() == [
        {"role": "assistant", "content": "[handoff to phase/2] Needle located."}
    ]
    await tools()["tape.handoff"].invoke({"name": "phase/3"}, ToolContext(tape=tape))
    assert (await tape.entries())[-2].payload == {"name": "phase/3", "state": {}}
    assert (await tape.entries())[-2].meta == {}


@pytest.mark.parametrize(
    ("name", "arguments", "fragment"),
    [
        ("tape.search", {}, "tape.search: missing required argument 'query'"),
        ("tape.search", {"query": ""}, "tape.search: 'query' must not be empty, got \"\""),
        ("tape.search", {"query": "  "}, "tape.search: 'query' must not be blank, got \"  \""),
        ("tape.search", {"query": 5}, "tape.search: 'query' must be a string, got integer 5"),
        ("tape.search", {"query": None}, "'query' must be a string, got null"),
        ("tape.search", {"query": "x", "limit": 0}, "'limit' must be from 1 to 100, got 0"),
        ("tape.search", {"query": "x", "limit": 101}, "'limit' must be from 1 to 100, got 101"),
        ("tape.search", {"query": "x", "limit": "3"}, "'limit' must be an integer, got string"),
        ("tape.search", {"query": "x", "limit": True}, "'limit' must be an integer, got boolean"),
        ("tape.search", {"query": "x", "limit": 2.5}, "'limit' must be an integer, got number"),
        (
            "tape.search",
            {"query": "x", "text": "y"},
            "tape.search: unknown argument 'text' (expected: query, limit)",
        ),
        ("tape.info", {"verbose": True}, "tape.info: unknown argument 'verbose' (expected: none)"),
        ("tape.handoff", {}, "tape.handoff: missing required argument 'name'"),
        ("tape.handoff", {"name": ""}, "tape.handoff: 'name' must not be empty"),
        ("tape.handoff", {"name": " \t"}, "tape.handoff: 'name' must not be blank"),
        ("tape.handoff", {"name": "x", "summary": 3}, "'summary' must be a string, got integer 3"),
        (
            "tape.handoff",
            {"name": "x", "state": {}},
            "unknown argument 'state' (expected: name, summary)",
        ),
    ],
)
async def test_bad_arguments_are_invalid_input(
    name: str, arguments: dict[str, Any], fragment: str
) -> None:
    tape, context = await session()
    before = await tape.entries()
    with pytest.raises(HooklineError) as caught:
        await tools()[name].invoke(arguments, context)
    assert caught.value.kind is ErrorKind.invalid_input
    assert fragment in caught.value.message and caught.value.message.startswith(f"{name}: ")
    assert caught.value.details is not None and caught.value.details["tool"] == name
    assert await tape.entries() == before


async def test_missing_tape_is_a_config_error() -> None:
    for tool in tape_tools():
        arguments = {"tape.search": {"query": "x"}, "tape.handoff": {"name": "x"}}.get(
            tool.name, {}
        )
        with pytest.raises(HooklineError) as caught:
            await tool.invoke(arguments)  # an empty ToolContext: no tape
        assert caught.value.kind is ErrorKind.config
