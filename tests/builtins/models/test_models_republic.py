"""RepublicModel through real HTTP to a loopback OpenAI-compatible server.

Runs on asyncio and trio: RepublicModel gives republic its own httpx2 client (which
supports both) and retries with anyio, so republic's asyncio-only parts are never used.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import aclosing
from typing import Any

import anyio
import pytest
from openai_server import OpenAIServer, Reply, closed_port_url

from hookline.builtins.config import Settings
from hookline.builtins.models import (
    Finished,
    ModelClient,
    ModelMessage,
    RepublicModel,
    TextDelta,
    ToolCallEvent,
    ToolCallSpec,
    ToolSchema,
    Usage,
    open_model,
)
from hookline.kernel.errors import ErrorKind, HooklineError

pytestmark = pytest.mark.anyio

SPEC = "openai-compatible:test-model"
ECHO = ToolSchema(
    "echo",
    "Repeat the text.",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)


@pytest.fixture(autouse=True)
def _clean_republic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for provider in ("OPENAI_COMPATIBLE", "OPENAI", "OLLAMA", "ANTHROPIC"):
        monkeypatch.delenv(f"REPUBLIC_{provider}_API_KEY", raising=False)
        monkeypatch.delenv(f"REPUBLIC_{provider}_API_BASE", raising=False)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(api_key="sk-test") as running:
        yield running


def model_for(server: OpenAIServer, spec: str = SPEC, **options: Any) -> RepublicModel:
    options.setdefault("api_key", "sk-test")
    options.setdefault("retry_delay", 0.0)
    return RepublicModel(spec, api_base=server.base_url, **options)


async def collect(model: Any, messages: list[Any], tools: Any = (), **kw: Any) -> list[Any]:
    async with aclosing(model.stream(messages, tools, **kw)) as events:
        return [event async for event in events]


async def failure(model: Any, messages: list[Any] | None = None) -> HooklineError:
    with pytest.raises(HooklineError) as caught:
        await collect(model, messages or [ModelMessage.user("hi")])
    return caught.value


# Streaming -------------------------------------------------------------------------------


async def test_streams_text_tool_call_and_usage(server: OpenAIServer) -> None:
    server.add(
        Reply(
            text=["Let me ", "echo ", "that."],
            tool_calls=[{"id": "call_9", "name": "echo", "arguments": {"text": "ping"}}],
            usage={"prompt_tokens": 21, "completion_tokens": 9},
        )
    )
    model = model_for(server)
    assert isinstance(model, ModelClient)
    messages = [ModelMessage.system("You are terse."), ModelMessage.user("echo ping")]
    events = await collect(model, messages, [ECHO], max_tokens=64)

    deltas = [event.text for event in events if isinstance(event, TextDelta)]
    assert deltas == ["Let me ", "echo ", "that."]
    calls = [event.call for event in events if isinstance(event, ToolCallEvent)]
    assert calls == [ToolCallSpec("call_9", "echo", '{"text": "ping"}')]
    assert calls[0].args == {"text": "ping"}
    done = events[-1]
    assert isinstance(done, Finished)
    assert done.text == "Let me echo that." and done.tool_calls == calls
    assert done.usage is not None
    assert (done.usage["input_tokens"], done.usage["output_tokens"]) == (21, 9)
    assert done.usage["total_tokens"] == 30
    assert Usage(done.usage) in events

    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    body = request.body
    assert body["model"] == "test-model"
    assert body["stream"] is True
    assert body["max_completion_tokens"] == 64
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "echo ping"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "echo",
                "description": "Repeat the text.",
                "parameters": ECHO.parameters,
            },
        }
    ]


async def test_a_lone_surrogate_from_the_model_becomes_a_replacement_character(
        server: OpenAIServer) -> None:
    """`"\\udcff"` is valid JSON but no character: a model (or a hostile file steering it)
    that sends one must not fail the turn's record, a tool or the terminal later."""
    server.add(Reply(text=["bad \udcff ", "ok \U0001f600"], tool_calls=[
        {"id": "c1", "name": "echo", "arguments": {"text": "a\udcffb \U0001f600"}},
        {"id": "c2", "name": "echo", "arguments": {"text": "fine \U0001f600"}}]))
    events = await collect(model_for(server), [ModelMessage.user("hi")], [ECHO])
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["bad \ufffd ",
                                                                    "ok \U0001f600"]
    first, second = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert first.args == {"text": "a\ufffdb \U0001f600"}
    assert second.arguments == json.dumps({"text": "fine \U0001f600"}), "left as it came"


async def test_conversation_with_tool_results_is_sent_in_chat_form(server: OpenAIServer) -> None:
    server.add(Reply(text="It said ping."))
    call = ToolCallSpec("call_1", "echo", '{"text": "ping"}')
    messages = [
        ModelMessage.user("echo ping"),
        ModelMessage.assistant("", [call]),
        ModelMessage.tool(call, "ping"),
        ModelMessage.tool(ToolCallSpec("call_2", "echo"), "failed!", is_error=True),
    ]
    events = await collect(model_for(server), messages, [ECHO])
    assert events[-1].text == "It said ping."
    sent = server.requests[0].body["messages"]
    assert sent[0] == {"role": "user", "content": "echo ping"}
    assert sent[1]["role"] == "assistant"
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_1", "call_2"]
    assert sent[1]["tool_calls"][0]["function"] == {
        "name": "echo",
        "arguments": '{"text": "ping"}',
    }
    assert sent[2] == {"role": "tool", "tool_call_id": "call_1", "content": "ping"}
    assert sent[3] == {"role": "tool", "tool_call_id": "call_2", "content": "failed!"}
    assert "max_completion_tokens" not in server.requests[0].body


async def test_media_content_becomes_image_parts(server: OpenAIServer) -> None:
    server.add(Reply(text="A red dot."))
    block = {"type": "image", "media_type": "image/png", "url": "data:image/png;base64,iVBORw=="}
    await collect(model_for(server), [ModelMessage.user(["what is this?", block])])
    content = server.requests[0].body["messages"][0]["content"]
    assert content == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
    ]


async def test_republic_messages_pass_through(server: OpenAIServer) -> None:
    import republic

    server.add(Reply(text="ok"))
    await collect(model_for(server), [republic.system("s"), republic.user("u")])
    assert [m["role"] for m in server.requests[0].body["messages"]] == ["system", "user"]


@pytest.mark.parametrize(
    ("spec", "options", "field"),
    [
        ("openai:test-model", {"api_format": "chat"}, "max_completion_tokens"),
        ("ollama:test-model", {}, "max_tokens"),
    ],
)
async def test_other_provider_specs(
    server: OpenAIServer, spec: str, options: dict[str, Any], field: str
) -> None:
    server.add(Reply(text="fine"))
    events = await collect(
        model_for(server, spec, **options), [ModelMessage.user("x")], max_tokens=5
    )
    assert events[-1].text == "fine"
    assert server.requests[0].body[field] == 5


async def test_anthropic_is_asked_to_cache_each_request_and_its_cache_reads_are_counted(
        server: OpenAIServer) -> None:
    """Anthropic caches a prompt only up to a breakpoint: every request carries one (a
    top-level `cache_control`, which it puts at the request's end), and the tokens read
    from its cache and written to it come back as `cached_tokens` and
    `cache_write_tokens`. Other providers are sent none."""
    server.add(Reply(text="cached", usage={"prompt_tokens": 5000, "cached_tokens": 4000,
                                           "cache_write_tokens": 600,
                                           "completion_tokens": 3}),
               Reply(text="plain"))
    events = await collect(model_for(server, "anthropic:claude-test"),
                           [ModelMessage.system("Be brief."), ModelMessage.user("x")])
    assert events[-1].text == "cached"
    usage = events[-1].usage
    assert (usage["input_tokens"], usage["cached_tokens"], usage["cache_write_tokens"]) == (
        5000, 4000, 600)
    await collect(model_for(server), [ModelMessage.user("x")])
    anthropic, openai = server.requests
    assert anthropic.path == "/v1/messages"
    assert anthropic.body["cache_control"] == {"type": "ephemeral"}
    assert anthropic.body["system"] == "Be brief."
    assert "cache_control" not in openai.body


async def test_an_endpoint_refusing_the_breakpoint_is_asked_again_without_it(
        server: OpenAIServer, caplog: pytest.LogCaptureFixture) -> None:
    """A proxy that speaks Anthropic's API but checks every field answers 400: the request
    is sent again without the breakpoint, said once, and later ones go without it."""
    server.add(Reply.failure(400, "cache_control: Extra inputs are not permitted"),
               Reply(text="uncached"), Reply(text="again"))
    model = model_for(server, "anthropic:claude-test")
    assert (await collect(model, [ModelMessage.user("x")]))[-1].text == "uncached"
    assert (await collect(model, [ModelMessage.user("y")]))[-1].text == "again"
    refused, *later = server.requests
    assert refused.body["cache_control"] == {"type": "ephemeral"}
    assert [("cache_control" in request.body) for request in later] == [False, False]
    said = [record.getMessage() for record in caplog.records if "cache_control" in
            record.getMessage()]
    assert len(said) == 1 and "not cached" in said[0], said


async def test_a_callers_extra_body_wins_over_the_cache_breakpoint(
        server: OpenAIServer) -> None:
    server.add(Reply(text="an hour"))
    hour = {"type": "ephemeral", "ttl": "1h"}
    await collect(model_for(server, "anthropic:claude-test",
                            extra_body={"cache_control": hour, "metadata": {"user_id": "u"}}),
                  [ModelMessage.user("x")])
    body = server.requests[0].body
    assert body["cache_control"] == hour and body["metadata"] == {"user_id": "u"}


async def test_open_model_uses_settings(server: OpenAIServer, tmp_path: Any) -> None:
    server.add(Reply(text="via settings"))
    settings = Settings(home=tmp_path, model=SPEC, api_key="sk-test", api_base=server.base_url)
    model = open_model(settings.model_spec, settings, retry_delay=0.0)
    assert isinstance(model, RepublicModel) and model.name == SPEC
    assert (await collect(model, [ModelMessage.user("x")]))[-1].text == "via settings"


async def test_open_model_reads_the_key_from_the_variable_api_key_env_names(
        server: OpenAIServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server.add(Reply(text="key from the environment"))
    monkeypatch.setenv("MY_TEST_KEY", "sk-test")
    settings = Settings(home=tmp_path, model=SPEC, api_key_env="MY_TEST_KEY",
                        api_base=server.base_url)
    model = open_model(settings.model_spec, settings, retry_delay=0.0)
    events = await collect(model, [ModelMessage.user("x")])
    assert events[-1].text == "key from the environment"
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"

    monkeypatch.setenv("MY_TEST_KEY", " ")
    with pytest.raises(HooklineError) as info:
        open_model(settings.model_spec, settings)
    assert info.value.kind is ErrorKind.config
    assert "MY_TEST_KEY" in info.value.message and "empty or unset" in info.value.message


# Closing and cancellation --------------------------------------------------------------------


async def test_early_close_releases_the_connection(server: OpenAIServer) -> None:
    server.add(Reply(text="first chunk then nothing", hold=True))
    stream = model_for(server).stream([ModelMessage.user("hi")])
    assert isinstance(await anext(stream), TextDelta)
    await stream.aclose()
    assert await anyio.to_thread.run_sync(server.disconnected.wait, 5)


async def test_cancellation_releases_the_connection(server: OpenAIServer) -> None:
    server.add(Reply(text="hold on", hold=True))
    seen: list[Any] = []
    with anyio.move_on_after(0.5) as scope:
        async with aclosing(model_for(server).stream([ModelMessage.user("hi")])) as events:
            async for event in events:
                seen.append(event)
    assert scope.cancelled_caught
    assert seen and all(isinstance(event, TextDelta) for event in seen)
    assert await anyio.to_thread.run_sync(server.disconnected.wait, 5)


# Errors ------------------------------------------------------------------------------------


async def test_401_names_provider_model_and_keys(server: OpenAIServer) -> None:
    error = await failure(model_for(server, api_key="wrong"))
    assert error.kind is ErrorKind.config
    assert SPEC in error.message
    assert "HTTP 401" in error.message and "Incorrect API key provided" in error.message
    assert "the API key was rejected" in error.message
    assert "HOOKLINE_API_KEY" in error.message
    assert "REPUBLIC_OPENAI_COMPATIBLE_API_KEY" in error.message
    assert error.details is not None
    assert error.details["provider"] == "openai-compatible"
    assert error.details["model"] == "test-model"
    assert error.details["status"] == 401
    assert isinstance(error.__cause__, Exception)
    assert len(server.requests) == 1, "auth failures are not retried"


async def test_401_without_any_key_says_none_is_configured(server: OpenAIServer) -> None:
    model = RepublicModel(SPEC, api_base=server.base_url)
    error = await failure(model)
    assert "no API key is configured" in error.message


async def test_403_with_a_key_says_the_key_may_not_rather_than_that_it_is_wrong(
        server: OpenAIServer) -> None:
    server.add(Reply.failure(403, "Project does not have access to model test-model"))
    error = await failure(model_for(server))
    assert error.kind is ErrorKind.config and "HTTP 403" in error.message
    assert "refused the key" in error.message and "may not use this model" in error.message
    assert "rejected" not in error.message and len(server.requests) == 1


async def test_404_points_at_model_and_endpoint(server: OpenAIServer) -> None:
    server.add(Reply.failure(404, "The model `test-model` does not exist"))
    error = await failure(model_for(server))
    assert error.kind is ErrorKind.config
    assert "not found" in error.message and "does not exist" in error.message
    assert "'test-model'" in error.message
    assert "HOOKLINE_API_BASE" in error.message and server.base_url in error.message


async def test_404_of_the_responses_api_names_the_chat_format(server: OpenAIServer) -> None:
    """`openai:` asks a server of one's own for /v1/responses, which it most often lacks:
    the error names the fix, not only the model's name."""
    error = await failure(model_for(server, "openai:llama3.1"))
    assert server.requests[0].path == "/v1/responses"
    assert "no route /v1/responses" in error.message
    assert error.message.endswith(" A server that speaks only chat completions wants "
                                  "HOOKLINE_API_FORMAT=chat, or the provider "
                                  "openai-compatible:llama3.1.")
    chat = await failure(model_for(server, "openai:llama3.1", api_format="chat"))
    assert "HOOKLINE_API_FORMAT=chat" not in chat.message


async def test_500_is_retried_then_reported(server: OpenAIServer) -> None:
    server.add(*[Reply.failure(500, "upstream exploded")] * 3)
    error = await failure(model_for(server, max_retries=2))
    assert error.kind is ErrorKind.provider
    assert "HTTP 500" in error.message and "upstream exploded" in error.message
    assert "after 3 attempts" in error.message
    assert len(server.requests) == 3


async def test_429_is_retried_and_can_recover(server: OpenAIServer) -> None:
    server.add(Reply.failure(429, "slow down", headers={"Retry-After": "0"}), Reply(text="ok"))
    events = await collect(model_for(server, retry_delay=5.0), [ModelMessage.user("hi")])
    assert events[-1].text == "ok", "Retry-After: 0 wins over the configured delay"
    assert len(server.requests) == 2


async def test_429_after_retries_is_a_rate_limit_error(server: OpenAIServer) -> None:
    server.add(Reply.failure(429, "quota"))
    error = await failure(model_for(server, max_retries=0))
    assert error.kind is ErrorKind.provider
    assert "rate limited" in error.message
    assert "(--model, /model in the chat, or HOOKLINE_MODEL)" in error.message


async def test_a_wait_asked_as_a_date_is_said_in_whole_seconds(server: OpenAIServer) -> None:
    from email.utils import formatdate

    later = formatdate(time.time() + 300, usegmt=True)
    server.add(Reply.failure(429, "slow down", headers={"Retry-After": later}))
    error = await failure(model_for(server, max_retries=0))
    assert re.search(r"it asks to wait (29\d|300) s,", error.message), error.message


async def test_400_is_not_retried(server: OpenAIServer) -> None:
    server.add(Reply.failure(400, "max_completion_tokens is too large"))
    error = await failure(model_for(server))
    assert error.kind is ErrorKind.provider
    assert "rejected the request" in error.message and "too large" in error.message
    assert len(server.requests) == 1


async def test_connection_refused() -> None:
    url = closed_port_url()
    model = RepublicModel(SPEC, api_base=url, api_key="k", max_retries=1, retry_delay=0.0)
    error = await failure(model)
    assert error.kind is ErrorKind.provider
    assert "connection failed" in error.message and url in error.message
    assert "after 2 attempts" in error.message
    assert "HOOKLINE_API_BASE" in error.message


async def test_incomplete_stream(server: OpenAIServer) -> None:
    server.add(Reply(text="cut off", finish=False))
    error = await failure(model_for(server))
    assert error.kind is ErrorKind.provider
    assert "ended before it was complete" in error.message


async def test_a_stream_cut_before_anything_arrived_is_retried(server: OpenAIServer) -> None:
    """Headers, then nothing (a proxy's reset): nothing of the reply arrived, so trying
    again is safe, and said as a retry."""
    from hookline.builtins.models.base import Retrying

    server.add(Reply(text="", finish=False), Reply(text="ok"))
    events = await collect(model_for(server, retry_delay=0.01), [ModelMessage.user("hi")])
    (retry,) = [event for event in events if isinstance(event, Retrying)]
    assert retry.reason == "the stream ended before anything arrived"
    assert events[-1].text == "ok" and len(server.requests) == 2


def test_configuration_errors_surface_at_construction() -> None:
    with pytest.raises(HooklineError, match="is not 'provider:model'") as caught:
        RepublicModel("gpt-4o")
    assert caught.value.kind is ErrorKind.config
    with pytest.raises(HooklineError, match="unknown provider 'nosuch'") as caught:
        RepublicModel("nosuch:model")
    assert caught.value.kind is ErrorKind.config and "openai-compatible" in caught.value.message
    with pytest.raises(HooklineError, match="HOOKLINE_API_FORMAT") as caught:
        RepublicModel(SPEC, api_format="responses", api_base="http://127.0.0.1:9/v1")
    assert caught.value.kind is ErrorKind.config


def test_importing_the_models_does_not_import_republic() -> None:
    code = (
        "import sys, hookline.builtins.models, hookline.builtins.config; "
        "print(json.dumps(sorted(m for m in ('republic', 'httpx2') if m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json; " + code],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert json.loads(out) == []


def test_openai_compatible_without_an_api_base_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an address republic would send the prompt to the public OpenAI endpoint."""
    monkeypatch.delenv("REPUBLIC_OPENAI_COMPATIBLE_API_BASE", raising=False)
    with pytest.raises(HooklineError) as caught:
        RepublicModel("openai-compatible:llama3.1", api_key="k")
    error = caught.value
    assert error.kind is ErrorKind.config
    assert "needs the address of your server" in error.message
    assert "HOOKLINE_API_BASE" in error.message
    monkeypatch.setenv("REPUBLIC_OPENAI_COMPATIBLE_API_BASE", "http://127.0.0.1:9/v1")
    assert RepublicModel("openai-compatible:llama3.1", api_key="k").endpoint.startswith(
        "http://127.0.0.1:9")


async def test_a_connection_cut_mid_reply_says_so() -> None:
    """A server that sends the start of a streamed reply, then drops the connection: the
    error says the reply was cut, not that the server may not be running."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    chunk = ('data: {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": '
             '"m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": '
             '"partial"}, "finish_reason": null}]}\n\n')

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            body = chunk.encode()
            connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                               b"transfer-encoding: chunked\r\n\r\n"
                               + f"{len(body):x}\r\n".encode() + body + b"\r\n")
            connection.shutdown(socket.SHUT_RDWR)  # cut: no last chunk, no [DONE]

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    model = RepublicModel(SPEC, api_base=f"http://127.0.0.1:{port}/v1", api_key="k")
    try:
        error = await failure(model)
    finally:
        listener.close()
        thread.join(5)
    assert error.kind is ErrorKind.provider
    assert "cut while the reply was arriving" in error.message, error.message
    assert "check that the server" not in error.message.lower()
