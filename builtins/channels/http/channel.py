"""The `http` channel: a program posts a message and receives the reply, whole or streamed.

Endpoints (JSON in, JSON out; loopback by default, see the `http_host` / `http_port`
settings). Every request passes the checks of `http_guard` first: one framing of its body
(400 and the connection closed otherwise), a `Host` header naming this gateway (403), no
`Origin` unless allowed (403), and on every endpoint but `GET /v1/health` the bearer token
(401); POST bodies must be `application/json` (415); WebSocket and other protocol switches
are refused (400, after the token).

- `POST /v1/messages` with `{"content": str, "session_id"?: str, "chat_id"?: str,
  "context"?: object, "stream"?: bool, "attachments"?: [...]}` (text files and images:
  `http_media`). The message goes to the channel manager like any channel's (session,
  admission, scheduling), then the request waits for its turn:
  - whole (default): `200 {"session_id", "content", "outbounds": [...]}` once the turn's
    outbound messages have arrived; `500` with the same fields plus `"error"` when the
    turn failed (the builtin `on_error` sends an outbound of kind `error`), `503` with
    `Retry-After` when an error is `temporary` or the health check then says the tape
    store cannot write (`"reason"` added; a database restarting: retry later);
  - streamed (`"stream": true`): Server-Sent Events `text`, `tool_call`, `tool_result`,
    `error` and `final` as the model produces them, then one `done` event carrying what
    the whole reply would have carried (each event's data one JSON line: `http_wire`);
  - admission: a message for a session whose turn is still running waits for it (a
    follow-up; `http_busy_session` can make it `process`, `steer` or `drop` instead, and
    a plugin's `admit_message` decides before the channel); a dropped message answers
    `202 {"status": "dropped", "reason", "session_id"}`, a steered one
    `202 {"status": "steered", "reason", "session_id"}` (its content joins the running
    turn, whose reply goes to the request that started that turn); a queued
    `follow_up` waits for its own turn (a streamed one gets the SSE comment
    `: queued ...` first).
  - shutdown: a running turn finishes (within the drain time); a queued follow-up is not
    started and is answered at once, like a message arriving once stopping began, with
    `503`, `Retry-After` and a `not_run` body, or an `error` event ending a stream begun
    (`http_reply`): not run, so it may be sent again.
- `GET /v1/health`: `200 {"status": "ok"}`, or `503 {"status": "unavailable"}` while the
  channel is shutting down or the health check (the builtin plugin's: can the tape store
  write?) says why not; `"reason"` is added for a caller sending the right token. The
  check runs at most once a second, however many ask (`http_health`).
- `GET /v1/metrics` (with `otel` on): Prometheus text of the turn, token, tool and hook
  counters; a request's W3C `traceparent` is kept on its envelope (`telemetry.context`).

Errors are JSON `{"error": "..."}`: 400 for invalid JSON or fields (including nesting
deeper than 32, numbers Python cannot hold, lone surrogates, ids longer than
`MAX_SESSION_ID_LENGTH`), 404 for an unknown path, 405 for a wrong method, 408 when the
body did not arrive within `http_body_timeout` (30 s), 413 for a body over 1 MiB (8 MiB
with attachments), 415 for an attachment of a type not sent to models, 503
with `Retry-After` for a message not run (shutting down), 504 when no reply came within
the reply timeout (`http_timeout`, 300 s by default). No error carries a traceback; error
texts pass through `scrub` (the builtin plugin's hides credentials in URLs and absolute
paths of the workspace and home).

How replies find their request: each inbound envelope (a plain mapping, like the cli
channel's) carries the request id in its context (`context["_http_request_id"]`), and the
outbounds of its turn carry it back (`http_match`); never by the task sending them.

What became of a message (dropped, steered, queued, started) and when its turn ended, the
channel learns from the channel manager through the callbacks `Channel` declares:
`manager_attached` (the manager will report), `message_admitted`, `turn_started` and
`turn_finished`. Without an attached manager (the channel run on its own, with another
message handler), a request is answered at its turn's first outbound (an error reported
while the model streams waits for the reply that follows), outbounds of unknown origin go
to the session's oldest waiting request, a dropped or steered message is only answered by
the timeout, and the listener closes as soon as the stop event is set.

The server is hypercorn, on whichever event loop anyio runs (asyncio or trio); with
`http_certfile` and `http_keyfile` it serves HTTPS (`http_server`). `hookline gateway
--host/--port/--allow-remote` reach the channel through `configure_listener`.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

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
from ...telemetry.context import TRACE_CONTEXT_KEY, trace_headers
from .guard import Guard, HttpError, header_map, is_loopback_address, load_token
from .health import RETRY_AFTER, HealthCache, retry_worth
from .match import REQUEST_ID_KEY, Replies
from .media import body_limit, with_attachments
from .payload import MAX_BODY_SIZE, MAX_JSON_DEPTH, _outbound_dict, _parse_message, _read_body
from .reply import NO_TURN, Reply, not_run, retry_headers, whole_answer
from .server import (
    Receive,
    Scope,
    Send,
    _check_binding,
    _lifespan,
    _listen,
    _log_access_hints,
    _serve,
    _server_config,
    _tls_files,
    _watch_disconnect,
)
from .stream import send_events, send_timeout
from .wire import ALWAYS_HEADERS, Disconnected, send_json, websocket_refusal

__all__ = [
    "MAX_BODY_SIZE",
    "MAX_JSON_DEPTH",
    "REQUEST_ID_KEY",
    "STREAMED_EVENTS",
    "HttpChannel",
]

logger = logging.getLogger(__name__)

STREAMED_EVENTS = frozenset({"text", "tool_call", "tool_result", "error", "final"})
"""Stream event kinds forwarded to a streaming request, in the order they come."""

_ROUTES: dict[str, tuple[str, ...]] = {
    "/v1/messages": ("POST",),
    "/v1/health": ("GET", "HEAD"),
}
_BUSY_REASONS = {
    "follow_up": "queued behind the session's running turn",
    "steer": "fed into the session's running turn",
    "drop": "the session has a running turn (http_busy_session = drop)",
}


class HttpChannel(Lifecycle):
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
    ) -> None:
        self.on_receive = on_receive
        self.host = host
        self.port = port
        self.reply_timeout = reply_timeout
        self.body_timeout = body_timeout
        self.allow_remote = allow_remote
        self.busy_session: str | None = None
        """What a message for a session with a running turn does: `follow_up` (the
        default), `process`, `steer` or `drop`; None reads `http_busy_session` at start."""
        self.max_body_size = max_body_size
        self.health = health
        self.scrub = scrub
        self._health_state = HealthCache(None)
        self._managed = False
        self.address: tuple[str, int] | None = None
        self.tls = False
        self._settings = settings
        self._guard = Guard(None, frozenset(), frozenset())
        self._replies = Replies()
        self._closing: anyio.Event | None = None
        self._stopped: anyio.Event | None = None
        self._accepting = False
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
        if host is not None:
            self.host = host
        if port is not None:
            self.port = port
        if allow_remote is not None:
            self.allow_remote = allow_remote

    @property
    def manager_notifies(self) -> bool:
        """True once a channel manager attached itself (`manager_attached`): it reports
        admission outcomes and turn ends."""
        return self._managed

    @property
    def url(self) -> str | None:
        """`http(s)://host:port` once listening (an IPv6 host in brackets), else None."""
        if self.address is None:
            return None
        host, port = self.address
        scheme = "https" if self.tls else "http"
        return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"

    @property
    def token(self) -> str | None:
        """The bearer token clients must send (None before start, or with auth off)."""
        return self._guard.token.value if self._guard.token is not None else None

    # -- Channel -------------------------------------------------------------------------

    async def start(self, stop_event: StopEvent) -> None:
        """Listen and serve until `stop_event` is set or `stop()` is called; then close the
        listener and return once the requests in flight are answered."""
        if self._stopped is not None and not self._stopped.is_set():
            raise RuntimeError("the http channel is already running")
        closing = self._closing = anyio.Event()
        stopped = self._stopped = anyio.Event()
        try:
            settings = self._load_settings()
            host = self.host if self.host is not None else settings.http_host
            port = self.port if self.port is not None else settings.http_port
            if self.reply_timeout is None:
                self.reply_timeout = float(settings.http_timeout)
            if self.body_timeout is None:
                self.body_timeout = float(settings.http_body_timeout)
            if self.busy_session is None:
                self.busy_session = settings.http_busy_session
            allow_remote = (self.allow_remote if self.allow_remote is not None
                            else settings.http_allow_remote)
            tls = _tls_files(settings)
            try:
                listener = _listen(host, port)
            except OSError as exc:
                raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
            try:
                bound = listener.getsockname()[0]
                _check_binding(host, bound, allow_remote, settings.http_auth, tls)
                check_exposure(settings, f"{host} ({bound})", is_loopback_address(bound))
                token = load_token(settings) if settings.http_auth else None
            except BaseException:
                listener.close()
                raise
            self.address = (bound, listener.getsockname()[1])
            self.tls = tls is not None
            self._guard = Guard.build(token, (host, bound), settings.http_allowed_hosts,
                                      settings.http_allowed_origins)
            config = _server_config(listener, self.reply_timeout, tls)
            self._health_state = HealthCache(self.health, scrub=self.scrub)
            if getattr(settings, "otel", False):  # docs/observability.md
                from ...telemetry.gateway import instrument

                instrument(self)
            self._accepting = True
            logger.info("http channel listening on %s", self.url)
            _log_access_hints(self.url or "", bound, token)

            async def shutdown_trigger() -> None:
                async with anyio.create_task_group() as group:
                    async def wait(event: Any) -> None:
                        await event.wait()
                        group.cancel_scope.cancel()

                    group.start_soon(wait, stop_event)
                    group.start_soon(wait, closing)
                self._accepting = False
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
            self._accepting = False
            self._answer_leftovers()
            stopped.set()
        logger.info("http channel stopped")

    async def stop(self) -> None:
        """Close the listener, answer requests whose turn can no longer run (503), and wait
        until every request in flight has its answer."""
        self._accepting = False
        if self._closing is None or self._stopped is None:
            return
        self._closing.set()
        self._answer_leftovers()
        await self._stopped.wait()

    async def send(self, message: Any) -> None:
        """Deliver an outbound message to the request waiting for it."""
        reply = self._replies.for_outbound(message)
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
        reply = self._replies.for_inbound(message)
        if reply is None:
            return stream
        self._mark_started(reply)
        reply.in_model_stage = True
        return AsyncStreamEvents(self._tee(reply, stream), state=stream.state)

    async def _tee(self, reply: Reply, stream: AsyncStreamEvents) -> AsyncIterator[StreamEvent]:
        try:
            async for event in stream:
                if event.kind in STREAMED_EVENTS:
                    data = event.data
                    if event.kind == "error":
                        reply.streamed_error = True
                        data = {**data, "message": self.scrub(str(data.get("message", "")))}
                    reply.emit(event.kind, data)
                yield event
        finally:
            reply.in_model_stage = False

    async def admit_message(self, session_id: str, message: Any,
                            turn: TurnSnapshot) -> AdmitDecision | None:
        """A message for a session whose turn is still running waits for it by default, as
        a chat user expects (`http_busy_session` chooses another admission action)."""
        action = self.busy_session or "follow_up"
        if not turn.is_running or action == "process":
            return None
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
        reply = self._replies.for_inbound(message)
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
        reply = self._replies.for_inbound(message)
        if reply is not None:
            reply.notified = True
            self._mark_started(reply)

    def turn_finished(self, message: Any) -> None:
        """Called when the turn that ran `message` has ended (its outbounds are sent)."""
        reply = self._replies.for_inbound(message)
        if reply is None:
            return
        if not reply.errors and all(o.get("kind") == "error" for o in reply.outbounds):
            error = ("the gateway stopped before the turn finished: it was cancelled and may "
                     "have partly run" if not self._accepting
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
        for reply in self._replies:
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

    # -- ASGI ----------------------------------------------------------------------------

    async def _asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] == "websocket":  # refused by the checks, after the token's
            send = await websocket_refusal(scope, receive, send)
        elif scope["type"] != "http":
            return
        extra = list(ALWAYS_HEADERS)

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        try:
            headers = header_map(scope.get("headers", ()))
            origin = self._guard.check(headers, websocket=scope["type"] == "websocket")
            extra += Guard.cors_headers(origin, preflight=scope["method"] == "OPTIONS")
            await self._route(scope, headers, origin, receive, send_with_headers)
        except HttpError as error:
            await send_json(send_with_headers, error.status,
                            {"error": self.scrub(error.message)}, error.headers)
        except Disconnected:
            pass

    async def _route(self, scope: Scope, headers: dict[str, list[str]], origin: str | None,
                     receive: Receive, send: Send) -> None:
        path, method = scope["path"], scope["method"]
        if path == "/v1/health" and method in ("GET", "HEAD"):
            await self._health(headers, send)
            return
        if method == "OPTIONS" and origin is not None and path in _ROUTES:
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        self._guard.authenticate(headers)
        if path in self.routes and method in ("GET", "HEAD"):
            await self.routes[path](send)
            return
        methods = _ROUTES.get(path)
        if methods is None:
            raise HttpError(404, f"no such endpoint: {path} (the API is POST /v1/messages "
                                 f"and GET /v1/health)")
        if method not in methods:
            raise HttpError(405, f"method {method} is not allowed on {path}; use "
                                 f"{' or '.join(methods)}",
                            [(b"allow", ", ".join(methods).encode())])
        Guard.require_json(headers)
        body = await _read_body(headers, receive, body_limit(self.max_body_size),
                                self.body_timeout if self.body_timeout is not None else 30.0)
        payload = with_attachments(_parse_message(body), len(body), self.max_body_size)
        if not self._accepting:  # not run, and it may be: said so, with when to retry
            await send_json(send, 503, not_run("the gateway is shutting down",
                                               self._session_of(payload)), retry_headers())
            return
        await self._post_message(payload, receive, send, trace_headers(headers))

    async def _health(self, headers: dict[str, list[str]], send: Send) -> None:
        """The status for anyone (load balancers send no token); the reason too for a
        caller with the right token (a wrong one is refused), as it can name the
        database's host and driver."""
        detailed = "authorization" in headers or self._guard.token is None
        if detailed:
            self._guard.authenticate(headers)
        reason = (await self._health_state.reason() if self._accepting
                  else "the gateway is shutting down")
        if reason is None:
            await send_json(send, 200, {"status": "ok"})
        else:
            await send_json(send, 503, {"status": "unavailable", "reason": self.scrub(reason)}
                            if detailed else {"status": "unavailable"})

    async def _post_message(self, payload: dict[str, Any], receive: Receive,
                            send: Send, trace: dict[str, str]) -> None:
        chat_id = payload.get("chat_id", "default")
        session_id = self._session_of(payload)
        reply = Reply(uuid.uuid4().hex, session_id, payload.get("stream", False),
                       notified=self._managed)
        # A plain mapping, like the cli channel's: only the sender's own context reaches
        # the prompt (the request id is private: its key starts with an underscore).
        envelope = {
            "session_id": session_id,
            "channel": self.name,
            "chat_id": chat_id,
            "content": payload["content"],
            "media": payload.get("media", []),
            "context": {**payload.get("context", {}), REQUEST_ID_KEY: reply.id,
                        **({TRACE_CONTEXT_KEY: trace} if trace else {})},
        }
        timeout = self.reply_timeout if self.reply_timeout is not None else 300.0
        self._replies.add(reply)
        try:
            with anyio.fail_after(timeout):
                async with anyio.create_task_group() as group:
                    group.start_soon(_watch_disconnect, receive, group.cancel_scope)
                    try:
                        with anyio.CancelScope(shield=True):  # never cancel admission midway
                            await self.on_receive(envelope)
                    except Exception as exc:
                        logger.exception("http.receive_failed session=%s", session_id)
                        reason = f"the message could not be handed over: {exc}"
                        reply.decide("failed", self.scrub(reason), final=True)
                    if self._managed and not reply.decided.is_set():
                        # The manager did not take the message: resolving its session
                        # failed (an error outbound came back), or it is stopping.
                        if reply.admission_errors:
                            reply.decide("failed", reply.admission_errors[0])
                        else:
                            reply.decide("refused", "the gateway is not accepting messages")
                    with contextlib.suppress(Disconnected):
                        await self._answer(reply, send)
                    group.cancel_scope.cancel()
        except TimeoutError:
            await send_timeout(reply, send, timeout)
        finally:
            self._replies.forget(reply)

    async def _answer(self, reply: Reply, send: Send) -> None:
        if not reply.stream:
            await reply.finished.wait()
            status, body, headers = whole_answer(reply)
            if status == 500 and reply.errors:
                # A turn that failed while the tape store cannot write (a database being
                # restarted), or for a temporary reason, is worth retrying: 503, not 500,
                # with the store's reason when health has one by now.
                reason = await self._health_state.reason()
                if reason is not None:
                    body = {**body, "reason": self.scrub(reason)}
                if reason is not None or retry_worth(reply.errors):
                    status, headers = 503, [RETRY_AFTER]
            await send_json(send, status, body, headers)
            return
        await reply.decided.wait()
        if reply.outcome in NO_TURN:
            await send_json(send, *whole_answer(reply))
            return
        await send_events(reply, send)

    def _session_of(self, payload: dict[str, Any]) -> str:
        return str(payload.get("session_id") or f"{self.name}:{payload.get('chat_id', 'default')}")
