"""The `http` channel's health check, cached: what `GET /v1/health` and a failed turn ask.

`GET /v1/health` needs no token (load balancers probe it), and the builtin check commits a
real write to the tape store (a SQLite page, a PostgreSQL heartbeat row). Run per request,
anyone who can reach the port could make the store write as fast as they can send. So the
answer is cached: at most one real check per `interval` (1 s), callers in the meantime get
the last answer, and callers arriving while a check runs wait for that one instead of
starting their own. A check that has not answered within `deadline` (2 s) counts as a
failure, so every probe is answered in time whatever the store does. The reason of a
failure can name the database's host, port and driver; it is logged when the state
changes (healthy to failing, and back), and the channel shows it only to callers that
sent the right token.

`HealthPace` spaces the answers to callers without the token: each client connection gets
at most five a second. Answering costs the event loop that runs the turns, so a stranger
polling in a loop would otherwise slow every turn; a load balancer probing every few
seconds never waits.

`RETRY_AFTER` and `retry_worth` serve the channel's answer to a failed turn: `503` with
`Retry-After` when the failure is temporary, whatever health says by then."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Hashable

import anyio

__all__ = ["RETRY_AFTER", "HealthCache", "HealthPace", "client_fault", "retry_worth"]

logger = logging.getLogger(__name__)

RETRY_AFTER = (b"retry-after", b"2")
"""The header of a `503` for a failed turn: the store recovers within seconds, or health
tells the proxy to go elsewhere."""

_TEMPORARY = "': [temporary] "  # after the stage, in the builtin on_error's text


def retry_worth(errors: list[str]) -> bool:
    """Whether a failed turn's errors say a retry may succeed: one reports a `HooklineError`
    of kind `temporary` (a store that could not write or record, a busy database), which
    the builtin `on_error` shows as `An error occurred at stage '...': [temporary] ...`."""
    return any(_TEMPORARY in error for error in errors)


def client_fault(errors: list[str]) -> bool:
    """Whether a failed turn's errors say the request itself cannot be run: a
    `HooklineError` of kind `invalid_input` (a message longer than the model's context
    window, options the model refuses), which sending it again will not mend."""
    return any(_TEMPORARY.replace("temporary", "invalid_input") in error for error in errors)


class HealthCache:
    """`reason()`: why the gateway cannot serve turns now, or None; see the module."""

    def __init__(self, check: Callable[[], Awaitable[str | None]] | None, *,
                 interval: float = 1.0, deadline: float = 2.0,
                 scrub: Callable[[str], str] = str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.check = check
        self.interval = interval
        self.deadline = deadline
        self.scrub = scrub
        self.clock = clock
        self.checks = 0
        """How many real checks ran."""
        self._reason: str | None = None
        self._checked_at = -math.inf
        self._running: anyio.Event | None = None
        self._failing = False

    @property
    def last_reason(self) -> str | None:
        """The last check's reason (None when it passed, or before the first), at once."""
        return self._reason

    async def reason(self) -> str | None:
        if self.check is None:
            return None
        if self.clock() - self._checked_at < self.interval:
            return self._reason
        if self._running is not None:  # a check is under way: share its answer
            await self._running.wait()
            return self._reason
        running = self._running = anyio.Event()
        try:
            # Shielded: the caller that started the check may go away, the others wait.
            with anyio.CancelScope(shield=True):
                reason = await self._run(self.check)
            self._reason, self._checked_at = reason, self.clock()
            self._log_change(reason)
        finally:
            self._running = None
            running.set()
        return reason

    async def _run(self, check: Callable[[], Awaitable[str | None]]) -> str | None:
        self.checks += 1
        try:
            with anyio.move_on_after(self.deadline):
                return await check()
            return f"the health check did not finish within {self.deadline:g} s"
        except Exception as exc:
            logger.debug("http.health_check_raised", exc_info=True)
            return f"the health check failed: {exc}"

    def _log_change(self, reason: str | None) -> None:
        if reason is not None and not self._failing:
            logger.warning("http.health unavailable: %s", self.scrub(reason))
        elif reason is None and self._failing:
            logger.info("http.health ok again")
        self._failing = reason is not None


class HealthPace:
    """How long a client's next answer waits: at most `rate` answers a second to each
    client (an ASGI `client` pair names one connection), counted from its last answer."""

    def __init__(self, rate: float = 5.0, *, clock: Callable[[], float] = time.monotonic,
                 limit: int = 4096) -> None:
        self.gap = 1.0 / rate
        self.clock = clock
        self.limit = limit
        """Clients remembered before those no longer waiting are forgotten."""
        self._due: dict[Hashable, float] = {}

    def delay(self, client: Hashable) -> float:
        """Seconds to wait before answering `client` (and its turn is booked)."""
        now = self.clock()
        due = max(now, self._due.get(client, now))
        self._due[client] = due + self.gap
        if len(self._due) > self.limit:
            self._due = {key: at for key, at in self._due.items() if at > now}
        return due - now
