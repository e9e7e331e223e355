"""The `http` channel: a program posts a message and receives the reply, whole or streamed.

This module is the `Channel` side: start and stop (the hypercorn server of `server.py`),
outbound messages matched to their request by the request id on the envelope
(`match.py`), and the channel manager's callbacks (`message_admitted`, `turn_started`,
`turn_finished`). The ASGI application, its routes and the answers are `asgi.py`'s. The
endpoints, their errors, admission and shutdown are described in docs/http-channel.md.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from hookline.kernel.channels import (
    AdmitDecision,
    AdmitOutcome,
    Lifecycle,
    MessageHandler,
    StopEvent,
    TurnSnapshot,
)
from hookline.kernel.envelope import get_field
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent

from ...host.sandbox import check_exposure
from ...privacy.redact import redact_credentials
from ...tape.requests import REQUEST_CONTEXT, RequestRecords
from ..envelopes import UPSTREAM_KEY
from .approvals import HttpAsker
from .asgi import HttpRoutes
from .guard import Guard, is_loopback_address, load_token
from .health import HealthCache, HealthPace
from .limits import Limits
from .overrides import RequestOverrides
from .payload import MAX_BODY_SIZE, _outbound_dict
from .reply import Reply
from .requests import Requests
from .server import (
    Listener,
    Send,
    _check_binding,
    _listen,
    _log_access_hints,
    _serve,
    _server_config,
    _tls_files,
)

__all__ = ["HttpChannel"]

logger = logging.getLogger(__name__)

STREAMED_EVENTS = frozenset({"text", "tool_call", "tool_result", "error", "final", "retry",
                             "compaction"})
"""Stream event kinds forwarded to a streaming request, in the order they come."""

_BUSY_REASONS = {
    "follow_up": "queued behind the session's running turn",
    "steer": "fed into the session's running turn",
    "drop": "the session has a running turn (http_busy_session = drop)",
}


class HttpChannel(HttpRoutes, Lifecycle):
    """Serves the HTTP API above and hands each posted message to `on_receive`.

    `host`, `port`, `reply_timeout`, `body_timeout` and `allow_remote` left as None are
    read from `settings` (a Settings or a zero-argument callable returning one) when the
    channel starts, with the token, host, origin and TLS settings; nothing is read at
    construction, so listing channels (onboarding) costs nothing. `port=0` picks a free
    port; `address`, `url` and `token` tell the real ones once listening.

    `health` (an async callable returning None when healthy, else the reason) backs
    `GET /v1/health`, at most once a second; `scrub` cleans every error text it sends.

    Admission outcomes and turn ends reach the channel through `message_admitted`,
    `turn_started` and `turn_finished` from the manager that called `manager_attached`
    (`manager_notifies` tells whether one did); see the module docstring for what happens
    without one.

    Its state is kept by concern: the `listener` (`server.Listener`), the `limits`
    (`Limits`, settings-derived), the `requests` in its care (`Requests`), and the checks
    and health of its requests.
    """

    name = "http"

    def __init__(
        self,
        on_receive: MessageHandler,
        *,
        host: str | None = None,
        port: int | None = None,
        reply_timeout: float | None = None,
        body_timeout: float | None = None,
        allow_remote: bool | None = None,
        settings: Any = None,
        max_body_size: int = MAX_BODY_SIZE,
        health: Callable[[], Awaitable[str | None]] | None = None,
        scrub: Callable[[str], str] = redact_credentials,
        records: RequestRecords | None = None,
    ) -> None:
        self.on_receive = on_receive
        self.listener = Listener(host, port, allow_remote)
        self.limits = Limits(reply_timeout, body_timeout, max_body_size=max_body_size)
        self.requests = Requests(records)
        self.health = health
        self.scrub = scrub
        self._settings = settings
        self._managed = False
        self._guard = Guard(None, frozenset(), frozenset())
        self._overrides = RequestOverrides()
        self._health_state = HealthCache(None)
        self._health_pace = HealthPace()
        self.middleware: Callable[[Any], Any] | None = None
        """Wraps the ASGI app when the channel starts (telemetry's server spans)."""
        self.routes: dict[str, Callable[[Send], Awaitable[None]]] = {}
        """Extra `GET` endpoints behind the token, each answering on its own (`/v1/metrics`)."""

    def _load_settings(self) -> Any:
        settings = self._settings() if callable(self._settings) else self._settings
        if settings is None:
            from hookline.builtins.config import load_settings

            settings = self._settings = load_settings()
        return settings

    def configure_listener(self, host: str | None, port: int | None,
                           allow_remote: bool | None) -> None:
        """`hookline gateway --host/--port/--allow-remote`: what is given (not None) wins
        over the settings when the channel starts."""
        self.listener.configure(host, port, allow_remote)

    @property
    def address(self) -> tuple[str, int] | None:
        """The address bound, once listening."""
        return self.listener.address

    @property
    def manager_notifies(self) -> bool:
        """True once a channel manager attached itself (`manager_attached`): it reports
        admission outcomes and turn ends."""
        return self._managed

    @property
    def url(self) -> str | None:
        """`http(s)://host:port` once listening (an IPv6 host in brackets), else None."""
        return self.listener.url

    @property
    def token(self) -> str | None:
        """The bearer token clients must send (None before start, or with auth off)."""
        return self._guard.token.value if self._guard.token is not None else None

    # -- Channel -------------------------------------------------------------------------

    async def start(self, stop_event: StopEvent) -> None:
        """Listen and serve until `stop_event` is set or `stop()` is called; then close the
        listener and return once the requests in flight are answered."""
        state = self.listener
        if state.stopped is not None and not state.stopped.is_set():
            raise RuntimeError("the http channel is already running")
        closing = state.closing = anyio.Event()
        stopped = state.stopped = anyio.Event()
        try:
            settings = self._load_settings()
            host = state.host if state.host is not None else settings.http_host
            port = state.port if state.port is not None else settings.http_port
            self.limits.read(settings)
            self.requests.retain(settings)
            allow_remote = (state.allow_remote if state.allow_remote is not None
                            else settings.http_allow_remote)
            tls = _tls_files(settings)
            try:
                listener = _listen(host, port)
            except OSError as exc:
                busy = ("; another process listens there (a gateway already running?): stop "
                        "it, or choose another port with --port or http_port"
                        if exc.errno == errno.EADDRINUSE else "")
                raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}{busy}"
                              ) from exc
            try:
                bound = listener.getsockname()[0]
                _check_binding(host, bound, allow_remote, settings.http_auth, tls)
                check_exposure(settings, f"{host} ({bound})", is_loopback_address(bound))
                token = load_token(settings) if settings.http_auth else None
            except BaseException:
                listener.close()
                raise
            state.address = (bound, listener.getsockname()[1])
            state.tls = tls is not None
            self._guard = Guard.build(token, (host, bound), settings.http_allowed_hosts,
                                      settings.http_allowed_origins)
            self._overrides = RequestOverrides.from_settings(settings)
            config = _server_config(listener, self.limits.reply_seconds, tls)
            self._health_state = HealthCache(self.health, scrub=self.scrub)
            if getattr(settings, "otel", False):  # docs/observability.md
                from ...telemetry.gateway import instrument
                from .asgi import ROUTES

                instrument(self, ROUTES)
            state.accepting = True
            logger.info("http channel listening on %s", self.url)
            _log_access_hints(self.url or "", bound, token)

            async def shutdown_trigger() -> None:
                async with anyio.create_task_group() as group:
                    async def wait(event: Any) -> None:
                        await event.wait()
                        group.cancel_scope.cancel()

                    group.start_soon(wait, stop_event)
                    group.start_soon(wait, closing)
                state.accepting = False
                if self._managed and not closing.is_set():
                    # The manager lets running turns finish, then calls stop(): until
                    # then new requests get a clear 503 (and health says so) instead of
                    # a refused connection, which load balancers read as a crash.
                    logger.info("http channel refusing new messages until the running turns "
                                "finish")
                    await closing.wait()
                logger.info("http channel closing the listener on %s", self.url)

            app = self._asgi if self.middleware is None else self.middleware(self._asgi)
            await _serve(app, config, shutdown_trigger)
        finally:
            state.accepting = False
            self._answer_leftovers()
            stopped.set()
        logger.info("http channel stopped")

    async def stop(self) -> None:
        """Close the listener, answer requests whose turn can no longer run (503), and wait
        until every request in flight has its answer."""
        state = self.listener
        state.accepting = False
        if state.closing is None or state.stopped is None:
            return
        state.closing.set()
        self._answer_leftovers()
        await state.stopped.wait()

    async def send(self, message: Any) -> None:
        """Deliver an outbound message to the request waiting for it."""
        reply = self.requests.replies.for_outbound(message)
        if reply is None:
            logger.info("http.outbound_unclaimed session=%s kind=%s",
                        get_field(message, "session_id"), get_field(message, "kind"))
            return
        outbound = _outbound_dict(message)
        if outbound.get("kind") == "error" and outbound.get("content"):
            outbound["content"] = self.scrub(outbound["content"])
        reply.outbounds.append(outbound)
        if outbound.get("kind") == "error" and self._managed and reply.outcome is None:
            # Reported before the manager said what became of the message (resolve_session
            # or admit_message failed): the answer if the message is then refused, a note
            # if it runs anyway.
            reply.admission_errors.append(str(outbound.get("content") or "admission failed"))
        elif outbound.get("kind") == "error":
            error = str(outbound.get("content") or "the turn failed")
            reply.errors.append(error)
            context = get_field(message, "context")
            upstream = context.get(UPSTREAM_KEY) if isinstance(context, dict) else None
            if isinstance(upstream, dict):
                reply.upstream = upstream
            if not reply.streamed_error:
                reply.emit("error", {"kind": "unknown", "message": error})
            # A failed turn sends nothing after its error; an error reported while the
            # model streams (stage run_model) is followed by the turn's reply.
            if not reply.notified and not reply.in_model_stage:
                reply.finish()
        elif not reply.notified:
            reply.finish()

    def stream_events(self, message: Any, stream: AsyncStreamEvents) -> AsyncStreamEvents:
        """Remember which turn serves which request; copy events to streaming requests."""
        reply = self.requests.replies.for_inbound(message)
        if reply is None:
            return stream
        self._mark_started(reply)
        reply.in_model_stage = True
        return AsyncStreamEvents(self._tee(reply, stream), state=stream.state)

    async def _tee(self, reply: Reply, stream: AsyncStreamEvents) -> AsyncIterator[StreamEvent]:
        try:
            async for event in stream:
                if event.kind == "usage" and isinstance(event.data, dict):
                    reply.add_usage(event.data.get("usage"))
                reply.tool_called = reply.tool_called or event.kind == "tool_call"
                if event.kind in STREAMED_EVENTS:
                    data = event.data
                    if event.kind == "error":
                        reply.streamed_error = True
                        data = {**data, "message": self.scrub(str(data.get("message", "")))}
                        if isinstance(data.get("details"), dict):  # not the operator's URL
                            data["details"] = {key: value for key, value in
                                               data["details"].items() if key != "api_base"}
                    reply.emit(event.kind, data)
                yield event
        finally:
            reply.in_model_stage = False

    def approval_asker(self, message: Any) -> HttpAsker | None:
        """A streamed request that asked for approvals is asked (an `approval` event)."""
        reply = self.requests.replies.for_inbound(message)
        if reply is None or not (reply.stream and reply.approvals):
            return None
        return self.requests.approvals.asker(reply, self.limits.approval_seconds)

    async def admit_message(self, session_id: str, message: Any,
                            turn: TurnSnapshot) -> AdmitDecision | None:
        """A message for a session whose turn is still running waits for it by default, as
        a chat user expects (`http_busy_session` chooses another admission action)."""
        action = self.limits.busy_action
        if not turn.is_running or action == "process":
            return None
        marks = (get_field(message, "context") or {}).get(REQUEST_CONTEXT)
        if action == "steer" and isinstance(marks, dict) and "key" in marks:
            # Steered, it would leave no mark for a retry to find: it waits for its turn.
            return AdmitDecision.follow_up("a keyed message waits for its own turn")
        return AdmitDecision(action, _BUSY_REASONS[action])  # type: ignore[arg-type]

    # -- what the manager tells the channel ----------------------------------------------

    def manager_attached(self) -> None:
        """A manager runs this channel and reports what becomes of every message: a message
        it does not take is answered at once, and the listener stays open (answering 503)
        until the manager has let the running turns finish and calls `stop()`."""
        self._managed = True

    def message_admitted(self, message: Any, outcome: AdmitOutcome,
                         reason: str | None = None) -> None:
        """The manager took `message`: `process` (its turn starts now), `queued` (behind
        the session's running turn), `steer` (fed into the running turn), `drop`. A
        `queued` message dropped later was not run: the manager stopped first."""
        reply = self.requests.replies.for_inbound(message)
        if reply is None:
            return
        reply.notified = True
        if outcome == "drop" and reply.outcome == "queued":
            reply.decide("refused", "the gateway stopped before the message's turn started",
                         final=True)
        else:
            reply.decide(outcome, reason)

    def turn_started(self, message: Any) -> None:
        """Called before the turn that runs `message` runs."""
        reply = self.requests.replies.for_inbound(message)
        if reply is not None:
            reply.notified = True
            self._mark_started(reply)

    def turn_finished(self, message: Any) -> None:
        """Called when the turn that ran `message` has ended (its outbounds are sent)."""
        reply = self.requests.replies.for_inbound(message)
        if reply is None:
            return
        if not reply.errors and all(o.get("kind") == "error" for o in reply.outbounds):
            error = ("the gateway stopped before the turn finished: it was cancelled and may "
                     "have partly run" if not self.listener.accepting
                     else "the turn ended without a reply (see the gateway log)")
            reply.errors.append(error)
            reply.emit("error", {"kind": "unknown", "message": error})
        reply.finish()

    @staticmethod
    def _mark_started(reply: Reply) -> None:
        if reply.outcome in (None, "queued"):
            reply.decide("process")
        reply.turn_started = True

    def _answer_leftovers(self) -> None:
        """When the channel stops, the manager has ended every turn: requests still
        waiting get their answer now (503 when their turn never ran)."""
        for reply in self.requests.replies:
            if reply.finished.is_set():
                continue
            if not reply.turn_started:
                reply.decide("refused", "the gateway stopped before the message was handled",
                             final=True)
            else:
                error = "the gateway stopped before the turn finished"
                reply.errors.append(error)
                reply.emit("error", {"kind": "unknown", "message": error})
                reply.finish()


if TYPE_CHECKING:
    from ..protocols import ListenerChannel

    def _listener_channel(channel: HttpChannel) -> ListenerChannel:
        """Never called: mypy checks here that the channel has the shape `hookline gateway`
        hands its listener options to."""
        return channel
