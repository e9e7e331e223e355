"""Tools: callables the model (or model-written code, or a command) can invoke.

`validate_arguments` is the one argument check for tools: a tool that wants its
arguments checked against its JSON schema calls it from its handler (every builtin tool
does); `Tool.invoke` itself passes arguments through unchecked.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, get_args

from .errors import ErrorKind, HooklineError

__all__ = [
    "EventEmitter",
    "Tool",
    "ToolContext",
    "ToolExposure",
    "argument_error",
    "check_schema",
    "default_render",
    "validate_arguments",
]


class EventEmitter(Protocol):
    """What a tool may do with its run's event bus (an ``events.EventBus``): emit events.
    Declared here so that the tool contract does not depend on the event module."""

    async def emit(self, event: Any) -> Any: ...


ToolExposure: TypeAlias = Literal["auto", "direct", "code", "command"]

_EXPOSURES: tuple[ToolExposure, ...] = get_args(ToolExposure)


def _empty_object_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


@dataclass(frozen=True)
class ToolContext:
    """What a context-aware tool learns about the call: run, turn state and origin."""

    tape: Any = None
    run_id: str = ""
    state: dict[str, Any] = field(default_factory=dict)
    code_mode: bool = False
    command: bool = False
    events: EventEmitter | None = None


def default_render(result: Any) -> str:
    """Turn a tool result into model text: strings as is, models and data as JSON."""
    if isinstance(result, str):
        return result
    dump_json = getattr(result, "model_dump_json", None)  # pydantic models, duck-typed
    if callable(dump_json):
        try:
            return str(dump_json())
        except Exception:
            return str(result)
    try:
        return json.dumps(result, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(result)


@dataclass(frozen=True)
class Tool:
    """A named callable plus the schema the model sees.

    `exposure` decides who may call it: `auto` (the model; only code in code mode),
    `direct` (the model, also in code mode), `code` (only model-written code) or
    `command` (only as a command). With `context=True` the handler also receives a
    `context` keyword holding the ToolContext.
    """

    name: str
    handler: Callable[..., Any]
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=_empty_object_schema)
    context: bool = False
    exposure: ToolExposure = "auto"
    renderer: Callable[[Any], str] | None = None
    output_schema: dict[str, Any] | None = None
    deferred: bool = False

    def __post_init__(self) -> None:
        if self.exposure not in _EXPOSURES:
            raise ValueError(
                f"Tool {self.name!r}: exposure must be one of {', '.join(_EXPOSURES)}, "
                f"got {self.exposure!r}"
            )

    @property
    def model_name(self) -> str:
        """The name offered to models, which reject dots in tool names."""
        return self.name.replace(".", "_")

    def render(self, result: Any) -> str:
        """Model text for a result, through the tool's renderer when it has one."""
        if self.renderer is not None:
            return self.renderer(result)
        return default_render(result)

    async def invoke(self, arguments: dict[str, Any], context: ToolContext | None = None) -> Any:
        """Call the handler with the arguments as keywords; await it if it is async.

        A context-aware tool called without a context gets an empty ToolContext, so
        handlers never have to check for None.
        """
        kwargs = dict(arguments)
        if self.context:
            kwargs["context"] = context if context is not None else ToolContext()
        result = self.handler(**kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result


# -- argument checking -------------------------------------------------------------------


def validate_arguments(tool: str, schema: Mapping[str, Any], arguments: Any) -> dict[str, Any]:
    """Check a tool's arguments against its JSON schema; return them with defaults filled in.

    Enforced keywords: `type` (object, array, string, integer, number, boolean, null, or
    a list of them), `properties`, `required`, `additionalProperties` (false or a
    schema), `items`, `minItems`, `maxItems`, `enum`, `const`, `anyOf`, `oneOf`,
    `minimum`, `maximum`, `minLength` and `maxLength`; `description`, `title`, `examples`
    and `default` are annotations (`default` fills in a missing argument). The whole
    schema is read first (`check_schema`): any other keyword, at any depth, is refused
    with ValueError, because a schema cannot declare a limit that nothing enforces. A
    null for an optional argument counts as leaving it out (models often send nulls for
    arguments they do not use). A bad argument is `HooklineError(invalid_input)` naming
    the tool, the argument's path (`opts.depth`, `names[2]`), what was expected and what
    was given (details: `tool`, `argument`).
    """
    check_schema(tool, schema)
    if not isinstance(arguments, Mapping):
        raise argument_error(tool, f"arguments must be a JSON object, got {_json_type(arguments)}")
    checked = _check_value(tool, {**schema, "type": "object"}, arguments, "")
    return dict(checked)


def check_schema(tool: str, schema: Any) -> None:
    """Raise ValueError naming the first keyword, at any depth, that `validate_arguments`
    does not enforce, or the first malformed part; a tool whose schema comes from
    elsewhere (an MCP server) is checked once, before it is offered."""
    _check_schema(tool, schema, "arguments", "")
    kinds = schema.get("type", "object")
    if kinds != "object":
        raise ValueError(f"{tool}: the arguments' schema must have type 'object', not {kinds!r}")


def argument_error(tool: str, message: str, *, argument: str | None = None) -> HooklineError:
    """The `invalid_input` error for a bad argument, shaped as `validate_arguments` makes
    them; tools use it for the rules a schema cannot say (a blank command, say)."""
    details = {"tool": tool} if argument is None else {"tool": tool, "argument": argument}
    return HooklineError(ErrorKind.invalid_input, f"{tool}: {message}", details)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "object": lambda value: isinstance(value, Mapping),
    "array": lambda value: isinstance(value, list | tuple),
    "string": lambda value: isinstance(value, str),
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "number": _is_number,
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
}

_NOUNS = {
    "object": "an object", "array": "an array", "string": "a string", "integer": "an integer",
    "number": "a number", "boolean": "a boolean", "null": "null",
}

_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "minItems",
    "maxItems", "enum", "const", "anyOf", "oneOf", "minimum", "maximum", "minLength",
    "maxLength", "default", "description", "title", "examples",
})

_COUNTS = ("minLength", "maxLength", "minItems", "maxItems")


def _check_schema(tool: str, schema: Any, name: str, prefix: str) -> None:
    """Every keyword of `schema` and of the schemas inside it, or ValueError.

    `name` is the argument the schema describes ("arguments" at the top), `prefix` the
    start of its properties' names."""
    if not isinstance(schema, Mapping):
        raise ValueError(f"{tool}: the schema of {name!r} is not a JSON object")
    unknown = sorted(set(schema) - _KEYWORDS)
    if unknown:
        raise ValueError(
            f"{tool}: the schema of {name!r} uses {', '.join(map(repr, unknown))}, which "
            f"validate_arguments does not enforce (it enforces {', '.join(sorted(_KEYWORDS))})"
        )

    def malformed(key: str, wanted: str) -> ValueError:
        return ValueError(f"{tool}: {key!r} in the schema of {name!r} must be {wanted}, "
                          f"got {_preview(schema[key])}")

    _kinds(tool, schema, name)
    for key in ("minimum", "maximum"):
        if key in schema and not _is_number(schema[key]):
            raise malformed(key, "a number")
    for key in _COUNTS:
        value = schema.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise malformed(key, "a whole number, 0 or more")
    if "enum" in schema and not (isinstance(schema["enum"], list) and schema["enum"]):
        raise malformed("enum", "a non-empty list")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(key, str) for key in required):
        raise malformed("required", "a list of names")
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise malformed("properties", "a table of schemas")
    for key, sub in properties.items():
        _check_schema(tool, sub, f"{prefix}{key}", f"{prefix}{key}.")
    extra = schema.get("additionalProperties", True)
    if not isinstance(extra, bool):
        _check_schema(tool, extra, f"{prefix}*", f"{prefix}*.")
    if "items" in schema:
        _check_schema(tool, schema["items"], f"{name}[]", f"{name}[].")
    for key in ("anyOf", "oneOf"):
        if key not in schema:
            continue
        if not (isinstance(schema[key], list) and schema[key]):
            raise malformed(key, "a non-empty list of schemas")
        for branch in schema[key]:
            _check_schema(tool, branch, name, prefix)


def _kinds(tool: str, schema: Mapping[str, Any], name: str) -> tuple[str, ...]:
    """The types a schema allows (none: any), from `type` as a name or a list of names."""
    kind = schema.get("type")
    if kind is None:
        return ()
    kinds = tuple(kind) if isinstance(kind, list) else (kind,)
    for each in kinds:
        if not isinstance(each, str) or each not in _TYPE_CHECKS:
            raise ValueError(f"{tool}: schema type {each!r} of {name!r} is not supported")
    if not kinds:
        raise ValueError(f"{tool}: the schema type of {name!r} is an empty list")
    return kinds


def _check_value(tool: str, schema: Mapping[str, Any], value: Any, name: str) -> Any:
    label = repr(name) if name else "arguments"
    kinds = _kinds(tool, schema, name)
    if kinds and not any(_TYPE_CHECKS[kind](value) for kind in kinds):
        raise argument_error(tool, f"{label} must be {_either(kinds)}, got {_given(value)}",
                             argument=name)
    if "const" in schema and not _same(value, schema["const"]):
        raise argument_error(
            tool, f"{label} must be {_preview(schema['const'])}, got {_preview(value)}",
            argument=name)
    if "enum" in schema and not any(_same(value, choice) for choice in schema["enum"]):
        choices = ", ".join(json.dumps(choice) for choice in schema["enum"])
        raise argument_error(
            tool, f"{label} must be one of {choices}, got {_preview(value)}", argument=name)
    # Each limit applies to the values it can describe (JSON Schema): numeric limits to
    # numbers, lengths to strings, object keywords to objects, array keywords to arrays.
    if isinstance(value, Mapping):
        if "object" in kinds or {"properties", "required", "additionalProperties"} & set(schema):
            value = _check_object(tool, schema, value, f"{name}." if name else "")
    elif isinstance(value, list | tuple):
        value = _check_array(tool, schema, value, name)
    elif _is_number(value) and ("minimum" in schema or "maximum" in schema):
        _check_range(tool, schema, value, name)
    elif isinstance(value, str) and ("minLength" in schema or "maxLength" in schema):
        _check_length(tool, schema, value, name)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            value = _check_branches(tool, key, schema[key], value, name)
    return value


def _check_object(
    tool: str, schema: Mapping[str, Any], value: Mapping[str, Any], prefix: str
) -> dict[str, Any]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    required: list[str] = list(schema.get("required", []))
    extra = schema.get("additionalProperties", True)
    if extra is False:
        unknown = [key for key in value if key not in properties]
        if unknown:
            expected = ", ".join(f"{prefix}{key}" for key in properties) or "none"
            raise argument_error(
                tool,
                f"unknown argument {_names(unknown, prefix)} (expected: {expected})",
                argument=f"{prefix}{unknown[0]}",
            )
    result: dict[str, Any] = {}
    for key, item in value.items():
        if item is None and key not in required:
            continue
        subschema = properties.get(key, None if isinstance(extra, bool) else extra)
        result[key] = item if subschema is None else _check_value(
            tool, subschema, item, f"{prefix}{key}"
        )
    missing = [key for key in required if key not in result]
    if missing:
        raise argument_error(
            tool,
            f"missing required argument {_names(missing, prefix)}",
            argument=f"{prefix}{missing[0]}",
        )
    for key, subschema in properties.items():
        if key not in result and "default" in subschema:
            result[key] = copy.deepcopy(subschema["default"])
    return result


def _check_array(tool: str, schema: Mapping[str, Any], value: Any, name: str) -> list[Any]:
    low, high = schema.get("minItems"), schema.get("maxItems")
    count = len(value)
    if (low is not None and count < low) or (high is not None and count > high):
        if low is not None and high is not None:
            wanted = f"from {low} to {high} items"
        else:
            wanted = f"at least {low} items" if low is not None else f"at most {high} items"
        raise argument_error(tool, f"{name!r} must have {wanted}, got {count}", argument=name)
    if "items" not in schema:
        return list(value)
    return [_check_value(tool, schema["items"], item, f"{name}[{index}]")
            for index, item in enumerate(value)]


def _check_branches(tool: str, key: str, branches: list[Any], value: Any, name: str) -> Any:
    """The value as the first matching branch checked it (`anyOf`), or as the only one
    (`oneOf`); when none matches, the error of the one branch of the value's type, if
    there is exactly one, says the most."""
    passed: list[Any] = []
    failed: list[HooklineError] = []
    for branch in branches:
        try:
            passed.append(_check_value(tool, branch, value, name))
        except HooklineError as error:
            if _fits(tool, branch, value, name):
                failed.append(error)
            continue
        if key == "anyOf":
            return passed[0]
    label = repr(name) if name else "arguments"
    if len(passed) == 1:
        return passed[0]
    if passed:
        raise argument_error(
            tool, f"{label} matches {len(passed)} of the schemas of its oneOf, which allows "
            f"exactly one: got {_preview(value)}", argument=name)
    if len(failed) == 1:
        raise failed[0]
    wanted = " or ".join(_describe(tool, branch, name) for branch in branches)
    raise argument_error(tool, f"{label} must be {wanted}, got {_given(value)}", argument=name)


def _fits(tool: str, schema: Mapping[str, Any], value: Any, name: str) -> bool:
    """Whether a branch is about values of this one's JSON type (so its error is apt)."""
    kinds = _kinds(tool, schema, name)
    if kinds:
        return any(_TYPE_CHECKS[kind](value) for kind in kinds)
    choices = [schema["const"]] if "const" in schema else schema.get("enum")
    if choices is None:
        return True
    family = _json_type(value).replace("integer", "number")
    return any(_json_type(choice).replace("integer", "number") == family for choice in choices)


def _describe(tool: str, schema: Mapping[str, Any], name: str) -> str:
    kinds = _kinds(tool, schema, name)
    if "const" in schema:
        return _preview(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(choice) for choice in schema["enum"])
    return _either(kinds) if kinds else "a value of another schema"


def _either(kinds: tuple[str, ...]) -> str:
    nouns = [_NOUNS[kind] for kind in kinds]
    return nouns[0] if len(nouns) == 1 else f"{', '.join(nouns[:-1])} or {nouns[-1]}"


def _same(left: Any, right: Any) -> bool:
    """JSON equality: true is not 1, 1 is 1.0, objects and arrays compare by content."""
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(map(_same, left, right))
    if isinstance(left, bool) != isinstance(right, bool):
        return False
    if _is_number(left) and _is_number(right):
        return bool(left == right)
    return type(left) is type(right) and bool(left == right)


def _check_range(tool: str, schema: Mapping[str, Any], value: float, name: str) -> None:
    low, high = schema.get("minimum"), schema.get("maximum")
    if (low is None or value >= low) and (high is None or value <= high):
        return
    if low is not None and high is not None:
        bound = f"from {low} to {high}"
    else:
        bound = f"at least {low}" if low is not None else f"at most {high}"
    raise argument_error(tool, f"{name!r} must be {bound}, got {value}", argument=name)


def _check_length(tool: str, schema: Mapping[str, Any], value: str, name: str) -> None:
    low, high = schema.get("minLength"), schema.get("maxLength")
    if low is not None and len(value) < low:
        wanted = "must not be empty" if low == 1 else f"must be at least {low} characters long"
    elif high is not None and len(value) > high:
        wanted = f"must be at most {high} characters long"
    else:
        return
    given = f"{len(value)} characters: {_preview(value)}" if value else '""'
    raise argument_error(tool, f"{name!r} {wanted}, got {given}", argument=name)


def _given(value: Any) -> str:
    return "null" if value is None else f"{_json_type(value)} {_preview(value)}"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _preview(value: Any, limit: int = 40) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _names(keys: list[str], prefix: str) -> str:
    return ", ".join(repr(f"{prefix}{key}") for key in keys)
