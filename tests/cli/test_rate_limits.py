"""Rate limits and quotas said out loud, against a loopback OpenAI-compatible server over
real HTTP: a 429 with `Retry-After` shows one retry line with its wait and waits it; an
out-of-quota 429 is not retried and says waiting will not help; a wait longer than
`retry_max_wait` is not waited; through the gateway an upstream 429 answers 429 with the
provider's `Retry-After`, never 500."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gateway_support import call, gateway_env, post, start_gateway_process
from openai_server import OpenAIServer, Reply

HOOKLINE = Path(sys.executable).parent / "hookline"
SPEC = "openai-compatible:test-model"
QUOTA = {"message": "You exceeded your current quota, please check your plan and billing "
                    "details.", "type": "insufficient_quota", "code": "insufficient_quota"}


def run(workspace: Path, server: OpenAIServer, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env.update(HOOKLINE_HOME=str(workspace.parent / "home"), HOOKLINE_MODEL=SPEC,
               HOOKLINE_API_BASE=server.base_url, HOOKLINE_API_KEY="sk-test", **extra)
    return subprocess.run([str(HOOKLINE), "run", "hello"], cwd=workspace, env=env, text=True,
                          capture_output=True, timeout=120, stdin=subprocess.DEVNULL)


def test_a_429_with_retry_after_shows_the_retry_and_waits_it(workspace: Path) -> None:
    limited = Reply.failure(429, "Rate limit reached for requests", headers={"Retry-After": "2"})
    with OpenAIServer([limited, Reply(text="hi there")]) as server:
        started = time.monotonic()
        done = run(workspace, server)
        waited = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi there\n"
    assert "[retry] HTTP 429: waiting 2.0 s, then attempt 2 of 3" in done.stderr
    assert waited >= 2.0 and len(server.requests) == 2


def test_out_of_quota_is_not_retried_and_says_waiting_will_not_help(workspace: Path) -> None:
    with OpenAIServer([Reply(status=429, error=QUOTA)] * 3) as server:
        done = run(workspace, server)
        assert len(server.requests) == 1, "not retried"
    assert done.returncode == 1
    assert "out of quota or credit" in done.stderr and "waiting will not help" in done.stderr
    assert "[retry]" not in done.stderr


def test_a_wait_longer_than_retry_max_wait_fails_at_once_saying_so(workspace: Path) -> None:
    limited = Reply.failure(429, "slow down", headers={"Retry-After": "600"})
    with OpenAIServer([limited]) as server:
        done = run(workspace, server, HOOKLINE_RETRY_MAX_WAIT="5")
        assert len(server.requests) == 1
    assert done.returncode == 1
    assert "it asks to wait 600 s, more than retry_max_wait (5 s) allows" in done.stderr


@pytest.mark.parametrize(("asked", "answered"), [("7", "7"), ("inf", "5"), ("-3", "5")])
def test_the_gateway_answers_an_upstream_429_with_429_and_its_retry_after(
        tmp_path: Path, asked: str, answered: str) -> None:
    """The provider's wait, or the default 5 s where its number asks for none."""
    limited = Reply.failure(429, "Rate limit reached", headers={"Retry-After": asked})
    with OpenAIServer([limited] * 3) as server:
        gateway = start_gateway_process(
            ["--port", "0"], gateway_env(tmp_path / "home", HOOKLINE_MODEL=SPEC,
                                         HOOKLINE_API_BASE=server.base_url,
                                         HOOKLINE_API_KEY="sk-test",
                                         HOOKLINE_RETRY_MAX_WAIT="1"), tmp_path)
        try:
            answer = post(gateway.url, {"content": "hello"})
        finally:
            gateway.end()
    assert answer.status == 429, answer.body
    assert answer.headers["retry-after"] == answered
    assert answer.json()["retry_after"] == int(answered), answer.json()
    assert "rate limited" in answer.json()["error"]


def test_the_gateway_answers_out_of_quota_with_429_and_no_time_to_retry(
        tmp_path: Path) -> None:
    """Waiting will not mend it: no `Retry-After`, `retryable: false`, and the OpenAI
    face's `x-should-retry: false`, so SDKs do not send the message again."""
    with OpenAIServer([Reply(status=429, error=QUOTA)] * 4) as server:
        gateway = start_gateway_process(
            ["--port", "0"], gateway_env(tmp_path / "home", HOOKLINE_MODEL=SPEC,
                                         HOOKLINE_API_BASE=server.base_url,
                                         HOOKLINE_API_KEY="sk-test"), tmp_path)
        try:
            answer = post(gateway.url, {"content": "hello"})
            completion = call(gateway.url, "POST", "/v1/chat/completions", {
                "model": SPEC, "messages": [{"role": "user", "content": "hello"}]})
        finally:
            gateway.end()
    assert answer.status == 429, answer.body
    assert "retry-after" not in answer.headers and answer.json()["retryable"] is False
    assert "waiting will not help" in answer.json()["error"]
    assert completion.status == 429, completion.body
    assert "retry-after" not in completion.headers
    assert completion.headers["x-should-retry"] == "false"


def test_a_keyed_retry_after_an_upstream_429_runs_again_and_a_restart_agrees(
        tmp_path: Path) -> None:
    """The provider refused the turn before any tool ran: the same Idempotency-Key sent
    again after the Retry-After runs it (once), also when it reaches a restarted
    gateway, which finds the refused run on the tape."""
    limited = Reply.failure(429, "Rate limit reached", headers={"Retry-After": "7"})
    env = gateway_env(tmp_path / "home", HOOKLINE_MODEL=SPEC, HOOKLINE_RETRY_MAX_WAIT="1",
                      HOOKLINE_API_KEY="sk-test")
    body = {"content": "hello", "session_id": "limited"}
    key = {"Idempotency-Key": "k-429"}
    # Each refusal asks for more than retry_max_wait: one request, not retried.
    with OpenAIServer([limited, Reply(text="hi"), limited, Reply(text="again")]) as server:
        env["HOOKLINE_API_BASE"] = server.base_url
        gateway = start_gateway_process(["--port", "0"], env, tmp_path)
        try:
            first = call(gateway.url, "POST", "/v1/messages", body, headers=key)
            second = call(gateway.url, "POST", "/v1/messages", body, headers=key)
            replayed = call(gateway.url, "POST", "/v1/messages", body, headers=key)
            other = {"Idempotency-Key": "k-429-b"}
            refused = call(gateway.url, "POST", "/v1/messages", body, headers=other)
        finally:
            gateway.end()
        gateway = start_gateway_process(["--port", "0"], env, tmp_path)
        try:
            after_restart = call(gateway.url, "POST", "/v1/messages", body, headers=other)
        finally:
            gateway.end()
    assert first.status == 429 and first.headers["retry-after"] == "7", first.body
    assert second.status == 200 and second.json()["content"] == "hi", second.body
    assert replayed.headers["idempotent-replayed"] == "true"
    assert replayed.json()["content"] == "hi" and len(server.requests) == 4
    assert refused.status == 429, refused.body
    assert after_restart.status == 200 and after_restart.json()["content"] == "again"


def test_a_streamed_completion_the_provider_refused_ends_with_a_rate_limit_error(
        tmp_path: Path) -> None:
    """A stream cannot change its status once begun: its error chunk says what the whole
    answer's 429 says (`rate_limit_error`), not `server_error`."""
    import json

    limited = Reply.failure(429, "Rate limit reached", headers={"Retry-After": "7"})
    with OpenAIServer([limited]) as server:
        gateway = start_gateway_process(
            ["--port", "0"], gateway_env(tmp_path / "home", HOOKLINE_MODEL=SPEC,
                                         HOOKLINE_API_BASE=server.base_url,
                                         HOOKLINE_API_KEY="sk-test",
                                         HOOKLINE_RETRY_MAX_WAIT="1"), tmp_path)
        try:
            streamed = call(gateway.url, "POST", "/v1/chat/completions", {
                "model": SPEC, "stream": True,
                "messages": [{"role": "user", "content": "hello"}]})
        finally:
            gateway.end()
    chunks = [json.loads(line[6:]) for line in streamed.body.decode().splitlines()
              if line.startswith("data: {")]
    error = chunks[-1]["error"]
    assert (error["type"], error["code"]) == ("rate_limit_error", "rate_limit_exceeded"), error
    assert "rate limited" in error["message"]
