"""The http channel's ASGI application: the guard's checks, routing, health, and a posted
message handed to the channel manager and answered (whole or streamed) in the shape of
its route's face (face.py: hookline's own API, or OpenAI's). `HttpChannel` (channel.py)
inherits it; the endpoints are described in docs/http-channel.md."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, ClassVar
from urllib.parse import parse_qs

import anyio

from hookline.kernel.channels import MessageHandler
from hookline.kernel.errors import ErrorKind, HooklineError

from ...tape.requests import REQUEST_CONTEXT
from ...telemetry.context import TRACE_CONTEXT_KEY, trace_headers
from .approvals import APPROVALS_PATH
from .face import Face, Headers, NativeFace
from .guard import Guard, HttpError, header_map
from .health import RETRY_AFTER, HealthCache, HealthPace, client_fault, retry_worth
from .idempotency import idempotency_key
from .kept import REQUEST_ID_HEADER
from .limits import Limits
from .match import REQUEST_ID_KEY
from .media import body_limit
from .openai_body import (
    COMPLETIONS_PATH,
    MODELS_PATH,
    model_in_path,
    model_object,
    models_list,
    openai_path,
)
from .openai_face import OpenAIFace
from .overrides import RequestOverrides
from .payload import _json_object, _read_body
from .reply import NO_TURN, Reply, not_run, retry_headers, upstream_answer, whole_answer
from .requests import Requests
from .server import Listener, Receive, Scope, Send, _lifespan, _watch_disconnect
from .stream import send_events, send_timeout
from .wire import ALWAYS_HEADERS, SSE_HEADERS, Disconnected, send_json, websocket_refusal

__all__ = ["ROUTES", "HttpRoutes"]

logger = logging.getLogger(__name__)

MESSAGES_PATH = "/v1/messages/"
"""`GET /v1/messages/{id}`: the kept answer of a request."""

READ_OFF_LOOP_BYTES = 64 * 1024
"""A body this large is parsed and checked in a worker thread: the JSON of a few MiB (a
long history, or millions of tiny values in a field nobody reads) takes seconds, during
which every other request and stream of the gateway would wait."""

ROUTES: dict[str, tuple[str, ...]] = {
    "/v1/messages": ("POST",),
    "/v1/health": ("GET", "HEAD"),
    COMPLETIONS_PATH: ("POST",),
    MODELS_PATH: ("GET",),
}


class HttpRoutes:
    """The ASGI side of `HttpChannel`: what it reads of the channel is declared here."""

    name: ClassVar[str]
    on_receive: MessageHandler
    scrub: Callable[[str], str]
    routes: dict[str, Callable[[Send], Awaitable[None]]]
    listener: Listener
    limits: Limits
    requests: Requests
    _guard: Guard
    _health_state: HealthCache
    _health_pace: HealthPace
    _managed: bool
    _overrides: RequestOverrides

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

        face: Face = OpenAIFace() if openai_path(scope.get("path", "")) else NativeFace()
        try:
            headers = header_map(scope.get("headers", ()))
            origin = self._guard.check(headers, websocket=scope["type"] == "websocket")
            extra += Guard.cors_headers(origin, preflight=scope["method"] == "OPTIONS")
            await self._route(scope, headers, origin, receive, send_with_headers, face)
        except HttpError as error:
            await face.refused(send_with_headers, error.status, self.scrub(error.message),
                               error.headers, error.code)
        except Disconnected:
            pass

    async def _route(self, scope: Scope, headers: dict[str, list[str]], origin: str | None,
                     receive: Receive, send: Send, face: Face) -> None:
        path, method = scope["path"], scope["method"]
        if path == "/v1/health" and method in ("GET", "HEAD"):
            await self._health(headers, send, scope.get("client"))
            return
        if method == "OPTIONS" and origin is not None and (path in ROUTES or model_in_path(path)):
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        self._guard.authenticate(headers)
        if path in self.routes and method in ("GET", "HEAD"):
            await self.routes[path](send)
            return
        if path == MODELS_PATH and method == "GET":
            await send_json(send, 200, models_list(self._overrides.served))
            return
        if (name := model_in_path(path)) is not None and method in ("GET", "HEAD"):
            self._overrides.check_model(name, field="model", status=404)
            await send_json(send, 200, model_object(name))
            return
        if path.startswith(MESSAGES_PATH) and method == "GET":
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            await self._fetch(path.removeprefix(MESSAGES_PATH), query.get("session_id"), send)
            return
        if path.startswith(APPROVALS_PATH) and method == "POST":
            Guard.require_json(headers)
            body = await _read_body(headers, receive, 64 * 1024, self.limits.body_seconds)
            await send_json(send, 200, self.requests.approvals.answer(
                path.removeprefix(APPROVALS_PATH), _json_object(body)))
            return
        methods = ROUTES.get(path, ("GET",) if model_in_path(path) else None)
        if methods is None:
            raise HttpError(404, f"no such endpoint: {path} (the API is POST /v1/messages, "
                                 f"GET /v1/messages/ID, POST /v1/approvals/ID, "
                                 f"GET /v1/health, and OpenAI's POST /v1/chat/completions, "
                                 f"GET /v1/models and GET /v1/models/ID)")
        if method not in methods:
            raise HttpError(405, f"method {method} is not allowed on {path}; use "
                                 f"{' or '.join(methods)}",
                            [(b"allow", ", ".join(methods).encode())])
        Guard.require_json(headers)
        body = await _read_body(headers, receive, body_limit(self.limits.max_body_size),
                                self.limits.body_seconds)
        payload = await self._read_payload(face, body, headers)
        keyed = idempotency_key(headers, body)
        if keyed is not None:
            try:
                prior = await self.requests.idempotency.prior(
                    *keyed, self._session_of(payload), wait=self.limits.reply_seconds)
            except HooklineError as exc:  # the store cannot say now: nothing ran
                if exc.kind is not ErrorKind.temporary:
                    raise
                raise HttpError(503, self.scrub(f"the key cannot be looked up now: {exc}; "
                                                f"the message was not run: send it again"),
                                [RETRY_AFTER]) from exc
            if prior is not None:  # never a second run: what the first came to
                await self._replay(prior, bool(payload.get("stream")), send, face)
                return
        if not self.listener.accepting:  # not run, and it may be: said so, with when to retry
            if keyed is not None:  # claimed just now for a request that will not run
                await self.requests.idempotency.release(keyed[0], self._session_of(payload))
            await face.whole(send, 503, not_run("the gateway is shutting down",
                                                self._session_of(payload)), retry_headers())
            return
        await self._post_message(payload, receive, send, trace_headers(headers), face, keyed)

    async def _read_payload(self, face: Face, body: bytes, headers: dict[str, list[str]]
                            ) -> dict[str, Any]:
        """The body as a message (`Face.read`), in a worker thread when it is large."""
        read = partial(face.read, body, headers, self._overrides, self.limits.max_body_size)
        return await anyio.to_thread.run_sync(read) if len(body) > READ_OFF_LOOP_BYTES \
            else read()

    async def _health(self, headers: dict[str, list[str]], send: Send, client: Any) -> None:
        """The status for anyone (load balancers send no token), paced; the reason too for
        a caller with the right token (a wrong one is refused), as it can name the
        database's host and driver."""
        detailed = "authorization" in headers or self._guard.token is None
        if detailed:
            self._guard.authenticate(headers)
        elif (delay := self._health_pace.delay(tuple(client or ()))) > 0:
            await anyio.sleep(delay)
        reason = (await self._health_state.reason() if self.listener.accepting
                  else "the gateway is shutting down")
        if reason is None:
            await send_json(send, 200, {"status": "ok"})
        else:
            await send_json(send, 503, {"status": "unavailable", "reason": self.scrub(reason)}
                            if detailed else {"status": "unavailable"})

    async def _post_message(self, payload: dict[str, Any], receive: Receive,
                            send: Send, trace: dict[str, str], face: Face,
                            keyed: tuple[str, str] | None = None) -> None:
        chat_id = payload.get("chat_id", "default")
        session_id = self._session_of(payload)
        reply = Reply(face.request_id, session_id, payload.get("stream", False),
                      payload.get("approvals", False), notified=self._managed)
        send = _with_header(send, (REQUEST_ID_HEADER, reply.id.encode()))
        reply.emit("request", {"id": reply.id, "session_id": session_id})
        marks = {"id": reply.id}
        if keyed is not None:
            self.requests.idempotency.started(*keyed, reply)
            marks.update(key=keyed[0], digest=keyed[1])
        private: dict[str, Any] = {REQUEST_ID_KEY: reply.id, REQUEST_CONTEXT: marks}
        # A plain mapping, like the cli channel's: only the sender's own context reaches
        # the prompt (the request id is private: its key starts with an underscore).
        envelope = {
            "session_id": session_id,
            "channel": self.name,
            "chat_id": chat_id,
            "content": payload["content"],
            "media": payload.get("media", []),
            "context": {**payload.get("context", {}), **private,
                        **({TRACE_CONTEXT_KEY: trace} if trace else {})},
        }
        timeout = self.limits.reply_seconds
        self.requests.replies.add(reply)
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
                        await self._answer(reply, send, face)
                    group.cancel_scope.cancel()
        except TimeoutError:
            await send_timeout(reply, send, timeout, face)
        finally:
            self._settle(reply)
            if keyed is not None:  # claimed: let go once the store shows what it came to
                try:  # however long it queues: a retry elsewhere must not run it meanwhile
                    if reply.decided.is_set() and reply.outcome not in NO_TURN:
                        await reply.finished.wait()
                finally:
                    with anyio.CancelScope(shield=True):
                        # Told to send it again (not run, a temporary failure, a provider's
                        # 429 or 503): the store, not this answer, says whether the retry
                        # runs (a refusal before any tool ran: it does).
                        refused = (reply.upstream or {}).get("retryable") is True
                        again = reply.outcome == "refused" or (reply.finished.is_set() and (
                            _worth_sending_again(reply) or refused))
                        await self.requests.idempotency.release(keyed[0], session_id,
                                                                forget=again)

    def _settle(self, reply: Reply) -> None:
        """Keep the answer for `GET /v1/messages/{id}`: now, or, when the client left
        before the turn ended, once it has (the reply stays matched to it meanwhile)."""
        def keep() -> None:
            self.requests.replies.forget(reply)
            self.requests.kept.keep(reply.id, *_final_answer(reply))

        if reply.finished.is_set() or not reply.decided.is_set() or reply.outcome in NO_TURN:
            keep()
        else:
            reply.on_finish = keep

    async def _replay(self, prior: Reply | tuple[int, dict[str, Any]], stream: bool,
                      send: Send, face: Face) -> None:
        """Answer a retry with what its first request came to (waiting while it runs); a
        stream gets the `request` event and the last one."""
        if isinstance(prior, Reply):
            with anyio.move_on_after(self.limits.reply_seconds):
                await prior.finished.wait()
            if not prior.finished.is_set():
                raise _still_running()
            status, body = _final_answer(prior)
            body = {**body, "id": prior.id}
        else:
            status, body = prior
            if body.get("status") == "running":
                raise _still_running()
        marked = [(b"idempotent-replayed", b"true")]
        if isinstance(body.get("id"), str):  # the first request's id, as it was answered
            marked.append((REQUEST_ID_HEADER, body["id"].encode()))
        if not stream:
            await face.whole(send, status, body, marked)
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*SSE_HEADERS, *marked]})
        last = ("done", body) if status < 400 else (
            "error", {"kind": "replayed", "status": status, "message": body.get("error")})
        chunk = (face.event("request", {"id": body.get("id"), "replayed": True})
                 + face.opening() + face.event(*last) + face.closing())
        await send({"type": "http.response.body", "body": chunk, "more_body": False})

    async def _fetch(self, request_id: str, sessions: list[str] | None, send: Send) -> None:
        """`GET /v1/messages/{id}`: the kept answer, 202 while the turn runs, else 404.
        With `?session_id=`, an answer this process does not keep (another replica's, or
        one from before a restart) is looked for on that session's tape."""
        requests = self.requests
        if any(reply.id == request_id for reply in requests.replies):
            await send_json(send, 202, {"id": request_id, "status": "running"})
            return
        found = requests.kept.get(request_id)
        records = requests.idempotency.records
        if found is None and sessions and records is not None:
            recorded = await records.recall(sessions[-1], "id", request_id, requests.kept.seconds)
            if recorded is not None:
                status, body = recorded[1:]
                found = ((202, {"id": request_id, "status": "running"})
                         if body["status"] == "running" else (status, {**body, "id": request_id}))
        if found is None:
            raise HttpError(404, f"no answer is kept for request {request_id!r} (unknown, or "
                                 f"older than http_reply_retention; from another replica or "
                                 f"before a restart, add ?session_id=<its session>)")
        await send_json(send, *found)

    async def _answer(self, reply: Reply, send: Send, face: Face) -> None:
        if not reply.stream:
            await reply.finished.wait()
            await face.whole(send, *await self._whole(reply))
            return
        await reply.decided.wait()
        if reply.outcome in NO_TURN:
            await face.whole(send, *whole_answer(reply))
            return
        await send_events(reply, send, face)

    async def _whole(self, reply: Reply) -> tuple[int, dict[str, Any], Headers]:
        """The whole answer of an ended request."""
        status, body, headers = whole_answer(reply)
        if status == 500 and reply.upstream is not None:  # the provider's 429 or 503
            return upstream_answer(reply.upstream, body)
        if status == 500 and client_fault(reply.errors):  # too long for the model, say
            return 400, body, headers
        if status == 500 and reply.errors and reply.tool_called:
            if retry_worth(reply.errors):  # the store failed after a tool ran: no 503
                body = {**body, "error": f"{body.get('error')} A tool of this turn had run: "
                                         f"sending the message again would run it again; "
                                         f"look at what it did first."}
        elif status == 500 and reply.errors:
            # A turn that failed for a temporary reason, or while the tape store cannot
            # write (a database being restarted), before any tool ran, is worth retrying:
            # 503, not 500, with the store's reason when health has one. A temporary
            # failure answers at once, with the last check's reason: its turn already
            # waited its deadline.
            temporary = retry_worth(reply.errors)
            reason = (self._health_state.last_reason if temporary
                      else await self._health_state.reason())
            if reason is not None:
                body = {**body, "reason": self.scrub(reason)}
            if reason is not None or temporary:
                status, headers = 503, [RETRY_AFTER]
        return status, body, headers

    def _session_of(self, payload: dict[str, Any]) -> str:
        return str(payload.get("session_id") or f"{self.name}:{payload.get('chat_id', 'default')}")


def _worth_sending_again(reply: Reply) -> bool:
    """A temporary failure (a store that could not write) before any tool of the turn ran:
    sent again, the message runs as if for the first time."""
    return retry_worth(reply.errors) and not reply.tool_called


def _final_answer(reply: Reply) -> tuple[int, dict[str, Any]]:
    """What an ended request answers: its whole reply, or the provider's own refusal."""
    status, body, _headers = whole_answer(reply)
    if status == 500 and reply.upstream is not None:
        status, body, _headers = upstream_answer(reply.upstream, body)
    return status, body


def _with_header(send: Send, header: tuple[bytes, bytes]) -> Send:
    """`send` adding `header` to the response it starts."""
    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), header]}
        await send(message)
    return sending


def _still_running() -> HttpError:
    return HttpError(409, "the first request with this Idempotency-Key is still running; "
                          "retry later with the same key", [(b"retry-after", b"5")])
