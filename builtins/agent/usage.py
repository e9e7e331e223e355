"""The token usage of a turn: each model call's counts (`token_counts`, whatever names
the provider used) added up by model for the turn's `run` event (`add_usage`), with the
cost when the provider reported one; a compaction the user asked for records its own
(`COMPACT_EVENT`). What the terminal shows of it is `terminal/usage.py`."""

from __future__ import annotations

from typing import Any

__all__ = ["COMPACT_EVENT", "add_usage", "cache_writes", "reported_cost", "token_counts"]

COMPACT_EVENT = "compact"
"""The tape event of a compaction the user asked for (`model`, `usage_by_model`, as a
`run` event has them): no turn's `run` event counts its summary call."""

_NAMES = (("input_tokens", ("input_tokens", "prompt_tokens")),
          ("output_tokens", ("output_tokens", "completion_tokens")),
          ("cached_tokens", ("cached_tokens",)))


def token_counts(usage: Any) -> dict[str, int] | None:
    """A call's usage as `input_tokens`, `output_tokens` and `cached_tokens` (whatever
    names the provider used); None when it is no usage at all."""
    if not isinstance(usage, dict):
        return None
    return {key: next((int(number) for name in names
                       if (number := _number(usage, name)) is not None), 0)
            for key, names in _NAMES}


def cache_writes(usage: Any) -> int:
    """The input tokens a call wrote to the provider's prompt cache (Anthropic bills them
    above the input price); 0 when it reported none. Kept apart from `token_counts`,
    whose three counts are what `run --json` and the HTTP channel show."""
    return int(_number(usage, "cache_write_tokens") or 0)


def reported_cost(usage: Any) -> float | None:
    """The cost the provider reported in a call's usage, or None."""
    return _number(usage, "cost")


def _number(usage: Any, name: str) -> float | None:
    """`usage[name]` when `usage` is a dict and that is a number (not a bool), else None."""
    value = usage.get(name) if isinstance(usage, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(
        value, bool) else None


def add_usage(by_model: dict[str, dict[str, Any]], model: str, usage: Any) -> None:
    """Add one call's usage to a turn's counts by model (what its `run` event records as
    `usage_by_model`: the counts, `calls`, `cache_write_tokens` when the provider reported
    cache writes, and `cost` when it reported one)."""
    counts = token_counts(usage)
    if counts is None:
        return
    row = by_model.setdefault(model, {"input_tokens": 0, "output_tokens": 0,
                                      "cached_tokens": 0, "calls": 0})
    for key, value in counts.items():
        row[key] += value
    if written := cache_writes(usage):  # only where a provider reports them
        row["cache_write_tokens"] = row.get("cache_write_tokens", 0) + written
    row["calls"] += 1
    cost = reported_cost(usage)
    if cost is not None:
        row["cost"] = row.get("cost", 0.0) + cost
