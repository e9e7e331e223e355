"""OpenAI's chat completions API, read and written: what `POST /v1/chat/completions` takes
from a body, and the objects the OpenAI-compatible routes answer with (`chat.completion`,
`chat.completion.chunk`, the model list, the error shape), as OpenAI's API reference
describes them. docs/http-channel.md ("OpenAI-compatible routes") says what is taken and what
is ignored."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .guard import SESSION_HEADER, HttpError
from .health import client_fault
from .media import json_type
from .payload import _check_values, _json_object, check_session_value
from .wire import dumps

__all__ = [
    "COMPLETIONS_PATH",
    "DEFAULT_SESSION",
    "MODELS_PATH",
    "CompletionRequest",
    "chunk",
    "completion",
    "error_object",
    "model_in_path",
    "model_object",
    "models_list",
    "openai_path",
    "problem",
    "read_completion",
    "sse_data",
]

COMPLETIONS_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
MODEL_PATH = f"{MODELS_PATH}/"
"""`GET /v1/models/{id}`: one model (the SDK's `models.retrieve`)."""
OPENAI_RESOURCES = frozenset({
    "assistants", "audio", "batches", "chat", "completions", "containers", "conversations",
    "embeddings", "evals", "files", "fine_tuning", "images", "models", "moderations",
    "realtime", "responses", "threads", "uploads", "vector_stores"})
"""The first part of the paths of OpenAI's API after `/v1/`."""
USER_PREFIX = "openai:"
"""A session made from the `user` field is `openai:<user>`."""
DEFAULT_SESSION = f"{USER_PREFIX}default"

_KINDS = {400: ("invalid_request_error", "invalid_request"),
          401: ("authentication_error", "invalid_api_key"),
          403: ("permission_error", "forbidden"),
          404: ("not_found_error", "not_found"),
          405: ("invalid_request_error", "method_not_allowed"),
          408: ("timeout_error", "request_timeout"),
          409: ("conflict_error", "conflict"),
          413: ("invalid_request_error", "request_too_large"),
          415: ("invalid_request_error", "unsupported_media_type"),
          422: ("invalid_request_error", "idempotency_key_reused"),
          429: ("rate_limit_error", "rate_limit_exceeded"),
          500: ("server_error", "turn_failed"),
          503: ("service_unavailable_error", "unavailable"),
          504: ("timeout_error", "timeout")}
"""OpenAI's error `type` and a default `code` for each status the gateway answers."""
_NATIVE_CODES = frozenset({"not_run", "dropped", "steered", "interrupted", "running"})
"""`status` values of a native answer that name its error best."""


@dataclass(frozen=True)
class CompletionRequest:
    """What a chat completion request asks of the gateway."""

    content: str
    """The text of the last user message: the turn's input."""
    session_id: str
    model: str
    stream: bool
    include_usage: bool


def read_completion(body: bytes, headers: Mapping[str, list[str]],
                    max_content: int) -> CompletionRequest:
    """The request in `body`; 400 naming the field for anything it cannot take, 413 for
    a message over `max_content` bytes."""
    data = _json_object(body)
    if not isinstance(data, dict):
        raise HttpError(400, "the body must be a JSON object with model and messages (a "
                             "chat completion request)")
    _check_values(data)
    model = _field(data, "model", str)
    if not model or not model.strip():
        raise HttpError(400, "field model is required: a name GET /v1/models lists")
    messages = _field(data, "messages", list)
    if not messages:
        raise HttpError(400, "field messages is required: a list ending with the user's "
                             "message")
    options = _field(data, "stream_options", dict) or {}
    include_usage = options.get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise HttpError(400, f"field stream_options.include_usage must be true or false, got "
                             f"{json_type(include_usage)}")
    content = _last_user_text(messages)
    if len(content.encode()) > max_content:
        raise HttpError(413, f"the last user message is larger than {max_content} bytes")
    return CompletionRequest(content, _session(data, headers), model,
                             bool(_field(data, "stream", bool)), include_usage)


def _field(data: dict[str, Any], name: str, kind: type) -> Any:
    """`data[name]` when it has type `kind`; None when missing or null; 400 otherwise."""
    value = data.get(name)
    if value is not None and not isinstance(value, kind):
        names = {str: "a string", list: "an array", dict: "an object", bool: "true or false"}
        raise HttpError(400, f"field {name} must be {names[kind]}, got {json_type(value)}")
    return value


def _last_user_text(messages: list[Any]) -> str:
    """The text of the last message whose role is `user` (the earlier ones are the
    client's history, which the session's tape already holds)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise HttpError(400, f"{where} must be an object with role and content, got "
                                 f"{json_type(message)}")
        if message.get("role") != "user":
            continue
        text = _text(message.get("content"), f"{where}.content")
        if not text.strip():
            raise HttpError(400, f"{where}.content, the last user message, is empty")
        return text
    raise HttpError(400, "messages has no message with role user: the last one is the "
                         "turn's input")


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise HttpError(400, f"{where} must be a string or an array of text parts, got "
                             f"{json_type(content)}")
    texts: list[str] = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind != "text" or not isinstance(part.get("text"), str):
            shown = f"a part of type {kind!r}" if isinstance(kind, str) else json_type(part)
            raise HttpError(400, f"{where}[{index}] is {shown}; only text parts are taken "
                                 f"(send images and files to POST /v1/messages as "
                                 f"attachments)")
        texts.append(part["text"])
    return "\n".join(texts)


def _session(data: dict[str, Any], headers: Mapping[str, list[str]]) -> str:
    """The header's session, else `openai:<user>`, else `DEFAULT_SESSION`."""
    given = headers.get(SESSION_HEADER)
    if given:
        # Header values arrive as latin-1 (what HTTP names); clients send ids as UTF-8.
        try:
            session = given[-1].encode("latin-1").decode("utf-8")
        except UnicodeError:
            raise HttpError(400, "the X-Hookline-Session header is not UTF-8") from None
        check_session_value("the X-Hookline-Session header", session)
        return session
    user = _field(data, "user", str)
    if not user:  # front ends send "" for no user
        return DEFAULT_SESSION
    check_session_value("field user", user)
    session = USER_PREFIX + user
    check_session_value(f"the session {USER_PREFIX}<user> made from field user", session)
    return session


def problem(status: int, body: dict[str, Any]) -> tuple[int, str, str | None] | None:
    """The error a native answer (`status`, `body`) stands for: its status, message and
    code; None when it is a reply. A message dropped or steered (202 natively) is 409: it
    got no reply of its own; a replayed turn recorded as interrupted (200) is 500."""
    native = body.get("status")
    if status == 200 and "error" not in body and native in (None, "ok"):
        return None
    message = str(body.get("error") or "")
    if native == "dropped":
        status, message = 409, f"the message was dropped: {body.get('reason')}"
    elif native == "steered":
        status, message = 409, ("the message was fed into the session's running turn; "
                                "that turn's reply goes to the request that started it")
    elif status < 400:  # a stream's end: the provider's refusal behind it, else a failure
        upstream = body.get("upstream")
        status = int(upstream["status"]) if isinstance(upstream, dict) and isinstance(
            upstream.get("status"), int) else 400 if client_fault([message]) else 500
    if body.get("reason") and native not in ("dropped", "steered"):
        message = f"{message} ({body['reason']})"
    return status, message or "the request failed", native if native in _NATIVE_CODES else None


def error_object(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    kind, default = _KINDS.get(status, ("server_error" if status >= 500
                                        else "invalid_request_error", None))
    return {"error": {"message": message, "type": kind, "param": None,
                      "code": code or default}}


def usage_object(usage: Any) -> dict[str, Any]:
    """A native reply's `usage` (absent when the model reported none: zeros)."""
    usage = usage if isinstance(usage, dict) else {}
    prompt, output = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
    return {"prompt_tokens": prompt, "completion_tokens": output,
            "total_tokens": prompt + output,
            "prompt_tokens_details": {"cached_tokens": int(usage.get("cached_tokens", 0))}}


def completion(completion_id: str, created: int, model: str, content: str,
               usage: Any) -> dict[str, Any]:
    """A `chat.completion` object."""
    return {"id": completion_id, "object": "chat.completion", "created": created,
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": usage_object(usage)}


def chunk(completion_id: str, created: int, model: str, delta: dict[str, Any] | None,
          finish_reason: str | None = None, usage: Any = None) -> dict[str, Any]:
    """A `chat.completion.chunk` object: one delta, or (`delta` None) the usage alone."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None,
                                         "finish_reason": finish_reason}]
    data: dict[str, Any] = {"id": completion_id, "object": "chat.completion.chunk",
                            "created": created, "model": model, "choices": choices}
    if delta is None:
        data["usage"] = usage_object(usage)
    return data


def sse_data(data: Any) -> bytes:
    """One Server-Sent Event as OpenAI streams them: a `data:` line, no event name."""
    return b"data: " + (data if isinstance(data, bytes) else dumps(data)) + b"\n\n"


def models_list(names: list[str]) -> dict[str, Any]:
    """`GET /v1/models`: the names a request may give, from the settings (no provider is
    asked: the route stays fast and works offline)."""
    return {"object": "list", "data": [model_object(name) for name in names]}


def openai_path(path: str) -> bool:
    """Whether `path` is one of OpenAI's API, served here or not: its errors then take
    OpenAI's shape, the only one an OpenAI SDK reads."""
    parts = path.split("/", 3)
    return len(parts) > 2 and parts[1] == "v1" and parts[2] in OPENAI_RESOURCES


def model_in_path(path: str) -> str | None:
    """The model `GET /v1/models/{id}` names; None for another path."""
    return path.removeprefix(MODEL_PATH) or None if path.startswith(MODEL_PATH) else None


def model_object(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "hookline"}
