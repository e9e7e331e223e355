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
from typing import Any, Literal, Protocol, TypeAlias

from .errors import ErrorKind, HooklineError

__all__ = [
    "EventEmitter",
    "Tool",
    "ToolContext",
    "ToolExposure",
    "argument_error",
    "default_render",
    "validate_arguments",
]


class EventEmitter(Protocol):
    """What a tool may do with its run's event bus (an ``events.EventBus``): emit events.
    Declared here so that the tool contract does not depend on the event module."""

    async def emit(self, event: Any) -> Any: ...


ToolExposure: TypeAlias = Literal["auto", "direct", "code", "command"]

_EXPOSURES = ("auto", "direct", "code", "command")


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

    Enforced keywords: `type` (object, string, integer, boolean), `properties`,
    `required`, `additionalProperties: false`, `enum`, `minimum`, `maximum`, `minLength`
    and `maxLength`; `description`, `title`, `examples` and `default` are annotations
    (`default` fills in a missing argument). Any other keyword, in the schema or in the
    schema of an argument that is given, is refused with ValueError: a schema cannot
    declare a limit that nothing enforces. A null for an
    optional argument counts as leaving it out (models often send nulls for arguments they
    do not use). A bad argument is `HooklineError(invalid_input)` naming the tool, the
    argument, what was expected and what was given (details: `tool`, `argument`).
    """
    _check_keywords(tool, schema, "arguments")
    if not isinstance(arguments, Mapping):
        raise argument_error(tool, f"arguments must be a JSON object, got {_json_type(arguments)}")
    return _check_object(tool, schema, arguments, "")


def argument_error(tool: str, message: str, *, argument: str | None = None) -> HooklineError:
    """The `invalid_input` error for a bad argument, shaped as `validate_arguments` makes
    them; tools use it for the rules a schema cannot say (a blank command, say)."""
    details = {"tool": tool} if argument is None else {"tool": tool, "argument": argument}
    return HooklineError(ErrorKind.invalid_input, f"{tool}: {message}", details)


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "object": lambda value: isinstance(value, Mapping),
    "string": lambda value: isinstance(value, str),
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "boolean": lambda value: isinstance(value, bool),
}

_ARTICLES = {"object": "an", "string": "a", "integer": "an", "boolean": "a"}

_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "enum", "minimum", "maximum",
    "minLength", "maxLength", "default", "description", "title", "examples",
})


def _check_keywords(tool: str, schema: Mapping[str, Any], name: str) -> None:
    if _KEYWORDS.issuperset(schema) and schema.get("type", "object") in _TYPE_CHECKS:
        return
    unknown = sorted(set(schema) - _KEYWORDS)
    if unknown:
        raise ValueError(
            f"{tool}: the schema of {name!r} uses {', '.join(map(repr, unknown))}, which "
            f"validate_arguments does not enforce (it enforces {', '.join(sorted(_KEYWORDS))})"
        )
    kind = schema.get("type")
    if kind is not None and kind not in _TYPE_CHECKS:
        raise ValueError(f"{tool}: schema type {kind!r} of {name!r} is not supported")


def _check_object(
    tool: str, schema: Mapping[str, Any], value: Mapping[str, Any], prefix: str
) -> dict[str, Any]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    required: list[str] = list(schema.get("required", []))
    if schema.get("additionalProperties") is False:
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
        subschema = properties.get(key)
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


def _check_value(tool: str, schema: Mapping[str, Any], value: Any, name: str) -> Any:
    _check_keywords(tool, schema, name)
    kind = schema.get("type")
    if kind is not None and not _TYPE_CHECKS[kind](value):
        raise argument_error(
            tool,
            f"{name!r} must be {_ARTICLES[kind]} {kind}, got {_json_type(value)} "
            f"{_preview(value)}",
            argument=name,
        )
    if kind == "object":
        value = _check_object(tool, schema, value, f"{name}.")
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(json.dumps(choice) for choice in schema["enum"])
        raise argument_error(
            tool, f"{name!r} must be one of {choices}, got {_preview(value)}", argument=name
        )
    # Numeric limits apply to numbers only, length limits to strings only (JSON Schema).
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and ("minimum" in schema or "maximum" in schema):
        _check_range(tool, schema, value, name)
    elif isinstance(value, str) and ("minLength" in schema or "maxLength" in schema):
        _check_length(tool, schema, value, name)
    return value


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
