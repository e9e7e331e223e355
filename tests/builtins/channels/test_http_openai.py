"""The OpenAI face of the http channel on its own: what a chat completion request is read
for (the session's three sources, the last user message, the refusals), and how a turn's
events become chunks, down to the ends a gateway test cannot easily reach (a reply longer
than its deltas, a queued message not run)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hookline.builtins.channels.http.guard import HttpError
from hookline.builtins.channels.http.openai_body import problem, read_completion
from hookline.builtins.channels.http.openai_face import OpenAIFace
from hookline.builtins.channels.http.overrides import RequestOverrides


def body(**fields: Any) -> bytes:
    return json.dumps({"model": "offline", "messages": [{"role": "user", "content": "hi"}],
                       **fields}).encode()


def chunks(raw: bytes) -> list[Any]:
    """The data of each Server-Sent Event, `[DONE]` as the string."""
    events = [event.removeprefix("data: ") for event in raw.decode().split("\n\n") if event]
    return [event if event == "[DONE]" else json.loads(event) for event in events]


def test_the_session_is_the_header_else_the_user_else_the_default() -> None:
    header = {"x-hookline-session": ["notes"]}
    assert read_completion(body(user="alice"), header, 1024).session_id == "notes"
    assert read_completion(body(user="alice"), {}, 1024).session_id == "openai:alice"
    assert read_completion(body(), {}, 1024).session_id == "openai:default"
    assert read_completion(body(user=""), {}, 1024).session_id == "openai:default"
    with pytest.raises(HttpError, match="X-Hookline-Session header must not contain control"):
        read_completion(body(), {"x-hookline-session": ["a\x01b"]}, 1024)
    with pytest.raises(HttpError, match="made from field user is 263 characters long"):
        read_completion(body(user="u" * 256), {}, 1024)


def test_the_last_user_message_is_the_input_and_the_rest_is_ignored() -> None:
    messages = [{"role": "system", "content": "be brief"},
                {"role": "user", "content": "old"},
                {"role": "user", "content": [{"type": "text", "text": "two"},
                                             {"type": "text", "text": "parts"}]},
                {"role": "assistant", "content": "an answer after it"}]
    request = read_completion(body(messages=messages, temperature=0.2, n=3, stream=True,
                                   stream_options={"include_usage": True}), {}, 1024)
    assert (request.content, request.stream, request.include_usage) == ("two\nparts", True,
                                                                         True)


@pytest.mark.parametrize(("fields", "status", "says"), [
    ({"model": None}, 400, "field model is required"),
    ({"model": 4}, 400, "field model must be a string, got a number"),
    ({"messages": []}, 400, "field messages is required"),
    ({"messages": [{"role": "system", "content": "x"}]}, 400, "no message with role user"),
    ({"messages": ["hi"]}, 400, "messages[0] must be an object"),
    ({"messages": [{"role": "user", "content": "  "}]}, 400, "is empty"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400,
     "messages[0].content[0] is a part of type 'image_url'; only text parts are taken"),
    ({"stream_options": {"include_usage": "yes"}}, 400, "include_usage must be true or false"),
    ({"messages": [{"role": "user", "content": "x" * 2000}]}, 413, "larger than 1024 bytes"),
])
def test_what_a_request_cannot_give_is_refused_saying_what(fields: dict[str, Any], status: int,
                                                          says: str) -> None:
    with pytest.raises(HttpError) as refused:
        read_completion(body(**fields), {}, 1024)
    assert refused.value.status == status and says in refused.value.message


def test_a_model_is_one_the_gateway_serves_else_404_model_not_found() -> None:
    face = OpenAIFace()
    overrides = RequestOverrides(frozenset({"openai:gpt-4o-mini", "fast"}),
                                 default="openai:gpt-4o-mini")
    assert face.read(body(model="openai:gpt-4o-mini"), {}, overrides, 1024)["context"] == {}
    assert face.read(body(model="fast"), {}, overrides, 1024)["context"] == {"model": "fast"}
    assert overrides.served == ["openai:gpt-4o-mini", "fast"]
    with pytest.raises(HttpError) as unknown:
        face.read(body(model="gpt-5"), {}, overrides, 1024)
    assert (unknown.value.status, unknown.value.code) == (404, "model_not_found")
    assert "model 'gpt-5' is not a model this gateway serves" in unknown.value.message


def test_a_turns_events_become_chunks_ending_with_what_the_deltas_missed() -> None:
    face = OpenAIFace(request_id="abc", model="m", include_usage=True)
    raw = face.opening() + face.event("request", {"id": "abc", "session_id": "s"})
    for kind, data in [("text", {"delta": "Hel"}), ("tool_call", {"tool_calls": []}),
                       ("text", {"delta": "lo"}),
                       ("done", {"content": "Hello!", "usage": {"input_tokens": 9,
                                                                "output_tokens": 2}})]:
        raw += face.event(kind, data)
    sent = chunks(raw + face.closing())
    assert {c["id"] for c in sent[:-1]} == {"chatcmpl-abc"}
    deltas = [c["choices"][0]["delta"] for c in sent[:-2]]
    assert deltas == [{"role": "assistant", "content": ""}, {"content": "Hel"},
                      {"content": "lo"}, {"content": "!"}, {}]
    assert sent[-3]["choices"][0]["finish_reason"] == "stop"
    assert sent[-2]["choices"] == [] and sent[-2]["usage"]["total_tokens"] == 11
    assert sent[-1] == "[DONE]"


def test_a_stream_without_a_reply_ends_with_its_error() -> None:
    face = OpenAIFace(model="m")
    face.event("error", {"kind": "not_run", "status": 503, "message": "not run; send again"})
    error, done = chunks(face.closing())
    assert error == {"error": {"message": "not run; send again", "param": None,
                               "type": "service_unavailable_error", "code": "not_run"}}
    assert done == "[DONE]"
    failed = OpenAIFace(model="m")
    assert chunks(failed.event("done", {"content": "", "error": "it broke"}))[0]["error"][
        "code"] == "turn_failed"
    assert chunks(failed.closing()) == ["[DONE]"], "the error was said once"


def test_answers_without_a_reply_of_their_own_are_errors() -> None:
    reply = {"session_id": "s", "content": "hi", "outbounds": []}
    assert problem(200, reply) is None
    assert problem(200, {**reply, "status": "ok"}) is None
    assert problem(202, {"status": "dropped", "reason": "busy"}) == (
        409, "the message was dropped: busy", "dropped")
    assert problem(200, {**reply, "status": "interrupted", "error": "cut"}) == (
        500, "cut", "interrupted")
    assert problem(503, {**reply, "error": "store down", "reason": "disk full"}) == (
        503, "store down (disk full)", None)


@pytest.mark.anyio
async def test_a_large_body_is_read_off_the_event_loop() -> None:
    """Millions of tiny values in a field nobody reads take seconds to parse and check:
    a body over READ_OFF_LOOP_BYTES is read in a worker thread, a small one where it is."""
    import threading
    from types import SimpleNamespace

    from hookline.builtins.channels.http.asgi import READ_OFF_LOOP_BYTES, HttpRoutes
    from hookline.builtins.channels.http.limits import Limits

    threads: list[threading.Thread] = []

    class Face:
        def read(self, raw: bytes, *args: Any) -> dict[str, Any]:
            threads.append(threading.current_thread())
            return {"content": "hi", "size": len(raw)}

    routes = SimpleNamespace(_overrides=RequestOverrides(), limits=Limits())
    small = body()
    large = body(pad=[[]] * (READ_OFF_LOOP_BYTES // 3))
    for raw in (small, large):
        payload = await HttpRoutes._read_payload(routes, Face(), raw, {})  # type: ignore[arg-type]
        assert payload["size"] == len(raw)
    assert threads[0] is threading.main_thread() and threads[1] is not threading.main_thread()
