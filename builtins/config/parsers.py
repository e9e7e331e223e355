"""The parsers of setting values: each takes the raw value (a string from the environment,
any TOML value from the file) and returns the parsed value or raises `Invalid`, which the
loader turns into a `SettingsError` naming the key, the source and the fix."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookline.kernel._util import parse_flag
from hookline.kernel.channels import ADMIT_ACTIONS

from ..store.url import StoreURL, is_postgres_url

__all__ = [
    "API_FORMATS",
    "APPROVAL_POLICIES",
    "MIN_HTTP_TOKEN_LENGTH",
    "SANDBOX_MODES",
    "TOOL_ENV_MODES",
    "ModelPrice",
]

MIN_HTTP_TOKEN_LENGTH = 32
SANDBOX_LAYERS = ("namespaces", "landlock", "seccomp")
"""The layers `sandbox_without` may leave out."""
SANDBOX_MODES = ("workspace-write", "read-only", "off")
APPROVAL_POLICIES = ("ask", "on-request", "never", "auto")
"""The `approval` setting's policies, strictest first (docs/approvals.md)."""
TOOL_ENV_MODES = ("filtered", "inherit")
API_FORMATS = ("chat", "responses", "messages", "gemini")
"""Chat wire formats republic 0.6 speaks (`api_format`)."""



class Invalid(Exception):
    """A value the setting does not accept; `near` is a value it would, close to the one
    given (a typo's likely meaning), or empty."""

    def __init__(self, near: str = "") -> None:
        super().__init__(near)
        self.near = near


def text(value: Any) -> str:
    if not isinstance(value, str):
        raise Invalid
    return value.strip()


_ALIAS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
"""A model alias: a bare name, which no `provider:model` spec can be."""


def model_spec(value: Any) -> str:
    spec = text(value)
    if spec == "offline" or spec.startswith("offline:"):
        return spec
    provider, sep, model = spec.partition(":")
    if not sep or not provider.strip() or not model.strip() or " " in spec:
        raise Invalid
    return spec


def aliases(value: Any) -> dict[str, str]:
    if isinstance(value, str):  # the environment: name=spec,name=spec
        pairs = [item.partition("=") for item in value.split(",") if item.strip()]
        if not all(sep for _, sep, _ in pairs):
            raise Invalid
        value = {name.strip(): spec.strip() for name, _, spec in pairs}
    if not isinstance(value, dict):
        raise Invalid
    found = {}
    for name, spec in value.items():
        if not isinstance(name, str) or not _ALIAS.fullmatch(name) or name == "offline":
            raise Invalid
        found[name] = model_spec(spec)  # a spec, never another alias
    return found


@dataclass(frozen=True)
class ModelPrice:
    """What a model's tokens cost, per million: `input` (neither read from the provider's
    prompt cache nor written to it), `output`, `cached_input` (read from the cache) and
    `cache_write_input` (written to it, which Anthropic bills above the input price)."""

    input: float
    output: float
    cached_input: float
    cache_write_input: float


_PRICE_NAMES = ("input", "output", "cached_input", "cache_write_input")
"""A price row's keys, in the order the environment's `spec=a/b/c/d` gives them."""


def model_prices(value: Any) -> dict[str, ModelPrice]:
    """Model spec -> prices. The file: a table per spec with `input`, `output` and
    optionally `cached_input` and `cache_write_input` (each defaults to `input`); the
    environment: `spec=input/output[/cached_input[/cache_write_input]]`, comma
    separated."""
    if isinstance(value, str):
        pairs = [item.rpartition("=") for item in value.split(",") if item.strip()]
        if not all(sep for _, sep, _ in pairs):
            raise Invalid
        value = {}
        for spec, _, numbers in pairs:
            parts = numbers.split("/")
            if not 2 <= len(parts) <= len(_PRICE_NAMES):
                raise Invalid
            value[spec.strip()] = dict(zip(_PRICE_NAMES, parts, strict=False))
    if not isinstance(value, dict):
        raise Invalid
    found = {}
    for spec, row in value.items():
        if not isinstance(row, dict) or not {"input", "output"} <= set(row) \
                or not set(row) <= set(_PRICE_NAMES):
            raise Invalid
        prices = {name: _price(amount) for name, amount in row.items()}
        found[model_spec(spec)] = ModelPrice(
            prices["input"], prices["output"], prices.get("cached_input", prices["input"]),
            prices.get("cache_write_input", prices["input"]))
    return found


def _price(value: Any) -> float:
    """A non-negative, finite number (a string from the environment too)."""
    if isinstance(value, bool):
        raise Invalid
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise Invalid from None
    if not math.isfinite(number) or number < 0:
        raise Invalid
    return number


def list_of(value: Any, parse: Callable[[Any], str]) -> tuple[str, ...]:
    """A comma-separated string or a list: blank items skipped, each parsed, repeats
    dropped (the first one kept)."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise Invalid
    return tuple(dict.fromkeys(parse(item) for item in items
                               if not (isinstance(item, str) and not item.strip())))


def model_list(value: Any) -> tuple[str, ...]:
    return list_of(value, model_spec)


def http_url(value: Any) -> str:
    given = text(value)
    if not re.match(r"^https?://[^/\s]+", given):
        raise Invalid
    return given.rstrip("/")


def env_name(value: Any) -> str:
    name = text(value)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise Invalid
    return name


def api_format(value: Any) -> str:
    name = text(value).lower()
    if name not in API_FORMATS:
        raise Invalid
    return name


def _integer(value: Any, digits: str) -> int:
    """An integer (never a boolean), or a string matching the `digits` pattern."""
    if isinstance(value, bool):
        raise Invalid
    if isinstance(value, str) and re.fullmatch(digits, value):
        value = int(value)
    if not isinstance(value, int):
        raise Invalid
    return value


def positive_int(value: Any) -> int:
    number = _integer(value, r"\s*\+?\d+\s*")
    if number <= 0:
        raise Invalid
    return number


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    flag = parse_flag(value) if isinstance(value, str) else None
    if flag is None:
        raise Invalid
    return flag


def host(value: Any) -> str:
    name = text(value)
    if name.startswith("[") and name.endswith("]"):  # a bracketed IPv6 address
        name = name[1:-1]
    # A name, an IPv4 or an IPv6 address; a single colon would be a port, which has its
    # own setting.
    if name.count(":") == 1 or not re.fullmatch(r"[A-Za-z0-9._%:-]+", name):
        raise Invalid
    return name


def tcp_port(value: Any) -> int:
    number = _integer(value, r"\s*\d+\s*")
    if not 0 <= number <= 65535:
        raise Invalid
    return number


def seconds(value: Any) -> float:
    if isinstance(value, bool):
        raise Invalid
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise Invalid from None
    if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise Invalid
    return float(value)


def fraction(value: Any) -> float:
    """A share, more than 0 and at most 1 (`0.8`)."""
    number = seconds(value)
    if number > 1:
        raise Invalid
    return number


def admit_action(value: Any) -> str:
    action = text(value).lower().replace("-", "_")
    if action not in ADMIT_ACTIONS:
        raise Invalid
    return action


def bearer_token(value: Any) -> str:
    given = text(value)
    if len(given) < MIN_HTTP_TOKEN_LENGTH or not re.fullmatch(r"[!-~]+", given):
        raise Invalid
    return given


def host_list(value: Any) -> tuple[str, ...]:
    return list_of(value, lambda item: host(item).lower().rstrip("."))


def _origin(value: Any) -> str:
    origin = text(value).lower().rstrip("/")
    if not re.fullmatch(r"https?://(\[[0-9a-f:.]+\]|[a-z0-9._-]+)(:\d{1,5})?", origin):
        raise Invalid
    return origin


def origin_list(value: Any) -> tuple[str, ...]:
    return list_of(value, _origin)


def channel_names(value: Any) -> str:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise Invalid
    names = [item.strip() for item in items if item.strip()]
    if not names or not all(re.fullmatch(r"!?[A-Za-z0-9_.-]+", name) for name in names):
        raise Invalid
    return ",".join(dict.fromkeys(names))


def choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        chosen = text(value).lower().replace("_", "-")
        if chosen not in choices:
            import difflib  # only for a value that is none of them

            raise Invalid(next(iter(difflib.get_close_matches(chosen, choices, n=1)), ""))
        return chosen
    return parse


def choice_list(*choices: str) -> Callable[[Any], tuple[str, ...]]:
    one = choice(*choices)
    return lambda value: list_of(value, one)


def env_pattern_list(value: Any) -> tuple[str, ...]:
    def pattern(item: Any) -> str:
        name = text(item)
        if not re.fullmatch(r"[A-Za-z0-9_*?\[\]!-]+", name):
            raise Invalid
        return name
    return list_of(value, pattern)


def path_list(value: Any) -> tuple[str, ...]:
    def path(item: Any) -> str:
        given = text(item)
        if not given or "\0" in given:
            raise Invalid
        return given
    return list_of(value, path)


def file_path(value: Any) -> Path:
    given = text(value)
    if not given:
        raise Invalid
    return Path(given).expanduser()


def tape_store(value: Any) -> Path | StoreURL:
    """A PostgreSQL URL stays a string (a Path would fold its `//`); anything else is the
    SQLite file's path."""
    if is_postgres_url(value):
        return StoreURL(text(value))
    return file_path(value)
