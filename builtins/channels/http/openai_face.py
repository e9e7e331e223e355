"""The face of `POST /v1/chat/completions` and `GET /v1/models`: the gateway's answers in
OpenAI's shape, so that the OpenAI SDK, llm, aider or a chat front end can talk to the
agent. The request runs as `POST /v1/messages` would run it (face.py); only the final
text and the usage come back, the tools having run in the gateway.

An error that says nothing about retrying carries `x-should-retry: false`, which the
OpenAI SDK obeys: it would otherwise send a failed or timed-out request again by itself,
running the turn (and its tools) a second time. An answer with `Retry-After` (the message
was not run, the provider is busy) leaves the client to its own rule.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .face import Headers, new_request_id
from .openai_body import chunk, completion, error_object, problem, read_completion, sse_data
from .overrides import RequestOverrides
from .wire import Send, send_json

__all__ = ["OpenAIFace"]

_NO_RETRY = (b"x-should-retry", b"false")
_DONE = sse_data(b"[DONE]")


@dataclass
class OpenAIFace:
    """One request's answer as a chat completion, whole or streamed as chunks."""

    request_id: str = field(default_factory=new_request_id)
    model: str = ""
    """The model the request named, which every object it gets names back."""
    include_usage: bool = False
    created: int = field(default_factory=lambda: int(time.time()))
    _streamed: str = field(default="", init=False)
    """The text the deltas carried so far."""
    _error: tuple[int, str, str | None] | None = field(default=None, init=False)
    """The last error event: status, message, code."""
    _ended: bool = field(default=False, init=False)
    """`done` came: the reply, or its error, was sent."""

    @property
    def completion_id(self) -> str:
        """The request's id (`GET /v1/messages/{id}` takes it) in OpenAI's form; a
        replay's is its first request's."""
        return f"chatcmpl-{self.request_id}"

    def read(self, body: bytes, headers: Mapping[str, list[str]], overrides: RequestOverrides,
             max_body_size: int) -> dict[str, Any]:
        request = read_completion(body, headers, max_body_size)
        overrides.check_model(request.model, "model", status=404)
        self.model, self.include_usage = request.model, request.include_usage
        context = {} if request.model == overrides.default else {"model": request.model}
        return {"content": request.content, "session_id": request.session_id,
                "stream": request.stream, "context": context}

    async def whole(self, send: Send, status: int, body: dict[str, Any],
                    headers: Headers) -> None:
        found = problem(status, body)
        if found is not None:
            await self.refused(send, found[0], found[1], headers, found[2])
            return
        self.request_id = str(body.get("id") or self.request_id)
        await send_json(send, 200, completion(self.completion_id, self.created, self.model,
                                              str(body.get("content") or ""),
                                              body.get("usage")), headers)

    async def refused(self, send: Send, status: int, message: str, headers: Headers,
                      code: str | None = None) -> None:
        retry = any(name.lower() == b"retry-after" for name, _ in headers)
        await send_json(send, status, error_object(status, message, code),
                        [*headers, *(() if retry else (_NO_RETRY,))])

    def opening(self) -> bytes:
        return self._chunk({"role": "assistant", "content": ""})

    def event(self, kind: str, data: Any) -> bytes:
        """Text as content deltas, and the end; tool calls and the rest stay inside."""
        if kind == "request" and isinstance(data, dict) and data.get("id"):
            self.request_id = str(data["id"])
        if kind == "text" and isinstance(data, dict) and data.get("delta"):
            self._streamed += str(data["delta"])
            return self._chunk({"content": str(data["delta"])})
        if kind == "error" and isinstance(data, dict):
            status = data.get("status") or (504 if data.get("kind") == "temporary" else 500)
            code = data.get("kind") if data.get("kind") in ("not_run", "replayed") else None
            self._error = (int(status), str(data.get("message") or ""), code)
        if kind == "done" and isinstance(data, dict):
            return self._done(data)
        return b""

    def closing(self) -> bytes:
        """`[DONE]`, after the error of a stream that ended without a reply."""
        if self._ended:
            return _DONE
        status, message, code = self._error or (500, "the stream ended without a reply", None)
        return sse_data(error_object(status, message, code)) + _DONE

    def _done(self, body: dict[str, Any]) -> bytes:
        """The end of the reply: what the deltas did not carry (all of it in a replay),
        the finish, and the usage when asked for; or the turn's error."""
        self._ended = True
        found = problem(200, body)
        if found is not None:
            return sse_data(error_object(*found))
        content = str(body.get("content") or "")
        rest = content[len(self._streamed):] if content.startswith(self._streamed) else ""
        out = self._chunk({"content": rest}) if rest else b""
        out += self._chunk({}, "stop")
        if self.include_usage:
            out += sse_data(chunk(self.completion_id, self.created, self.model, None,
                                  usage=body.get("usage")))
        return out

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return sse_data(chunk(self.completion_id, self.created, self.model, delta,
                              finish_reason))
