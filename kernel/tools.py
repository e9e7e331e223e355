"""Tools: callables the model (or model-written code, or a command) can invoke."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from ._util import dedupe_by_name

__all__ = ["EventEmitter", "Tool", "ToolContext", "ToolExposure", "dedupe_tools",
           "default_render"]


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


def dedupe_tools(tools: Iterable[Tool]) -> list[Tool]:
    """One tool per name, the first in priority order winning (`provide_tools`)."""
    return dedupe_by_name(tools, key=lambda tool: tool.name)
