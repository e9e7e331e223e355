"""Attachments of `POST /v1/messages`, over real HTTP to a real `hookline gateway` whose
model is a real OpenAI-compatible server on loopback: text files reach the model inlined
as `hookline run -a` inlines them, images as `image_url` parts with their data URL, and
every refused attachment is a 4xx JSON error sent before the model is called."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from gateway_support import Gateway, gateway_env, post, post_stream, start_gateway_process
from openai_server import OpenAIServer, Reply

PNG = base64.b64decode(  # a 1x1 transparent PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")
GIF = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"
MIB = 1024 * 1024


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def png_item(**extra: Any) -> dict[str, Any]:
    return {"name": "pixel.png", "mime_type": "image/png", "data": b64(PNG), **extra}


@pytest.fixture(scope="module")
def model() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def gateway(model: OpenAIServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    root = tmp_path_factory.mktemp("attachments")
    workspace = root / "workspace"
    workspace.mkdir()
    env = gateway_env(root / "home", HOOKLINE_MODEL="openai-compatible:test-model",
                      HOOKLINE_API_BASE=model.base_url, HOOKLINE_API_KEY="sk-test")
    gateway = start_gateway_process(["--port", "0"], env, workspace)
    try:
        yield gateway
    finally:
        gateway.end()


def user_content(model: OpenAIServer) -> Any:
    return model.requests[-1].messages[-1]["content"]


def test_text_files_and_images_reach_the_model(gateway: Gateway, model: OpenAIServer) -> None:
    model.add(Reply(text="seen"))
    reply = post(gateway.url, {"content": "what is this?", "session_id": "files",
                               "attachments": [
        {"name": "calc.py", "mime_type": "text/x-python", "data": b64("print(1 + 1)\n")},
        {"name": "conf.json", "mime_type": "application/json; charset=utf-8",
         "url": "data:application/json,%7B%22a%22%3A%201%7D"},
        png_item(),
        {"name": "dot.gif", "mime_type": "image/gif", "url": "data:image/gif;base64," + b64(GIF)},
    ]})
    assert reply.status == 200, reply.body
    assert reply.json()["content"] == "seen"
    content = user_content(model)
    assert isinstance(content, list), content
    texts = [part["text"] for part in content if part["type"] == "text"]
    assert texts == ['what is this?\n\n--- calc.py ---\nprint(1 + 1)\n\n\n'
                     '--- conf.json ---\n{"a": 1}']
    images = [part["image_url"]["url"] for part in content if part["type"] == "image_url"]
    assert images == ["data:image/png;base64," + b64(PNG), "data:image/gif;base64," + b64(GIF)]


def test_a_streamed_message_takes_attachments_too(gateway: Gateway,
                                                 model: OpenAIServer) -> None:
    model.add(Reply(text="a pixel"))
    stream = post_stream(gateway.url, {"content": "and this?", "session_id": "streamed",
                                       "attachments": [png_item()]})
    assert stream.status == 200 and stream.events[-1][0] == "done", stream.events
    [image] = [part for part in user_content(model) if part["type"] == "image_url"]
    assert image["image_url"]["url"] == "data:image/png;base64," + b64(PNG)


def test_bodies_over_1_mib_are_taken_only_with_attachments(gateway: Gateway,
                                                          model: OpenAIServer) -> None:
    big_png = PNG + b"\0" * (3 * MIB)  # 4 MiB of base64: over 1 MiB, within 8 MiB
    model.add(Reply(text="big"))
    taken = post(gateway.url, {"content": "a big one", "session_id": "big",
                               "attachments": [png_item(data=b64(big_png))]})
    assert taken.status == 200, taken.body
    [image] = [part for part in user_content(model) if part["type"] == "image_url"]
    assert image["image_url"]["url"] == "data:image/png;base64," + b64(big_png)

    calls = len(model.requests)
    plain = post(gateway.url, {"content": "x" * (2 * MIB)})
    assert plain.status == 413, plain.body
    assert plain.json()["error"] == ("the request body is larger than 1048576 bytes (up to "
                                     "8388608 when it carries attachments)")
    empty_list = post(gateway.url, {"content": "x" * (2 * MIB), "attachments": []})
    assert empty_list.status == 413, empty_list.body
    huge = post(gateway.url, {"content": "too big", "attachments": [
        png_item(data=b64(PNG + b"\0" * (7 * MIB)))]})
    assert huge.status == 413 and "larger than 8388608 bytes" in huge.json()["error"]
    long_text = post(gateway.url, {"content": "summarise", "attachments": [
        {"name": "a.txt", "mime_type": "text/plain", "data": b64("a" * (MIB // 2))},
        {"name": "b.txt", "mime_type": "text/plain", "data": b64("b" * (MIB // 2))}]})
    assert long_text.status == 413, long_text.body
    assert "with its text attachments is 1048617 bytes; at most 1048576" in (
        long_text.json()["error"])
    assert len(model.requests) == calls, "the model was called for a refused message"


def _item(**fields: Any) -> dict[str, Any]:
    return {"content": "look", "attachments": [fields]}


REFUSED = [
    ({"content": "look", "attachments": {"name": "a.txt"}}, 400,
     "field attachments must be an array, got an object"),
    ({"content": "look", "attachments": [png_item()] * 11}, 400,
     "field attachments has 11 items; at most 10 are allowed"),
    ({"content": "look", "attachments": ["a.txt"]}, 400,
     "attachments[0] must be an object with name, mime_type and data (or url), got a string"),
    (_item(name="a.txt", mime_type="text/plain", data=b64("hi"), path="/etc/passwd"), 400,
     "attachments[0] has unknown field(s): path"),
    (_item(mime_type="text/plain", data=b64("hi")), 400, "attachments[0] has no name"),
    (_item(name=3, mime_type="text/plain", data=b64("hi")), 400,
     "attachments[0].name must be a string, got a number"),
    (_item(name="a.txt", data=b64("hi")), 400, "attachments[0] (a.txt) has no mime_type"),
    (_item(name="a.txt", mime_type="text/plain"), 400,
     "attachments[0] (a.txt) has neither data nor url; send exactly one"),
    (_item(name="a.txt", mime_type="text/plain", data=b64("hi"),
           url="data:text/plain,hi"), 400, "has both data and url; send exactly one"),
    (_item(name="a.txt", mime_type="text/plain", data="not base64!"), 400,
     "attachments[0] (a.txt): data is not valid base64"),
    (_item(name="a.txt", mime_type="text/plain", data="aGk"), 400,
     "data is not valid base64 (Incorrect padding)"),
    (_item(name="a.txt", mime_type="text/plain", data=""), 400, "attachments[0] (a.txt) is empty"),
    (_item(name="p.png", mime_type="image/png", url="data:image/jpeg;base64," + b64(PNG)), 400,
     "the data: URL says image/jpeg but mime_type is image/png; make them agree"),
    (_item(name="p.png", mime_type="image/png", url="data:;base64," + b64(PNG)), 400,
     "the data: URL says no media type but mime_type is image/png"),
    (_item(name="p.png", mime_type="image/png", url="data:image/png;base64,%%%"), 400,
     "the data: URL is not valid base64"),
    (_item(name="p.png", mime_type="image/png", url="https://example.com/p.png"), 400,
     "remote URLs are not accepted; fetch the file and send its bytes"),
    (_item(name="p", mime_type="text/plain", url="file:///etc/passwd"), 400,
     "url must be a data: URL (data:<mime type>;base64,<data>)"),
    (_item(name="r.pdf", mime_type="application/pdf", data=b64("%PDF-1.4")), 415,
     "has mime_type application/pdf, which hookline does not send to models; attach text"),
    (_item(name="d.svg", mime_type="image/svg+xml", data=b64("<svg/>")), 415,
     "image (image/gif, image/jpeg, image/png, image/webp)"),
    (_item(name="x", mime_type="", data=b64("hi")), 415, "has mime_type (empty)"),
    (_item(name="../../etc/passwd", mime_type="text/plain", data=b64("hi")), 400,
     "attachments[0].name must be a file name, not a path: send 'passwd' rather than "
     "'../../etc/passwd'"),
    (_item(name="C:\\notes.txt", mime_type="text/plain", data=b64("hi")), 400,
     "send 'notes.txt' rather than"),
    (_item(name="..", mime_type="text/plain", data=b64("hi")), 400,
     "must be a file name, not '..'"),
    (_item(name="a.txt ---\nsecret", mime_type="text/plain", data=b64("hi")), 400,
     "attachments[0].name must not contain control characters or line breaks"),
    (_item(name="a\u2028b.txt", mime_type="text/plain", data=b64("hi")), 400,
     "must not contain control characters or line breaks"),
    (_item(name=" ", mime_type="text/plain", data=b64("hi")), 400,
     "attachments[0].name must not be empty"),
    (_item(name="n" * 256, mime_type="text/plain", data=b64("hi")), 400,
     "is 256 characters long; at most 255"),
    (_item(name="latin.txt", mime_type="text/plain", data=b64(b"caf\xe9")), 400,
     "attachments[0] (latin.txt) is not UTF-8 text (byte 3) though its mime_type is "
     "text/plain"),
    (_item(name="fake.png", mime_type="image/png", data=b64("hello")), 400,
     "attachments[0] (fake.png) does not hold an image of type image/png"),
    (_item(name="fake.webp", mime_type="image/webp", data=b64(PNG)), 400,
     "does not hold an image of type image/webp"),
]


@pytest.mark.parametrize(("payload", "status", "expected"), REFUSED,
                         ids=[expected[:40] for _, _, expected in REFUSED])
def test_a_refused_attachment_is_a_4xx_and_the_model_is_not_called(
        gateway: Gateway, model: OpenAIServer, payload: dict[str, Any], status: int,
        expected: str) -> None:
    calls = len(model.requests)
    reply = post(gateway.url, payload)
    assert reply.status == status, reply.body
    assert reply.headers["content-type"] == "application/json"
    assert expected in reply.json()["error"], reply.json()
    assert len(model.requests) == calls


def test_a_lone_surrogate_in_a_name_is_refused(gateway: Gateway, model: OpenAIServer) -> None:
    calls = len(model.requests)
    raw = json.dumps(_item(name="\udfff.txt", mime_type="text/plain", data=b64("hi")))
    reply = post(gateway.url, None, raw=raw.encode())
    assert reply.status == 400 and "lone surrogate" in reply.json()["error"]
    assert len(model.requests) == calls

