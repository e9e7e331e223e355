"""What a whole session has used, from the `run` and `compact` events of its tape: the
usage lines of `run --usage` and the chat's `/usage` (summed as builtins/terminal/usage.py
says, with the `model_prices` of the settings), and the warning of a `run` that
continued a session grown long."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hookline.builtins.terminal import UsageTotals
from hookline.kernel import Framework

LONG_SESSION_TURNS = 20
"""Turns after which continuing a session is warned about (and past half the budget)."""


def configured_prices() -> Mapping[str, Any]:
    """The `model_prices` setting ({} when the settings cannot be read: the turn itself
    reports a bad config file)."""
    from hookline.builtins.config import SettingsError, load_settings

    try:
        return load_settings().model_prices
    except SettingsError:
        return {}


async def turns_in_context(framework: Framework, session_id: str) -> int:
    """The turns the session's next request holds: the messages that start one since the
    tape's last anchor (a compaction, a handoff), where the context starts, less those kept
    out of it (0 without a tape)."""
    from hookline.builtins.tape import starts_turn

    entries = await _session_entries(framework, session_id, ("message", "anchor"))
    turns = 0
    for entry in entries or []:
        if entry.kind == "anchor":
            turns = 0
        elif starts_turn(entry) and entry.meta.get("context") is not False:
            turns += 1
    return turns


async def session_totals(framework: Framework, session_id: str,
                         prices: Mapping[str, Any]) -> UsageTotals | None:
    """The usage of every turn recorded on the session's tape, and of every compaction
    the user asked for (None without a tape store or a tape for the session)."""
    from hookline.builtins.agent import COMPACT_EVENT

    recorded = await _session_events(framework, session_id, ("run", COMPACT_EVENT))
    if recorded is None:
        return None
    totals = UsageTotals(prices)
    for data in recorded:
        totals.add_run(data)
    return totals


async def _session_events(framework: Framework, session_id: str, names: tuple[str, ...]
                          ) -> list[Any] | None:
    """The data of the session's tape events with one of `names`, oldest first."""
    entries = await _session_entries(framework, session_id, ("event",))
    if entries is None:
        return None
    payloads = [entry.payload if isinstance(entry.payload, dict) else {} for entry in entries]
    return [payload.get("data") for payload in payloads if payload.get("name") in names]


async def _session_entries(framework: Framework, session_id: str, kinds: tuple[str, ...]
                           ) -> list[Any] | None:
    """The session's tape entries of `kinds`, oldest first (None without a tape)."""
    from hookline.builtins.store import as_async_store, scope_store
    from hookline.builtins.tape import SessionError, find_session
    from hookline.kernel.tape import TapeQuery

    store = scope_store(framework)
    if store is None:
        return None
    try:
        tape = await find_session(store, session_id, framework.workspace)
    except SessionError:
        return None
    return list(await as_async_store(store).fetch_all(TapeQuery(tape).kinds(*kinds)))


def long_session(session_id: str, turns: int, last_input: tuple[str | None, int] | None,
                 limit_of: Callable[[str | None], int]) -> str | None:
    """The warning for a `run` that continued a session, when the session is long: more
    than `LONG_SESSION_TURNS` turns since its last anchor, or its last request past half
    of what the context budget allows (`limit_of(model)`: the window times
    `context_budget`); else None. A script calling `run -c` in a loop sends the whole
    conversation every time."""
    tokens = last_input[1] if last_input is not None else 0
    limit = limit_of(last_input[0]) if last_input is not None else 0
    # One turn since the last anchor (the first, or the one after a compaction): what fills
    # the request is the system prompt, the tools or the message, which neither helps.
    if turns <= LONG_SESSION_TURNS and not (turns > 1 and limit and tokens > limit / 2):
        return None
    held = (f"; its last request held {tokens:,} tokens, {100 * tokens / limit:.0f}% of the "
            f"{limit:,} the context budget allows" if limit and tokens else "")
    counted = f"{turns} turn{'' if turns == 1 else 's'}"
    return (f"session {session_id} is long ({counted} in its context{held}), and every "
            f"turn sends it "
            f"again: run without -c (or --session) starts a fresh one, and `hookline compact "
            f"{session_id}` summarises this one")
