"""Which waiting request of the `http` channel a message belongs to.

Each inbound envelope the channel builds carries its request's id in its context
(`REQUEST_ID_KEY`; the leading underscore keeps it out of the prompt). The manager's
callbacks get that inbound back, and the builtin `render_outbound` and `on_error` copy
the inbound's private context keys onto every outbound they make, so an outbound names
its request too, whichever task sends it. Matching never depends on the task a message
is sent from.

An outbound without the id (a plugin's own `render_outbound` or `on_error`) goes to its
session's oldest waiting request whose turn has started, else to the session's oldest
request not yet taken (an error reported while the manager admits the message, or, with
no manager reporting turns, the turn's first outbound).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from hookline.kernel.envelope import get_field

from .reply import Reply

__all__ = ["REQUEST_ID_KEY", "Replies"]

REQUEST_ID_KEY = "_http_request_id"
"""Context key of the inbound envelope holding the id of the HTTP request it came from;
outbounds carry it back in their own context."""


class Replies:
    """The requests waiting for an answer, by request id."""

    def __init__(self) -> None:
        self._by_id: dict[str, Reply] = {}

    def __iter__(self) -> Iterator[Reply]:
        return iter(list(self._by_id.values()))

    def __len__(self) -> int:
        return len(self._by_id)

    def add(self, reply: Reply) -> None:
        self._by_id[reply.id] = reply

    def forget(self, reply: Reply) -> None:
        """Drop a request once answered, closing its event streams."""
        self._by_id.pop(reply.id, None)
        for stream in (reply.events, reply.event_reader):
            if stream is not None:
                stream.close()

    def for_inbound(self, message: Any) -> Reply | None:
        """The request a message names in its context (an inbound, or an outbound that
        carries the inbound's private context keys), else None."""
        context = get_field(message, "context")
        if not isinstance(context, Mapping) or REQUEST_ID_KEY not in context:
            return None
        return self._by_id.get(str(context[REQUEST_ID_KEY]))

    def for_outbound(self, message: Any) -> Reply | None:
        """The still waiting request an outbound answers: by request id, else by session
        (see the module docstring); None when none waits for it."""
        reply = self.for_inbound(message)
        if reply is None and REQUEST_ID_KEY not in (get_field(message, "context") or {}):
            session_id = get_field(message, "session_id")
            waiting = [r for r in self._by_id.values()
                       if r.session_id == session_id and not r.finished.is_set()]
            reply = (next((r for r in waiting if r.turn_started), None)
                     or next((r for r in waiting if r.outcome is None), None))
        if reply is None or reply.finished.is_set():
            return None
        return reply
