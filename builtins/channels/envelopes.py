"""Helpers of the channel manager: the envelopes it builds, the state admission keys on,
and the guarded call of a channel's callbacks."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec

from hookline.kernel.envelope import (
    ChannelMessage,
    default_session_id,
    envelope_content,
    get_field,
)
from hookline.kernel.errors import HooklineError
from hookline.kernel.turn import RUNTIME_THREAD_ID

from ..models.failures import waiting_may_mend

__all__ = ["UPSTREAM_KEY", "admission_state", "channel_message", "error_outbound",
           "output_name", "tell", "with_reply_context"]

UPSTREAM_KEY = "_upstream"
"""Context key of an error outbound: the provider's refusal behind it (`status` 429 or 503,
`retry_after`), which a gateway answers with the same status."""

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


def error_outbound(stage: str, error: Exception, message: Any,
                   scrub: Callable[[str], str]) -> dict[str, Any]:
    """The builtin `on_error`'s outbound: the failure, to the conversation's channel, with
    the inbound's private context and, for a provider's 429 or 503, `UPSTREAM_KEY`."""
    outbound = with_reply_context({
        "session_id": get_field(message, "session_id") or default_session_id(message),
        "channel": get_field(message, "channel") or "default",
        "chat_id": get_field(message, "chat_id") or "default",
        "output_channel": get_field(message, "output_channel")
        or get_field(message, "channel") or "default",
        "kind": "error",
        "content": scrub(f"An error occurred at stage '{stage}': {error}"),
    }, message)
    details = (error.details if isinstance(error, HooklineError) else None) or {}
    if details.get("status") in (429, 503):
        # Out of quota (a 429 of kind config) is no reason to send the message again.
        outbound.setdefault("context", {})[UPSTREAM_KEY] = {
            "status": details["status"], "retry_after": details.get("retry_after"),
            "retryable": waiting_may_mend(error)}
    return outbound


def with_reply_context(outbound: dict[str, Any], inbound: Any) -> dict[str, Any]:
    """`outbound` with the private keys (leading `_`) of the inbound's context: a
    channel's own marks, such as the http channel's request id, which tell the channel
    which of its messages an outbound answers, whichever task sends it."""
    context = get_field(inbound, "context")
    if isinstance(context, Mapping):
        private = {key: value for key, value in context.items() if str(key).startswith("_")}
        if private:
            outbound["context"] = private
    return outbound
