"""Model options of one turn (`hookline run -o KEY VALUE`, an envelope's `context.options`):
sampling and length settings passed through to the provider request.

Only the keys of `MODEL_OPTIONS` are taken, each checked against its type and range, so a
typo or a bad value is refused with the key and the allowed ones before any model is
asked, never sent for the provider to ignore. The names are republic's `ChatOptions`,
which each API format maps to its own fields (and refuses where it cannot express one).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hookline.kernel.errors import ErrorKind, HooklineError

__all__ = ["MODEL_OPTIONS", "MODEL_OPTIONS_STATE", "checked_model_options",
           "parse_model_options"]

MODEL_OPTIONS_STATE = "model_options"
"""Turn state key of the checked options; the agent loop sends them with each model call
of the turn (not with a compaction's summary call)."""

REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


@dataclass(frozen=True)
class ModelOption:
    """One known option: what it takes (said in errors) and how a value is checked."""

    takes: str
    check: Callable[[Any], Any]
    """The value as sent, or ValueError; given a string from the command line too."""
    repeatable: bool = False
    """Given several times, its values make a list (`stop`)."""


def _number(low: float, high: float) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
        if not math.isfinite(number) or not low <= number <= high:
            raise ValueError
        return number
    return check


def _integer(low: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool | float):  # a whole number only, never rounded
            raise ValueError
        number = int(value)
        if number < low:
            raise ValueError
        return number
    return check


def _effort(value: Any) -> str:
    if value not in REASONING_EFFORTS:
        raise ValueError
    return str(value)


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError
    return value


MODEL_OPTIONS: dict[str, ModelOption] = {
    "temperature": ModelOption("a number from 0 to 2", _number(0, 2)),
    "top_p": ModelOption("a number from 0 to 1", _number(0, 1)),
    "top_k": ModelOption("a whole number from 1", _integer(1)),
    "max_tokens": ModelOption("a whole number from 1", _integer(1)),
    "presence_penalty": ModelOption("a number from -2 to 2", _number(-2, 2)),
    "frequency_penalty": ModelOption("a number from -2 to 2", _number(-2, 2)),
    "seed": ModelOption("a whole number", _integer(-(2 ** 63))),
    "stop": ModelOption("a text that ends the reply; repeatable", _text, repeatable=True),
    "reasoning_effort": ModelOption(f"one of {', '.join(REASONING_EFFORTS)}", _effort),
}
"""The options a turn may set (documented in docs/cli.md, `hookline run -o`)."""


def parse_model_options(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The options of `-o KEY VALUE` pairs, values checked (a number from its text)."""
    options: dict[str, Any] = {}
    for key, value in pairs:
        option = _known(key)
        checked = _checked(key, option, value)
        if option.repeatable:
            options.setdefault(key, []).append(checked)
        elif key in options:
            raise _error(f"model option {key!r} is given twice; give it once")
        else:
            options[key] = checked
    return options


def checked_model_options(value: Any) -> dict[str, Any]:
    """An envelope's `context.options` (an object) as the options to send, each value
    checked; a repeatable option takes a list of values too."""
    if not isinstance(value, Mapping):
        raise _error(f"the model options must be an object of option -> value, got "
                     f"{type(value).__name__}")
    options: dict[str, Any] = {}
    for key, given in value.items():
        option = _known(str(key))
        if option.repeatable:
            values = given if isinstance(given, list) else [given]
            options[key] = [_checked(key, option, item) for item in values]
        else:
            options[key] = _checked(key, option, given)
    return options


def _known(key: str) -> ModelOption:
    option = MODEL_OPTIONS.get(key)
    if option is None:
        known = "; ".join(f"{name} ({spec.takes})" for name, spec in MODEL_OPTIONS.items())
        raise _error(f"unknown model option {key!r}; the known ones: {known}")
    return option


def _checked(key: str, option: ModelOption, value: Any) -> Any:
    try:
        return option.check(value)
    except (TypeError, ValueError):
        raise _error(f"model option {key} takes {option.takes}, got {value!r}") from None


def _error(message: str) -> HooklineError:
    return HooklineError(ErrorKind.invalid_input, message)
