"""A loopback OpenAI-compatible chat-completions server for tests (standard library only).

It serves `POST <anything>/chat/completions` on 127.0.0.1 from a background thread and
answers each request with the next scripted `Reply`: server-sent events
(`chat.completion.chunk`s, a usage chunk, `data: [DONE]`) when the request asks for a
stream, a single `chat.completion` JSON otherwise. Every request is recorded (path,
headers, parsed JSON body) so a test can check what the client sent.

    with OpenAIServer([Reply(text="Hi"), Reply(tool_calls=[{"name": "echo",
                       "arguments": {"text": "x"}}])]) as server:
        model = RepublicModel("openai-compatible:test-model", api_base=server.base_url,
                              api_key="k")
        ...
        assert server.requests[0].body["messages"][-1]["content"] == "hello"

`POST <anything>/messages` is answered as Anthropic's Messages API streams (text only,
`x-api-key` checked): the usage's `prompt_tokens`, `cached_tokens` and
`cache_write_tokens` become its `input_tokens` (the rest), `cache_read_input_tokens` and
`cache_creation_input_tokens`.

Use it from tests in this folder with `from openai_server import OpenAIServer, Reply`.
Other helpers: `Reply.failure(status, message)` for HTTP errors, `closed_port_url()` for
a URL nobody listens on, `Reply(hold=True)` for a stream that stays open until the client
disconnects (recorded in `server.disconnects`).
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["OpenAIServer", "RecordedRequest", "Reply", "closed_port_url"]


@dataclass
class Reply:
    """One scripted answer.

    `text` is a string (sent in up to three chunks split at spaces) or a list of exact
    chunks. `tool_calls` items are `{name, arguments (dict or JSON text), id?}`; their
    arguments are streamed in two fragments. With `status` other than 200 the server
    answers with `error` as an OpenAI error body instead. `finish=False` ends the stream
    without the final chunk and `[DONE]`; `hold=True` keeps it open after the content
    until the client disconnects or the server stops.
    """

    text: str | Sequence[str] = ""
    tool_calls: Sequence[Mapping[str, Any]] = ()
    usage: Mapping[str, int] | None = field(
        default_factory=lambda: {"prompt_tokens": 11, "completion_tokens": 7}
    )
    status: int = 200
    error: str | Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    chunk_delay: float = 0.0
    finish: bool = True
    hold: bool = False

    @classmethod
    def failure(
        cls, status: int, message: str = "", *, headers: Mapping[str, str] | None = None
    ) -> Reply:
        return cls(status=status, error=message or f"HTTP {status}", headers=dict(headers or {}))

    def chunks(self) -> list[str]:
        if not isinstance(self.text, str):
            return [piece for piece in self.text if piece]
        words = self.text.split(" ")
        if len(words) < 3:
            return [self.text] if self.text else []
        size = -(-len(words) // 3)
        groups = [words[i : i + size] for i in range(0, len(words), size)]
        pieces = [" ".join(group) for group in groups]
        return [piece + " " for piece in pieces[:-1]] + [pieces[-1]]

    def calls(self) -> list[dict[str, str]]:
        calls = []
        for index, call in enumerate(self.tool_calls):
            arguments = call.get("arguments", {})
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments)
            calls.append(
                {
                    "id": str(call.get("id", f"call_{index + 1}")),
                    "name": str(call["name"]),
                    "arguments": arguments,
                }
            )
        return calls


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.body.get("tools", [])) if isinstance(self.body, dict) else []

    @property
    def tool_names(self) -> list[str]:
        return [tool["function"]["name"] for tool in self.tools]


Responder = Callable[[RecordedRequest], Reply]


class OpenAIServer:
    """The loopback server; use as a context manager (or `start()` / `stop()`).

    `replies` are served in order; a callable `responder` answers instead when the queue
    is empty. With `api_key` set, requests without `Authorization: Bearer <api_key>` get
    a 401. Running out of replies is answered with a 400 naming the request number.
    """

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        api_key: str | None = None,
        responder: Responder | None = None,
        model: str = "test-model",
    ) -> None:
        self.replies: deque[Reply] = deque(replies)
        self.responder = responder
        self.api_key = api_key
        self.model = model
        self.requests: list[RecordedRequest] = []
        self.disconnects = 0
        self.disconnected = threading.Event()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # Lifecycle --------------------------------------------------------------------------

    def start(self) -> OpenAIServer:
        self._stopping.clear()
        handler = type("Handler", (_Handler,), {"owner": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The `api_base` to give clients (ends in /v1)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def add(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    # Internals used by the handler ------------------------------------------------------

    def _record(self, request: RecordedRequest) -> int:
        with self._lock:
            self.requests.append(request)
            return len(self.requests)

    def _next_reply(self, request: RecordedRequest, number: int) -> Reply:
        with self._lock:
            if self.replies:
                return self.replies.popleft()
        if self.responder is not None:
            return self.responder(request)
        return Reply.failure(400, f"openai_server: no scripted reply left for request {number}")

    def _note_disconnect(self) -> None:
        with self._lock:
            self.disconnects += 1
        self.disconnected.set()


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAIServer
    protocol_version = "HTTP/1.0"  # one request per connection; streams end at close

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._send_json(404, _error_body("not found", "not_found_error"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        request = RecordedRequest(
            "POST",
            self.path,
            {key.lower(): value for key, value in self.headers.items()},
            body,
            raw,
        )
        number = self.owner._record(request)
        if self.path.rstrip("/").endswith("/messages"):
            self._messages(request, body, number)
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, _error_body(f"no route {self.path}", "not_found_error"))
            return
        if self.owner.api_key is not None:
            expected = f"Bearer {self.owner.api_key}"
            if request.headers.get("authorization") != expected:
                self._send_json(401, _error_body("Incorrect API key provided", "invalid_api_key"))
                return
        if not isinstance(body, dict):
            self._send_json(400, _error_body("request body must be a JSON object"))
            return
        reply = self.owner._next_reply(request, number)
        try:
            if reply.status != 200:
                message = reply.error if reply.error is not None else f"HTTP {reply.status}"
                payload = (
                    {"error": dict(message)}
                    if isinstance(message, Mapping)
                    else _error_body(str(message))
                )
                self._send_json(reply.status, payload, reply.headers)
            elif body.get("stream"):
                self._stream(reply, str(body.get("model", self.owner.model)))
            else:
                self._send_json(200, _completion(reply, str(body.get("model", self.owner.model))))
        except (BrokenPipeError, ConnectionResetError):
            self.owner._note_disconnect()

    # Responses --------------------------------------------------------------------------

    def _send_json(
        self, status: int, payload: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _event(self, payload: Any, delay: float) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        self.wfile.write(f"data: {data}\n\n".encode())
        self.wfile.flush()
        if delay:
            time.sleep(delay)

    def _stream(self, reply: Reply, model: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        delay = reply.chunk_delay

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": "chatcmpl-loopback",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        self._event(chunk({"role": "assistant", "content": ""}), delay)
        for piece in reply.chunks():
            self._event(chunk({"content": piece}), delay)
        for index, call in enumerate(reply.calls()):
            opening = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": ""},
            }
            self._event(chunk({"tool_calls": [opening]}), delay)
            arguments = call["arguments"]
            middle = len(arguments) // 2
            for fragment in (arguments[:middle], arguments[middle:]):
                if fragment:
                    piece = {"index": index, "function": {"arguments": fragment}}
                    self._event(chunk({"tool_calls": [piece]}), delay)
        if reply.hold:
            self._hold()
            return
        if not reply.finish:
            return
        self._event(chunk({}, "tool_calls" if reply.tool_calls else "stop"), delay)
        if reply.usage is not None:
            usage = dict(reply.usage)
            usage.setdefault(
                "total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
            )
            self._event(
                {
                    "id": "chatcmpl-loopback",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                    "choices": [],
                    "usage": usage,
                },
                0,
            )
        self._event("[DONE]", 0)

    def _messages(self, request: RecordedRequest, body: Any, number: int) -> None:
        """The Messages API: a streamed text reply, or the reply's error."""
        if self.owner.api_key is not None and (
                request.headers.get("x-api-key") != self.owner.api_key):
            self._send_json(401, _error_body("invalid x-api-key", "authentication_error"))
            return
        reply = self.owner._next_reply(request, number)
        if reply.status != 200 or not isinstance(body, dict) or not body.get("stream"):
            self._send_json(reply.status if reply.status != 200 else 400,
                            _error_body(str(reply.error or "a stream was expected")),
                            reply.headers)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        usage = dict(reply.usage or {})
        cached, written = usage.get("cached_tokens", 0), usage.get("cache_write_tokens", 0)
        events: list[dict[str, Any]] = [
            {"type": "message_start", "message": {
                "id": "msg_loopback", "type": "message", "role": "assistant",
                "model": body.get("model", self.owner.model), "content": [],
                "usage": {"input_tokens": usage.get("prompt_tokens", 0) - cached - written,
                          "cache_read_input_tokens": cached,
                          "cache_creation_input_tokens": written, "output_tokens": 1}}},
            {"type": "content_block_start", "index": 0,
             "content_block": {"type": "text", "text": ""}},
            *({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": piece}} for piece in reply.chunks()),
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
             "usage": {"output_tokens": usage.get("completion_tokens", 0)}},
            {"type": "message_stop"}]
        for event in events:
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        self.wfile.flush()

    def _hold(self) -> None:
        """Keep the response open until the client goes away or the server stops."""
        connection: socket.socket = self.connection
        while not self.owner._stopping.is_set():
            readable, _, _ = select.select([connection], [], [], 0.05)
            if readable:
                try:
                    data = connection.recv(1024)
                except OSError:
                    data = b""
                if not data:
                    self.owner._note_disconnect()
                    return


def _error_body(message: str, code: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": code, "code": code}}


def _completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.chunks()) or None}
    calls = reply.calls()
    if calls:
        message["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for call in calls
        ]
    data: dict[str, Any] = {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
    }
    if reply.usage is not None:
        data["usage"] = dict(reply.usage)
    return data


def closed_port_url() -> str:
    """An `api_base` on a loopback port nothing listens on (connection refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
