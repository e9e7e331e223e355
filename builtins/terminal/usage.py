"""The token usage of a turn or a session, and what it cost, for `hookline run --usage`
and the chat's `/usage`: summed from the `usage` stream events (one per model call), or
from the `run` events of a session's tape.

The cost is what the provider reported as `cost` in a call's usage, else, when the
`model_prices` setting has the call's model, the tokens times its prices per million
(input tokens the provider served from its cache at the cached price, those it wrote to
its cache at the cache-write price, the other input tokens at the input price). hookline
has no price list of its own: prices change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..agent.usage import cache_writes, reported_cost, token_counts

if TYPE_CHECKING:
    from ..config import ModelPrice

__all__ = ["UsageTotals", "meter_line"]

_SHORT = {"input_tokens": "in", "output_tokens": "out", "cached_tokens": "cached"}


class UsageTotals:
    """Token counts summed over model calls, with their cost: as reported, and from
    `prices` (model spec -> `ModelPrice`) for calls that reported none. `model` is the
    model of calls that do not name one."""

    def __init__(self, prices: Mapping[str, ModelPrice] | None = None,
                 model: str | None = None) -> None:
        self.prices = dict(prices or {})
        self.model = model
        self.calls = 0
        self.reported = 0
        self.tokens = {"in": 0, "out": 0, "cached": 0}
        self.written = 0
        """Input tokens written to the providers' prompt caches."""
        self.cost: float | None = None
        """The cost the provider reported."""
        self.priced: float | None = None
        """The cost of the other calls, from `prices`."""
        self.unpriced: set[str] = set()
        """Models of calls with neither a reported cost nor a price."""
        self.last_input: tuple[str | None, int] | None = None
        """The model and input tokens of the last call added: how full its context was."""

    def add(self, usage: Any, model: str | None = None, summary: bool = False) -> None:
        """One model call's usage (a `usage` stream event's); a `summary` call's input is
        not how full the context is."""
        counts = token_counts(usage)
        if counts is None:
            return
        if not summary:
            self.last_input = (model or self.model, counts["input_tokens"])
        self._add(counts, cache_writes(usage), 1, reported_cost(usage), model or self.model)

    def add_run(self, data: Any) -> None:
        """A turn as its tape's `run` event recorded it: `usage_by_model`, or for a turn
        recorded without it, the `usage` of its last call."""
        if not isinstance(data, dict):
            return
        by_model = data.get("usage_by_model")
        if isinstance(by_model, dict):
            for model, row in by_model.items():
                counts = token_counts(row)
                calls = row.get("calls", 1) if isinstance(row, dict) else 1
                if counts is not None and isinstance(calls, int):
                    self.calls += calls
                    self._add(counts, cache_writes(row), calls, reported_cost(row),
                              str(model))
        elif isinstance(data.get("usage"), dict):
            self.calls += 1
            self.add(data["usage"], data.get("model"))

    def _add(self, counts: dict[str, int], written: int, calls: int, cost: float | None,
             model: str | None) -> None:
        self.reported += calls
        for key, value in counts.items():
            self.tokens[_SHORT[key]] += value
        self.written += written
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost
            return
        if not self.prices:
            return
        price = self.prices.get(model or "")
        if price is None:
            self.unpriced.add(model or "an unnamed model")
            return
        uncached = max(0, counts["input_tokens"] - counts["cached_tokens"] - written)
        self.priced = (self.priced or 0.0) + (
            uncached * price.input + counts["cached_tokens"] * price.cached_input
            + written * price.cache_write_input
            + counts["output_tokens"] * price.output) / 1_000_000

    def line(self, label: str = "usage") -> str:
        calls = max(self.calls, self.reported)
        if not self.reported:
            return (f"{label}: not reported (the model gave no token counts for its "
                    f"{calls} call{'' if calls == 1 else 's'})" if calls
                    else f"{label}: no model call finished")
        tokens = self.tokens
        written = f", {self.written:,} written to the cache" if self.written else ""
        text = (f"{label}: {tokens['in']:,} tokens in ({tokens['cached']:,} cached{written}), "
                f"{tokens['out']:,} out, over {calls} model call{'' if calls == 1 else 's'}")
        if self.reported < calls:
            text += f" ({calls - self.reported} reported none)"
        return f"{text}; {self._cost_text()}"

    def _cost_text(self) -> str:
        parts = [f"{value:.6g} {source}" for value, source in
                 ((self.cost, "as reported"), (self.priced, "from model_prices"))
                 if value is not None]
        if not parts:
            text = "cost not reported"
        elif len(parts) == 1:
            value, _, source = parts[0].partition(" ")
            text = f"cost {value} ({source})"
        else:
            text = f"cost {(self.cost or 0.0) + (self.priced or 0.0):.6g} ({', '.join(parts)})"
        if self.unpriced:
            text += f" (no price in model_prices for {', '.join(sorted(self.unpriced))})"
        return text


def meter_line(tokens: int, window: int) -> str:
    """How full the context of the last model call was: `context: N of W tokens (P%)`."""
    share = 100 * tokens / window if window else 0.0
    return f"context: {tokens:,} of {window:,} tokens ({share:.0f}%)"
