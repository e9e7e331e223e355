"""Tool invocation, rendering, exposure validation and name de-duplication."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from hookline.kernel._util import dedupe_by_name
from hookline.kernel.tools import Tool, ToolContext, dedupe_tools, default_render


def add(a: int, b: int) -> int:
    return a + b


async def greet(name: str, context: ToolContext) -> str:
    return f"hello {name} from {context.run_id or 'nowhere'}"


@pytest.mark.anyio
async def test_invoke_sync_handler() -> None:
    tool = Tool("math.add", add)
    assert await tool.invoke({"a": 2, "b": 3}) == 5
    with pytest.raises(TypeError):
        await tool.invoke({"a": 1})


@pytest.mark.anyio
async def test_invoke_async_handler_with_context() -> None:
    tool = Tool("greet", greet, context=True)
    context = ToolContext(run_id="run-1", state={"session_id": "s"})
    assert await tool.invoke({"name": "ada"}, context) == "hello ada from run-1"
    assert await tool.invoke({"name": "ada"}, None) == "hello ada from nowhere"


@pytest.mark.anyio
async def test_invoke_sync_handler_returning_awaitable_and_no_context_kwarg() -> None:
    async def later(value: int) -> int:
        return value * 2

    def handler(value: int) -> Any:
        return later(value)

    tool = Tool("later", handler)
    arguments = {"value": 21}
    assert await tool.invoke(arguments, ToolContext(run_id="ignored")) == 42
    assert arguments == {"value": 21}


def test_model_name_and_defaults() -> None:
    tool = Tool("fs.read.text", add)
    assert tool.model_name == "fs_read_text"
    assert tool.parameters == {"type": "object", "properties": {}}
    assert Tool("x", add).parameters is not tool.parameters
    assert (tool.description, tool.context, tool.exposure, tool.deferred) == (
        "",
        False,
        "auto",
        False,
    )
    assert tool.renderer is None and tool.output_schema is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        tool.name = "y"  # type: ignore[misc]


@pytest.mark.parametrize("exposure", ["auto", "direct", "code", "command"])
def test_valid_exposures(exposure: Any) -> None:
    assert Tool("t", add, exposure=exposure).exposure == exposure


def test_unknown_exposure_raises() -> None:
    with pytest.raises(ValueError, match="exposure"):
        Tool("t", add, exposure="model")  # type: ignore[arg-type]


def test_render() -> None:
    class Model:
        def model_dump_json(self) -> str:
            return '{"a":1}'

    class Opaque:
        def __str__(self) -> str:
            return "<opaque>"

    assert default_render("plain text") == "plain text"
    assert default_render({"k": ["v", 1]}) == '{"k": ["v", 1]}'
    assert default_render({"text": "é"}) == '{"text": "é"}'
    assert default_render(None) == "null"
    assert default_render(Model()) == '{"a":1}'
    assert default_render(Opaque()) == "<opaque>"
    assert default_render({1, 2}) in ("{1, 2}", "{2, 1}")
    tool = Tool("t", add)
    assert tool.render(3) == "3"
    custom = Tool("t", add, renderer=lambda result: f"result={result}")
    assert custom.render(3) == "result=3"


def test_tool_context_defaults() -> None:
    context = ToolContext()
    assert (context.tape, context.run_id, context.state) == (None, "", {})
    assert (context.code_mode, context.command, context.events) == (False, False, None)


def test_dedupe() -> None:
    first = Tool("a", add, description="first")
    second = Tool("b", add)
    duplicate = Tool("a", add, description="second")
    assert dedupe_tools([first, second, duplicate]) == [first, second]
    assert dedupe_by_name(["x1", "y1", "x2", "z1", "y2"], key=lambda s: s[0]) == ["x1", "y1", "z1"]
    assert dedupe_by_name([], key=str) == []
