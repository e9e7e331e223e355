"""Tool invocation, rendering, exposure validation, name de-duplication and the argument
validator (`validate_arguments`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from hookline.kernel._util import dedupe_by_name
from hookline.kernel.streaming import ErrorKind, HooklineError
from hookline.kernel.tools import Tool, ToolContext, default_render, validate_arguments


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


def test_dedupe_by_name() -> None:
    assert dedupe_by_name(["x1", "y1", "x2", "z1", "y2"], key=lambda s: s[0]) == ["x1", "y1", "z1"]
    assert dedupe_by_name([], key=str) == []


# -- validate_arguments ------------------------------------------------------------------


def check(schema: dict[str, Any], arguments: Any) -> dict[str, Any]:
    return validate_arguments("t", schema, arguments)


def refused(schema: dict[str, Any], arguments: Any) -> HooklineError:
    with pytest.raises(HooklineError) as caught:
        check(schema, arguments)
    assert caught.value.kind is ErrorKind.invalid_input
    assert caught.value.message.startswith("t: ")
    return caught.value


def test_validator_handles_enum_defaults_nulls_and_nesting() -> None:
    schema = {
        "type": "object",
        "properties": {
            "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
            "opts": {
                "type": "object",
                "properties": {"depth": {"type": "integer", "minimum": 0}},
                "required": ["depth"],
                "additionalProperties": False,
            },
        },
        "required": [],
    }
    assert check(schema, {}) == {"mode": "a"}
    assert check(schema, {"mode": None}) == {"mode": "a"}
    assert check(schema, {"opts": {"depth": 2}}) == {"opts": {"depth": 2}, "mode": "a"}
    assert 't: \'mode\' must be one of "a", "b", got "c"' in refused(schema, {"mode": "c"}).message
    error = refused(schema, {"opts": {}})
    assert "missing required argument 'opts.depth'" in error.message
    assert error.details == {"tool": "t", "argument": "opts.depth"}
    assert "'opts.depth' must be at least 0" in refused(schema, {"opts": {"depth": -1}}).message
    assert "unknown argument 'opts.x'" in refused(schema, {"opts": {"depth": 1, "x": 1}}).message
    error = refused(schema, [])
    assert error.message == "t: arguments must be a JSON object, got array"
    assert error.details == {"tool": "t"}


def test_defaults_are_copies() -> None:
    schema = {"type": "object", "properties": {"tags": {"default": ["a"]}}}
    first = check(schema, {})
    first["tags"].append("b")
    assert check(schema, {}) == {"tags": ["a"]}


@pytest.mark.parametrize(
    ("prop", "value", "message"),
    [
        ({"type": "integer", "minimum": 1, "maximum": 9}, 0, "'x' must be from 1 to 9, got 0"),
        ({"type": "integer", "minimum": 1, "maximum": 9}, 10, "'x' must be from 1 to 9, got 10"),
        ({"type": "integer", "minimum": 1}, 0, "'x' must be at least 1, got 0"),
        ({"type": "integer", "maximum": 9}, 10, "'x' must be at most 9, got 10"),
        ({"type": "string", "minLength": 1}, "", "'x' must not be empty, got \"\""),
        (
            {"type": "string", "minLength": 3},
            "ab",
            "'x' must be at least 3 characters long, got 2 characters: \"ab\"",
        ),
        (
            {"type": "string", "maxLength": 3},
            "abcd",
            "'x' must be at most 3 characters long, got 4 characters: \"abcd\"",
        ),
        ({"type": "integer"}, True, "'x' must be an integer, got boolean true"),
        ({"type": "integer"}, 1.0, "'x' must be an integer, got number 1.0"),
        ({"type": "boolean"}, 0, "'x' must be a boolean, got integer 0"),
        ({"type": "object"}, "{}", "'x' must be an object, got string \"{}\""),
        ({"type": "string", "maxLength": 1}, "y" * 60, 'got 60 characters: "yyyyy'),
    ],
)
def test_limits_are_enforced_and_named(prop: dict[str, Any], value: Any, message: str) -> None:
    schema = {"type": "object", "properties": {"x": prop}}
    error = refused(schema, {"x": value})
    assert message in error.message
    assert error.details == {"tool": "t", "argument": "x"}


@pytest.mark.parametrize(
    ("prop", "value"),
    [
        ({"type": "integer", "minimum": 1, "maximum": 9}, 1),
        ({"type": "integer", "minimum": 1, "maximum": 9}, 9),
        ({"type": "string", "minLength": 1, "maxLength": 2}, "a"),
        ({"type": "string", "minLength": 1, "maxLength": 2}, "ab"),
        ({"minimum": 5}, "text"),  # numeric limits apply to numbers only
        ({"maxLength": 1}, 12345),  # length limits apply to strings only
        ({"minimum": 0}, True),  # a boolean is not a number
    ],
)
def test_values_within_the_limits_pass(prop: dict[str, Any], value: Any) -> None:
    assert check({"type": "object", "properties": {"x": prop}}, {"x": value}) == {"x": value}


@pytest.mark.parametrize(
    "prop",
    [{"type": "string", "pattern": "^a"}, {"type": "array"}, {"exclusiveMinimum": 0}],
)
def test_a_schema_keyword_that_is_not_enforced_is_refused(prop: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"x": prop}}
    with pytest.raises(ValueError, match=r"t: the schema of 'x' uses|schema type 'array'"):
        check(schema, {"x": "a"})
    with pytest.raises(ValueError, match="'format'"):
        check({"type": "object", "format": "x"}, {})
