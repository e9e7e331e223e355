"""The gateway's OpenAI-compatible routes, through a real `hookline gateway` over real
HTTP, with the clients people point at it: the official `openai` SDK and the `llm` command.
A completion runs as a posted message does (admission, approvals, idempotency, the tape),
and answers, refuses and fails in OpenAI's shape."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest
from gateway_support import TEST_TOKEN, Gateway, call, post

LLM = shutil.which("llm", path=str(Path(sys.executable).parent))


def scripted(tmp_path: Path, turns: list[dict[str, Any]]) -> str:
    """The model spec of a scripted model playing `turns`."""
    script = tmp_path / "turns.json"
    script.write_text(json.dumps({"turns": turns}))
    return f"scripted:{script}"


def client(gateway: Gateway, api_key: str = TEST_TOKEN) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=api_key)


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def streamed_text(chunks: Any) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def said(home: Path, workspace: Path, session_id: str) -> list[str]:
    """The user messages on a session's tape."""
    from hookline.builtins.store import SQLiteTapeStore
    from hookline.builtins.tape import session_tape_name
    from hookline.kernel.tape import TapeQuery

    with SQLiteTapeStore(home / "tapes.db") as store:
        entries = store.fetch_all(TapeQuery(session_tape_name(session_id, workspace.resolve())))
    return [e.payload["content"] for e in entries
            if e.kind == "message" and e.payload.get("role") == "user"]


def test_the_openai_client_gets_the_agents_answers_whole_and_streamed(
        start: Any, home: Path, workspace: Path, tmp_path: Path) -> None:
    spec = scripted(tmp_path, [
        {"tool_calls": [{"name": "shell", "arguments": {"command": "echo made > made.txt"}}],
         "usage": {"input_tokens": 3, "output_tokens": 1}},
        {"text": ["Hello ", "there"], "usage": {"input_tokens": 5, "output_tokens": 2}},
        {"text": ["second ", "answer"], "usage": {"input_tokens": 7, "output_tokens": 1}},
        {"text": "third"},
    ])
    gateway = start(HOOKLINE_MODEL=spec)
    api = client(gateway)
    try:
        models = [model.id for model in api.models.list()]
        whole = api.chat.completions.create(
            model=spec, extra_headers={"X-Hookline-Session": "mine"},
            messages=[{"role": "system", "content": "be brief"},
                      {"role": "user", "content": "an earlier question"},
                      {"role": "assistant", "content": "an earlier answer"},
                      {"role": "user", "content": "make a file"}])
        chunks = list(api.chat.completions.create(
            model=spec, messages=user("next"), user="alice", stream=True,
            stream_options={"include_usage": True}))
        unnamed = api.chat.completions.create(model=spec, messages=user("last"))
    finally:
        gateway.end()
    assert models == [spec]
    assert whole.object == "chat.completion" and whole.model == spec
    assert whole.choices[0].message.content == "Hello there"
    assert whole.choices[0].finish_reason == "stop"
    assert (workspace / "made.txt").read_text() == "made\n", "the tool ran in the gateway"
    assert whole.usage is not None
    assert (whole.usage.prompt_tokens, whole.usage.completion_tokens,
            whole.usage.total_tokens) == (8, 3, 11), "both model calls counted"
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert streamed_text(chunks) == "second answer"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (7, 1)
    assert unnamed.choices[0].message.content == "third"
    assert unnamed.usage is not None and unnamed.usage.total_tokens == 0, "none reported"
    # Only the last user message is the turn's input: the session's tape is its history.
    assert said(home, workspace, "mine") == ["make a file"]
    assert said(home, workspace, "openai:alice") == ["next"]
    assert said(home, workspace, "openai:default") == ["last"]


def test_a_session_header_is_read_as_utf_8(start: Any, home: Path, workspace: Path) -> None:
    """HTTP hands header values over as latin-1 bytes; a client's `café` is UTF-8."""
    gateway = start(HOOKLINE_MODEL="offline")
    try:
        sent = {"model": "offline", "messages": user("bonjour")}
        utf8 = call(gateway.url, "POST", "/v1/chat/completions", sent,
                    headers={"X-Hookline-Session": "café".encode().decode("latin-1")})
        latin = call(gateway.url, "POST", "/v1/chat/completions", sent,
                     headers={"X-Hookline-Session": "caf\xe9"})  # a lone 0xe9 byte
    finally:
        gateway.end()
    assert utf8.status == 200, utf8.body
    assert said(home, workspace, "café") == ["bonjour"]
    assert latin.status == 400 and "not UTF-8" in latin.json()["error"]["message"]


@pytest.mark.slow
def test_llm_talks_to_the_gateway_streamed_and_not(start: Any, tmp_path: Path) -> None:
    assert LLM, "the llm command is not installed in this environment (the test extra)"
    spec = scripted(tmp_path, [{"text": ["Hello ", "there"]}, {"text": "whole answer"}])
    gateway = start(HOOKLINE_MODEL=spec)
    config = tmp_path / "llm"
    config.mkdir()
    (config / "extra-openai-models.yaml").write_text(
        f"- model_id: hookline\n  model_name: {json.dumps(spec)}\n"
        f"  api_base: {json.dumps(gateway.url + '/v1')}\n  api_key_name: hookline\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LLM_"))}
    env["LLM_USER_PATH"] = str(config)

    def llm(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([LLM, *args], env=env, capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)

    try:
        keyed = llm("keys", "set", "hookline", "--value", TEST_TOKEN)
        streamed = llm("-m", "hookline", "hello")
        whole = llm("-m", "hookline", "--no-stream", "hello again")
    finally:
        gateway.end()
    assert keyed.returncode == 0, keyed.stderr
    assert (streamed.returncode, streamed.stdout.strip()) == (0, "Hello there"), streamed.stderr
    assert (whole.returncode, whole.stdout.strip()) == (0, "whole answer"), whole.stderr


def test_refusals_match_the_old_routes_in_openais_shape(start: Any) -> None:
    gateway = start()  # the offline model
    port = urlsplit(gateway.url).port
    completion = {"model": "offline", "messages": user("hi")}
    cases = {"no token": {"token": None}, "a wrong token": {"token": "w" * 40},
             "a foreign Origin": {"headers": {"origin": "https://evil.example"}},
             "a bad Host": {"headers": {"host": f"evil.example:{port}"}}}
    try:
        answers = {case: (post(gateway.url, {"content": "hi"}, **kwargs),
                          call(gateway.url, "POST", "/v1/chat/completions", completion, **kwargs),
                          call(gateway.url, "GET", "/v1/models", **kwargs))
                   for case, kwargs in cases.items()}
        plain = call(gateway.url, "POST", "/v1/chat/completions", raw=b"{}",
                     headers={"content-type": "text/plain"})
        api = client(gateway)
        with pytest.raises(openai.AuthenticationError):
            client(gateway, api_key="w" * 40).models.list()
        with pytest.raises(openai.NotFoundError) as unknown:
            api.chat.completions.create(model="gpt-4o", messages=user("hi"))
        with pytest.raises(openai.BadRequestError) as no_user:
            api.chat.completions.create(model="offline",
                                        messages=[{"role": "system", "content": "hi"}])
        with pytest.raises(openai.BadRequestError) as image:
            api.chat.completions.create(model="offline", messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}])
    finally:
        gateway.end()
    for case, (old, *new) in answers.items():
        assert old.status in (401, 403), case
        for answer in new:
            assert answer.status == old.status, case
            error = answer.json()["error"]
            assert error["type"] == {401: "authentication_error",
                                     403: "permission_error"}[old.status], case
            assert error["message"] == old.json()["error"], case
    assert plain.status == 415 and "application/json" in plain.json()["error"]["message"]
    assert unknown.value.code == "model_not_found"
    assert "offline" in unknown.value.message, "the error names the models served"
    assert "no message with role user" in no_user.value.message
    assert "only text parts" in image.value.message


def test_a_model_is_retrieved_and_other_openai_routes_are_refused_in_openais_shape(
        start: Any) -> None:
    gateway = start()  # the offline model
    api = client(gateway)
    try:
        served = api.models.retrieve("offline")
        with pytest.raises(openai.NotFoundError) as unserved:
            api.models.retrieve("gpt-4o")
        with pytest.raises(openai.NotFoundError) as embeddings:
            api.embeddings.create(model="offline", input="hi")
        post_model = call(gateway.url, "POST", "/v1/models/offline", {})
        native = call(gateway.url, "GET", "/v1/messages/nothing?session_id=x")
        elsewhere = call(gateway.url, "GET", "/nothing")
    finally:
        gateway.end()
    assert (served.id, served.object) == ("offline", "model")
    assert unserved.value.code == "model_not_found" and "offline" in unserved.value.message
    assert embeddings.value.code == "not_found"
    assert "no such endpoint: /v1/embeddings" in embeddings.value.message
    assert post_model.status == 405 and post_model.headers["allow"] == "GET"
    assert post_model.json()["error"]["type"] == "invalid_request_error"
    assert native.status == elsewhere.status == 404
    assert isinstance(native.json()["error"], str), "hookline's own routes keep their shape"
    assert "no such endpoint: /nothing" in elsewhere.json()["error"]


def test_a_failed_turn_is_an_openai_error_not_retried_and_logged(
        start: Any, tmp_path: Path) -> None:
    outage = {"error": {"kind": "provider", "message": "simulated outage"}}
    spec = scripted(tmp_path, [outage, outage, {"text": "a retry ran the turn again"}])
    gateway = start(HOOKLINE_MODEL=spec)
    api = client(gateway)
    try:
        raw = api.chat.completions.with_raw_response.create(model=spec, messages=user("hi"),
                                                            stream=True)
        with pytest.raises(openai.APIError, match="simulated outage"):
            list(raw.parse())
        streamed_line = gateway.wait_for_line(
            f"http.turn_failed request={raw.headers['hookline-request-id']}")
        with pytest.raises(openai.InternalServerError, match="simulated outage") as failed:
            api.chat.completions.create(model=spec, messages=user("hi"))
        headers = failed.value.response.headers
        whole_line = gateway.wait_for_line(
            f"http.turn_failed request={headers['hookline-request-id']}")
    finally:
        gateway.end()
    assert headers["x-should-retry"] == "false", "the SDK must not run the turn again"
    assert failed.value.code == "turn_failed"
    assert "session=openai:default" in streamed_line and "simulated outage" in whole_line


def test_a_message_too_long_for_the_model_is_the_client_s_400(
        start: Any, tmp_path: Path) -> None:
    """Sending it again will not mend it: 400 `invalid_request_error`, whole and streamed,
    as OpenAI answers a request over the context window."""
    spec = scripted(tmp_path, [{"text": "never asked"}])
    gateway = start(HOOKLINE_MODEL=spec, HOOKLINE_CONTEXT_WINDOW="2000")
    api = client(gateway)
    long = user("word " * 20_000)
    try:
        with pytest.raises(openai.BadRequestError, match="too long") as refused:
            api.chat.completions.create(model=spec, messages=long)
        raw = api.chat.completions.with_raw_response.create(model=spec, messages=long,
                                                            stream=True)
        with pytest.raises(openai.APIError, match="too long") as streamed:
            list(raw.parse())
    finally:
        gateway.end()
    assert refused.value.status_code == 400
    assert refused.value.type == "invalid_request_error"
    assert streamed.value.type == "invalid_request_error"  # type: ignore[attr-defined]


def test_idempotency_keys_replay_completions_whole_and_streamed(
        start: Any, tmp_path: Path) -> None:
    spec = scripted(tmp_path, [{"text": "only once"}, {"text": ["a second ", "run"]},
                               {"text": "ran again!"}])
    gateway = start(HOOKLINE_MODEL=spec)
    api = client(gateway)

    def ask(key: str, text: str = "hello", session: str | None = None, **kwargs: Any) -> Any:
        headers = {"Idempotency-Key": key, **({"X-Hookline-Session": session} if session else {})}
        return api.chat.completions.with_raw_response.create(
            model=spec, messages=user(text), extra_headers=headers, **kwargs)

    try:
        first, again = ask("k1"), ask("k1")
        with pytest.raises(openai.UnprocessableEntityError):
            ask("k1", "another text")
        streamed, replayed = ask("k2", stream=True), ask("k2", stream=True)
        chunks = list(streamed.parse()), list(replayed.parse())
        # The same key and body to another session is no retry: it runs there.
        other = ask("k1", session="someone-else")
    finally:
        gateway.end()
    assert other.parse().choices[0].message.content == "ran again!"
    assert "idempotent-replayed" not in other.headers
    assert first.parse().choices[0].message.content == "only once"
    assert again.parse().choices[0].message.content == "only once"
    assert again.parse().id == first.parse().id, "the first request's completion"
    assert again.headers["idempotent-replayed"] == "true"
    assert [streamed_text(c) for c in chunks] == ["a second run", "a second run"]
    assert {c.id for c in chunks[0]} == {c.id for c in chunks[1]}
    assert replayed.headers["idempotent-replayed"] == "true"


def test_a_completion_is_admitted_like_a_message(start: Any, tmp_path: Path) -> None:
    spec = scripted(tmp_path, [{"text": "slow answer", "delay": 3}])
    gateway = start(HOOKLINE_MODEL=spec, HOOKLINE_HTTP_BUSY_SESSION="drop")
    api = client(gateway)
    busy = {"X-Hookline-Session": "busy"}
    try:
        stream = iter(api.chat.completions.create(model=spec, messages=user("first"),
                                                  stream=True, extra_headers=busy))
        opening = next(stream)  # sent once the turn was admitted: the session is busy
        with pytest.raises(openai.ConflictError) as dropped:
            api.chat.completions.create(model=spec, messages=user("second"), extra_headers=busy)
        rest = list(stream)
    finally:
        gateway.end()
    assert opening.choices[0].delta.role == "assistant"
    assert streamed_text(rest) == "slow answer"
    assert dropped.value.code == "dropped"
    assert "http_busy_session = drop" in dropped.value.message


def test_tool_calls_that_need_a_person_are_denied(
        start: Any, workspace: Path, tmp_path: Path) -> None:
    call_shell = {"name": "shell", "arguments": {"command": "echo ran > ran.txt"}}
    spec = scripted(tmp_path, [{"tool_calls": [call_shell]}, {"text": "it was not run"}])
    gateway = start("--approval", "ask", HOOKLINE_MODEL=spec)
    try:
        answer = client(gateway).chat.completions.create(model=spec, messages=user("run it"))
    finally:
        gateway.end()
    assert answer.choices[0].message.content == "it was not run"
    assert not (workspace / "ran.txt").exists(), "nobody could approve the call"
