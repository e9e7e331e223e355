"""The usage lines of `run --usage` and the chat's `/usage` for a whole session: the
`run` events of its tape summed (builtins/agent/usage.py), with the `model_prices` of
the settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hookline.builtins.agent import UsageTotals
from hookline.kernel import Framework


def configured_prices() -> Mapping[str, Any]:
    """The `model_prices` setting ({} when the settings cannot be read: the turn itself
    reports a bad config file)."""
    from hookline.builtins.config import SettingsError, load_settings

    try:
        return load_settings().model_prices
    except SettingsError:
        return {}


async def session_totals(framework: Framework, session_id: str,
                         prices: Mapping[str, Any]) -> UsageTotals | None:
    """The usage of every turn recorded on the session's tape (None without a tape store
    or a tape for the session)."""
    from hookline.builtins.store import as_async_store
    from hookline.builtins.tape import SessionError, find_session
    from hookline.kernel.tape import TapeQuery

    store = framework.get_tape_store()
    if store is None:
        return None
    try:
        tape = await find_session(store, session_id, framework.workspace)
    except SessionError:
        return None
    totals = UsageTotals(prices)
    for entry in await as_async_store(store).fetch_all(TapeQuery(tape).kinds("event")):
        payload = entry.payload if isinstance(entry.payload, dict) else {}
        if payload.get("name") == "run":
            totals.add_run(payload.get("data"))
    return totals
