"""A model that plays back a file of model turns: for tests, demos and plugin authors.

Use it as the model spec `scripted:<path>` (wherever a model spec goes: HOOKLINE_MODEL, the
config file, `state["model"]`) or construct `ScriptedModel(path_or_turns)` in a test. Each
`stream()` call plays the next turn and records what it was shown in `calls`. The file
format and the turn keys are described in docs/builtins.md ("The scripted model").
"""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.messages import ModelMessage, ToolCallSpec, as_model_messages

from .base import (
    USAGE_FIELDS,
    Finished,
    ModelEvent,
    TextDelta,
    ToolCallEvent,
    ToolSchema,
    Usage,
    usage_dict,
)

__all__ = ["ScriptedCall", "ScriptedModel", "ScriptedTurn", "load_turns", "parse_turns"]

_TURN_KEYS = frozenset({"text", "tool_calls", "usage", "error", "delay"})
_CALL_KEYS = frozenset({"name", "arguments", "id"})
_INLINE = "<inline turns>"


@dataclass(frozen=True)
class ScriptedTurn:
    """One parsed turn."""

    deltas: tuple[str, ...] = ()
    tool_calls: tuple[ToolCallSpec, ...] = ()
    """The calls as scripted; those at `fresh_ids` get a new id suffix at each play."""
    fresh_ids: tuple[int, ...] = ()
    """Indexes of the calls whose script gave no id."""
    usage: dict[str, int] | None = None
    error: HooklineError | None = None
    delay: float = 0.0
    """Seconds to wait before the first event."""

    @property
    def text(self) -> str:
        return "".join(self.deltas)

    def played_calls(self) -> list[ToolCallSpec]:
        """The calls as one play sends them: a call without a scripted id gets its
        `call-<turn>-<index>` followed by 8 new hex digits."""
        return [
            replace(call, id=f"{call.id}-{uuid.uuid4().hex[:8]}") if index in self.fresh_ids
            else call
            for index, call in enumerate(self.tool_calls)
        ]


@dataclass(frozen=True)
class ScriptedCall:
    """What one stream() call received."""

    messages: list[ModelMessage]
    tools: list[ToolSchema]
    max_tokens: int | None

    @property
    def tool_names(self) -> list[str]:
        return [tool.name for tool in self.tools]


@dataclass
class _Cursor:
    used: int = 0
    calls: list[ScriptedCall] = field(default_factory=list)


class ScriptedModel:
    """Plays back turns from a JSON/TOML file or a list of turn mappings, one per call."""

    def __init__(
        self,
        path_or_turns: str | os.PathLike[str] | Sequence[Mapping[str, Any]],
        *,
        name: str | None = None,
    ) -> None:
        if isinstance(path_or_turns, str | os.PathLike):
            path = Path(path_or_turns)
            self.source = str(path)
            self.turns = load_turns(path)
            default_name = f"scripted:{path}"
        else:
            self.source = _INLINE
            self.turns = parse_turns(path_or_turns, source=_INLINE)
            default_name = "scripted"
        self.name = name or default_name
        self._cursor = _Cursor()

    def __repr__(self) -> str:
        return f"ScriptedModel({self.source!r}, turns={len(self.turns)}, used={self.used})"

    @property
    def used(self) -> int:
        """How many turns were played."""
        return self._cursor.used

    @property
    def remaining(self) -> int:
        return len(self.turns) - self._cursor.used

    @property
    def calls(self) -> list[ScriptedCall]:
        """Every stream() call so far, in order (also the one that ran out of turns)."""
        return self._cursor.calls

    def reset(self) -> None:
        """Start again from the first turn and forget the recorded calls."""
        self._cursor = _Cursor()

    async def stream(
        self,
        messages: Sequence[Any],
        tools: Sequence[ToolSchema] = (),
        *,
        max_tokens: int | None = None,
        **options: Any,
    ) -> AsyncIterator[ModelEvent]:
        from anyio import sleep
        from anyio.lowlevel import checkpoint

        cursor = self._cursor
        cursor.calls.append(ScriptedCall(as_model_messages(messages), list(tools), max_tokens))
        number = len(cursor.calls)
        if cursor.used >= len(self.turns):
            raise HooklineError(
                ErrorKind.config,
                f"Scripted model {self.source} has no turn left for model call {number}: "
                f"it holds {len(self.turns)} turn(s) and all were played. "
                f"Add a turn to {self.source}.",
                details={"path": self.source, "turns": len(self.turns), "call": number},
            )
        turn = self.turns[cursor.used]
        cursor.used += 1
        if turn.delay:
            await sleep(turn.delay)
        for delta in turn.deltas:
            await checkpoint()
            yield TextDelta(delta)
        if turn.error is not None:
            await checkpoint()
            raise HooklineError(turn.error.kind, turn.error.message, turn.error.details)
        calls = turn.played_calls()
        for call in calls:
            await checkpoint()
            yield ToolCallEvent(call)
        if turn.usage is not None:
            yield Usage(dict(turn.usage))
        yield Finished(
            turn.text,
            calls,
            None if turn.usage is None else dict(turn.usage),
        )


def _config_error(source: str, message: str) -> HooklineError:
    return HooklineError(ErrorKind.config, f"Scripted model file {source}: {message}")


def load_turns(path: str | os.PathLike[str]) -> tuple[ScriptedTurn, ...]:
    """Read and validate a turns file (TOML when the name ends in .toml, else JSON)."""
    path = Path(path)
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _config_error(source, f"cannot be read ({exc.strerror or exc}).") from exc
    try:
        if path.suffix.lower() == ".toml":
            import tomllib

            data: Any = tomllib.loads(raw.decode("utf-8"))
        else:
            data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "TOML" if path.suffix.lower() == ".toml" else "JSON"
        raise _config_error(source, f"is not valid {kind}: {exc}.") from exc
    if isinstance(data, Mapping):
        if set(data) - {"turns"}:
            extra = ", ".join(sorted(set(data) - {"turns"}))
            raise _config_error(source, f"unknown top-level key(s) {extra}; only 'turns'.")
        data = data.get("turns", [])
    if not isinstance(data, list):
        raise _config_error(source, "must hold a list of turns (or {'turns': [...]}).")
    return parse_turns(data, source=source)


def parse_turns(
    turns: Sequence[Mapping[str, Any]], *, source: str = _INLINE
) -> tuple[ScriptedTurn, ...]:
    """Validate turn mappings (the file format above) into ScriptedTurn values."""
    return tuple(_parse_turn(turn, index, source) for index, turn in enumerate(turns, start=1))


def _parse_turn(turn: Any, number: int, source: str) -> ScriptedTurn:
    where = f"turn {number}"
    if not isinstance(turn, Mapping):
        raise _config_error(source, f"{where} must be a table/object, got {type(turn).__name__}.")
    _refuse_unknown_keys(turn, _TURN_KEYS, where, source)
    text = turn.get("text", "")
    if isinstance(text, str):
        deltas: tuple[str, ...] = (text,) if text else ()
    elif isinstance(text, list) and all(isinstance(item, str) for item in text):
        deltas = tuple(item for item in text if item)
    else:
        raise _config_error(source, f"{where}: 'text' must be a string or a list of strings.")
    calls_raw = turn.get("tool_calls", [])
    if not isinstance(calls_raw, list):
        raise _config_error(source, f"{where}: 'tool_calls' must be a list.")
    calls = tuple(
        _parse_call(call, number, index, source) for index, call in enumerate(calls_raw, start=1)
    )
    return ScriptedTurn(
        deltas=deltas,
        tool_calls=calls,
        fresh_ids=tuple(index for index, call in enumerate(calls_raw) if "id" not in call),
        usage=_parse_usage(turn.get("usage"), where, source),
        error=_parse_error(turn.get("error"), where, source),
        delay=_parse_delay(turn.get("delay", 0), where, source),
    )


def _parse_delay(delay: Any, where: str, source: str) -> float:
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay < math.inf:
        raise _config_error(source, f"{where}: 'delay' must be a non-negative number of seconds.")
    return float(delay)


def _parse_call(call: Any, turn: int, index: int, source: str) -> ToolCallSpec:
    where = f"turn {turn}, tool call {index}"
    if not isinstance(call, Mapping):
        raise _config_error(source, f"{where} must be a table/object with a 'name'.")
    _refuse_unknown_keys(call, _CALL_KEYS, where, source)
    name = call.get("name")
    if not isinstance(name, str) or not name:
        raise _config_error(source, f"{where}: 'name' must be a non-empty string.")
    arguments = call.get("arguments", {})
    if isinstance(arguments, Mapping):
        arguments = json.dumps(arguments, ensure_ascii=False)
    elif not isinstance(arguments, str):
        raise _config_error(source, f"{where}: 'arguments' must be an object or a JSON string.")
    call_id = call.get("id", f"call-{turn}-{index}")
    if not isinstance(call_id, str):
        raise _config_error(source, f"{where}: 'id' must be a string (or left out for a "
                                    f"fresh one at every play).")
    return ToolCallSpec(call_id, name, arguments)


def _refuse_unknown_keys(
    item: Mapping[str, Any], known: frozenset[str], where: str, source: str
) -> None:
    unknown = set(item) - known
    if unknown:
        raise _config_error(
            source,
            f"{where} has unknown key(s) {', '.join(sorted(unknown))}; "
            f"known keys: {', '.join(sorted(known))}.",
        )


def _parse_usage(usage: Any, where: str, source: str) -> dict[str, int] | None:
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        raise _config_error(source, f"{where}: 'usage' must be a table/object of token counts.")
    counts: dict[str, int] = {}
    for key, value in usage.items():
        if key == "total_tokens":
            continue  # always computed
        if key not in USAGE_FIELDS:
            raise _config_error(
                source, f"{where}: unknown usage key {key!r}; known: {', '.join(USAGE_FIELDS)}."
            )
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _config_error(source, f"{where}: usage {key!r} must be a non-negative integer.")
        counts[key] = value
    return usage_dict(**counts)


def _parse_error(error: Any, where: str, source: str) -> HooklineError | None:
    if error is None:
        return None
    if isinstance(error, str):
        error = {"message": error}
    if not isinstance(error, Mapping) or not isinstance(error.get("message"), str):
        raise _config_error(source, f"{where}: 'error' must be {{kind, message}} with a message.")
    kind = error.get("kind", ErrorKind.provider.value)
    try:
        error_kind = ErrorKind(kind)
    except ValueError:
        known = ", ".join(kind.value for kind in ErrorKind)
        raise _config_error(
            source, f"{where}: unknown error kind {kind!r}; known: {known}."
        ) from None
    return HooklineError(error_kind, error["message"])
