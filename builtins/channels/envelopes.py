"""Helpers of the channel manager: the envelopes it builds, the state admission keys on,
and the guarded call of a channel's callbacks."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec

from hookline.kernel.envelope import ChannelMessage, envelope_content, get_field
from hookline.kernel.turn import RUNTIME_THREAD_ID

__all__ = ["admission_state", "channel_message", "output_name", "tell"]

logger = logging.getLogger("hookline.builtins.channels.manager")
"""The manager's logger: these lines are the manager's own."""

_P = ParamSpec("_P")


def tell(callback: Callable[_P, None], *args: _P.args, **kwargs: _P.kwargs) -> None:
    """Call one of a channel's callbacks; a channel's bookkeeping must not break
    scheduling, so a failure is logged and swallowed."""
    try:
        callback(*args, **kwargs)
    except Exception:
        logger.exception("channel.notify_failed callback=%s", callback.__qualname__)


def admission_state(session_id: str, message: Any) -> dict[str, Any]:
    """The state admission and steering use for a message (the `admit_message` rules)."""
    state: dict[str, Any] = {"session_id": session_id}
    context = get_field(message, "context")
    if isinstance(context, Mapping) and context.get("thread_id"):
        state[RUNTIME_THREAD_ID] = str(context["thread_id"])
    return state


def channel_message(name: str, message: Any) -> ChannelMessage:
    """An outbound envelope as the channel message sent to channel `name` (the `dispatch_outbound`
    rules): session id default `<channel>:default`, chat id default `default`, kind `normal`."""
    if isinstance(message, ChannelMessage):
        return message
    channel = str(get_field(message, "channel") or name)
    context = get_field(message, "context")
    return ChannelMessage(
        session_id=str(get_field(message, "session_id") or f"{channel}:default"),
        channel=channel,
        content=envelope_content(message),
        chat_id=str(get_field(message, "chat_id") or "default"),
        kind=str(get_field(message, "kind") or "normal"),
        context=dict(context) if isinstance(context, Mapping) else {},
        media=list(get_field(message, "media") or []),
        output_channel=name,
    )


def output_name(message: Any) -> str:
    name = get_field(message, "output_channel") or get_field(message, "channel")
    return "" if name is None else str(name)
