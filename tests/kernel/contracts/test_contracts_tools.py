"""Tool invocation, rendering, exposure validation, name de-duplication and the argument
validator (`validate_arguments`)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from hookline.kernel._util import dedupe_by_name
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tools import (
    Tool,
    ToolContext,
    check_schema,
    default_render,
    validate_arguments,
)


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
    ("prop", "where"),
    [
        ({"type": "string", "pattern": "^a"}, "x"),
        ({"exclusiveMinimum": 0}, "x"),
        ({"type": "array", "items": {"type": "string", "format": "uri"}}, "x[]"),
        ({"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/P"}]}, "x"),
        ({"type": "object", "properties": {"y": {"uniqueItems": True}}}, "x.y"),
        ({"type": "object", "additionalProperties": {"pattern": "a"}}, "x.*"),
    ],
)
def test_a_schema_keyword_that_is_not_enforced_is_refused(
        prop: dict[str, Any], where: str) -> None:
    # Refused whatever the arguments: the whole schema is read before them.
    schema = {"type": "object", "properties": {"x": prop}}
    for arguments in ({"x": "a"}, {}):
        with pytest.raises(ValueError, match=rf"t: the schema of '{re.escape(where)}' uses"):
            check(schema, arguments)
    with pytest.raises(ValueError, match="'format'"):
        check({"type": "object", "format": "x"}, {})


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "bogus"}, "schema type 'bogus' of 'x' is not supported"),
        ({"type": ["string", "date"]}, "schema type 'date' of 'x' is not supported"),
        ({"type": "array", "items": [{"type": "string"}]}, "the schema of 'x[]' is not a JSON"),
        ({"anyOf": []}, "'anyOf' in the schema of 'x' must be a non-empty list of schemas"),
        ({"enum": "ab"}, "'enum' in the schema of 'x' must be a non-empty list"),
        ({"type": "string", "maxLength": -1}, "'maxLength' in the schema of 'x' must be a whole"),
        ({"type": "number", "minimum": "0"}, "'minimum' in the schema of 'x' must be a number"),
        ({"type": "object", "required": "y"}, "'required' in the schema of 'x' must be a list"),
    ],
)
def test_a_malformed_schema_is_refused_naming_the_part(
        schema: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"t: {message}")):
        check_schema("t", {"type": "object", "properties": {"x": schema}})
    with pytest.raises(ValueError, match="must have type 'object', not 'array'"):
        check_schema("t", {"type": "array"})


def test_numbers_arrays_nulls_and_type_lists() -> None:
    schema = {
        "type": "object",
        "properties": {
            "ratio": {"type": "number", "minimum": 0, "maximum": 1},
            "names": {"type": "array", "items": {"type": "string", "minLength": 1},
                      "minItems": 1, "maxItems": 3},
            "grid": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
            "note": {"type": ["string", "null"]},
            "nothing": {"type": "null"},
        },
        "required": ["ratio", "note"],
    }
    assert check(schema, {"ratio": 0.5, "note": None}) == {"ratio": 0.5, "note": None}
    assert check(schema, {"ratio": 1, "names": ("a",), "note": "n", "grid": [[1], []]}) == {
        "ratio": 1, "names": ["a"], "note": "n", "grid": [[1], []]}
    cases = [
        ({"ratio": True}, "'ratio' must be a number, got boolean true", "ratio"),
        ({"ratio": "0.5"}, "'ratio' must be a number, got string \"0.5\"", "ratio"),
        ({"ratio": 1.5}, "'ratio' must be from 0 to 1, got 1.5", "ratio"),
        ({"ratio": 0, "names": "ab"}, "'names' must be an array, got string \"ab\"", "names"),
        ({"ratio": 0, "names": []}, "'names' must have from 1 to 3 items, got 0", "names"),
        ({"ratio": 0, "names": list("abcd")}, "'names' must have from 1 to 3 items, got 4",
         "names"),
        ({"ratio": 0, "names": ["a", 2]}, "'names[1]' must be a string, got integer 2",
         "names[1]"),
        ({"ratio": 0, "names": ["a", ""]}, "'names[1]' must not be empty", "names[1]"),
        ({"ratio": 0, "grid": [[1], [2, "3"]]}, "'grid[1][1]' must be an integer", "grid[1][1]"),
        ({"ratio": 0, "note": 5}, "'note' must be a string or null, got integer 5", "note"),
        ({"ratio": 0}, "missing required argument 'note'", "note"),
        ({"ratio": 0, "note": "", "nothing": 0}, "'nothing' must be null, got integer 0",
         "nothing"),
    ]
    for arguments, message, argument in cases:
        error = refused(schema, arguments)
        assert message in error.message, (arguments, error.message)
        assert error.details == {"tool": "t", "argument": argument}


def test_any_of_and_one_of() -> None:
    point = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"],
             "additionalProperties": False}
    schema = {
        "type": "object",
        "properties": {
            "limit": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}],
                      "default": None},
            "at": {"anyOf": [point, {"type": "null"}]},
            "key": {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "string",
                                                                    "minLength": 2}]},
            "size": {"anyOf": [{"const": "auto"}, {"type": "integer"}]},
        },
    }
    assert check(schema, {}) == {"limit": None}
    assert check(schema, {"limit": 3, "at": {"x": 1.5}}) == {"limit": 3, "at": {"x": 1.5}}
    assert check(schema, {"key": "a"})["key"] == "a"
    assert check(schema, {"key": "abc"})["key"] == "abc"
    assert check(schema, {"size": "auto"})["size"] == "auto"
    cases = [
        ({"limit": "3"}, "'limit' must be an integer or null, got string \"3\"", "limit"),
        ({"limit": 0}, "'limit' must be at least 1, got 0", "limit"),
        ({"at": {}}, "missing required argument 'at.x'", "at.x"),
        ({"at": {"x": 1, "y": 2}}, "unknown argument 'at.y'", "at.y"),
        ({"at": 5}, "'at' must be an object or null, got integer 5", "at"),
        ({"key": "ab"}, "'key' matches 2 of the schemas of its oneOf, which allows exactly one",
         "key"),
        ({"size": "big"}, "'size' must be \"auto\", got \"big\"", "size"),
        ({"size": 1.5}, "'size' must be \"auto\" or an integer, got number 1.5", "size"),
    ]
    for arguments, message, argument in cases:
        error = refused(schema, arguments)
        assert message in error.message, (arguments, error.message)
        assert error.details == {"tool": "t", "argument": argument}


def test_enum_and_const_compare_as_json() -> None:
    schema = {"type": "object", "properties": {"n": {"enum": [1, "a", [1, 2]]},
                                               "on": {"const": True}}}
    assert check(schema, {"n": 1.0, "on": True}) == {"n": 1.0, "on": True}
    assert check(schema, {"n": [1, 2]}) == {"n": [1, 2]}
    assert "'n' must be one of 1, \"a\", [1, 2], got true" in refused(schema, {"n": True}).message
    assert "'on' must be true, got 1" in refused(schema, {"on": 1}).message


def test_additional_properties_as_a_schema_checks_the_other_names() -> None:
    schema = {"type": "object", "properties": {"env": {
        "type": "object", "additionalProperties": {"type": "string"}}}}
    assert check(schema, {"env": {"A": "1"}}) == {"env": {"A": "1"}}
    error = refused(schema, {"env": {"A": 1}})
    assert "'env.A' must be a string, got integer 1" in error.message
