"""The token usage of a turn or a session, for `hookline run --usage` and the chat's
`/usage`: summed from the `usage` stream events (one per model call)."""

from __future__ import annotations

from typing import Any


class UsageTotals:
    """The token usage of one turn, summed over its model calls (each `usage` stream
    event is one call's final count), and the cost when the provider reported one as
    `cost` in its usage (hookline has no price table)."""

    def __init__(self) -> None:
        self.calls = 0
        self.reported = 0
        self.tokens = {"in": 0, "out": 0, "cached": 0}
        self.cost: float | None = None

    def add(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        self.reported += 1
        for key, names in (("in", ("input_tokens", "prompt_tokens")),
                           ("out", ("output_tokens", "completion_tokens")),
                           ("cached", ("cached_tokens",))):
            self.tokens[key] += next((int(usage[name]) for name in names
                                      if isinstance(usage.get(name), int | float)), 0)
        cost = usage.get("cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            self.cost = (self.cost or 0.0) + float(cost)

    def line(self) -> str:
        calls = max(self.calls, self.reported)
        if not self.reported:
            return (f"usage: not reported (the model gave no token counts for its "
                    f"{calls} call{'' if calls == 1 else 's'})" if calls
                    else "usage: no model call finished")
        tokens = self.tokens
        text = (f"usage: {tokens['in']:,} tokens in ({tokens['cached']:,} cached), "
                f"{tokens['out']:,} out, over {calls} model call{'' if calls == 1 else 's'}")
        if self.reported < calls:
            text += f" ({calls - self.reported} reported none)"
        cost = "cost not reported" if self.cost is None else f"cost {self.cost:.6g} (as reported)"
        return f"{text}; {cost}"

