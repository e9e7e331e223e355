"""A gateway request's `context.options`: the model options `run -o` sets, checked the same
way (a bad one is the client's 400), reaching the provider's request body (a real gateway
and a loopback OpenAI-compatible server, both over real HTTP)."""

from __future__ import annotations

from pathlib import Path

from gateway_support import gateway_env, post, start_gateway_process
from openai_server import OpenAIServer, Reply


def test_context_options_reach_the_request_and_a_bad_one_is_a_400(
        tmp_path: Path) -> None:
    with OpenAIServer([Reply(text="cool")]) as server:
        env = gateway_env(tmp_path / "home", HOOKLINE_MODEL="openai-compatible:test-model",
                          HOOKLINE_API_BASE=server.base_url, HOOKLINE_API_KEY="sk-test")
        gateway = start_gateway_process(["--port", "0"], env, tmp_path)
        try:
            done = post(gateway.url, {"content": "hello", "context": {
                "options": {"temperature": 0.3, "stop": "END"}}})
            bad = post(gateway.url, {"content": "hello", "context": {
                "options": {"temperature": "hot"}}})
        finally:
            gateway.end()
        [request] = server.requests
    assert done.status == 200 and done.json()["content"] == "cool", done.body
    assert request.body["temperature"] == 0.3 and request.body["stop"] == ["END"]
    assert "[options=" not in str(request.messages), "a setting, not words of the message"
    assert bad.status == 400, bad.body
    assert bad.json()["error"] == ("context.options: model option temperature takes a number "
                                   "from 0 to 2, got 'hot'")
