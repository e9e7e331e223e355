"""The gateway's trust boundary, tried as an attacker would, over real HTTP on loopback.

Each test starts the real `hookline gateway` console script (fresh hookline home, port 0)
and sends real requests: a web page's cross-origin `text/plain` POST, a DNS-rebinding
`Host`, no token, a wrong token, a browser's `Origin`, remote binds. Every refusal is
checked by its status and by what did not happen (the shell command a `/tool` line asks
for never runs). Malformed and slow requests are tried in test_gateway_malformed.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import ssl
import stat
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trustme
from gateway_support import (
    TEST_TOKEN,
    Gateway,
    call,
    gateway_env,
    post,
    post_stream,
    start_gateway_process,
)
from plugin_site import install_plugin

PROBE_PLUGIN = '''
import os

from hookline.kernel import hookimpl
from hookline.kernel.envelope import get_field


class ProbePlugin:
    """`leak` messages fail with the workspace and home in the error."""

    def __init__(self, framework):
        self.framework = framework

    @hookimpl
    def build_prompt(self, message, session_id, state):
        if str(get_field(message, "content")).startswith("leak"):
            home = os.environ["HOOKLINE_HOME"]
            raise RuntimeError(f"cannot open {self.framework.workspace}/notes/secret.txt "
                               f"or {home}/tapes.db")
        return None
'''


@pytest.fixture
def probe_env(tmp_path: Path) -> dict[str, str]:
    site = install_plugin(tmp_path / "site", "probe_plugin", PROBE_PLUGIN,
                          "probe = probe_plugin:ProbePlugin")
    return {"PYTHONPATH": str(site)}


def shell_line(target: Path) -> dict[str, str]:
    """A message whose `/tool` line (obeyed by the offline model) writes `target`."""
    return {"content": f'/tool shell {{"command": "id > {target}"}}'}


def finished(gateway: Gateway, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    code = gateway.proc.wait(timeout=timeout)
    time.sleep(0.2)  # let the reader threads take the last lines
    return subprocess.CompletedProcess(gateway.proc.args, code, "\n".join(gateway.stdout),
                                       "\n".join(gateway.stderr))


# -- the attack from the issue, and each check on its own ------------------------------


def test_a_web_pages_cross_origin_text_plain_post_runs_nothing(start: Any,
                                                               workspace: Path) -> None:
    gateway = start()
    pwned = workspace / "pwned"  # where a sandboxed command may write
    port = urlsplit(gateway.url).port
    body = json.dumps(shell_line(pwned)).encode()
    attack = {"content-type": "text/plain;charset=UTF-8", "origin": "https://evil.example"}
    # What a page can send without a preflight: no token, text/plain, its own Origin, and
    # (after DNS rebinding) its own name in Host.
    for headers in ({**attack, "host": f"evil.example:{port}"}, attack,
                    {"content-type": "text/plain;charset=UTF-8"}):
        reply = call(gateway.url, "POST", "/v1/messages", raw=body, token=None,
                     headers=headers)
        assert reply.status in (401, 403), reply.body
        assert "error" in reply.json()
    assert not pwned.exists()
    # The same message from a client with the token, as JSON, from no web page, runs.
    assert post(gateway.url, shell_line(pwned)).status == 200
    assert pwned.read_text().startswith("uid=")


def test_a_foreign_host_header_is_refused(start: Any, tmp_path: Path) -> None:
    gateway = start()
    port = urlsplit(gateway.url).port
    target = tmp_path / "rebound"
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}",
                 "localhost.evil.example"):
        reply = post(gateway.url, shell_line(target), headers={"host": host})
        assert reply.status == 403, (host, reply.body)
        assert "Host header names" in reply.json()["error"]
        assert call(gateway.url, "GET", "/v1/health", headers={"host": host}).status == 403
    assert not target.exists()
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", "localhost."):
        assert call(gateway.url, "GET", "/v1/health", headers={"host": host}).status == 200


def test_extra_host_names_are_accepted_only_when_configured(start: Any) -> None:
    gateway = start(HOOKLINE_HTTP_ALLOWED_HOSTS="hookline.internal,10.1.2.3")
    for host in ("hookline.internal:8080", "HOOKLINE.internal", "10.1.2.3"):
        reply = post(gateway.url, {"content": "hi"}, headers={"host": host})
        assert reply.status == 200, (host, reply.body)
    assert post(gateway.url, {"content": "hi"}, headers={"host": "other.internal"}).status == 403


def test_requests_from_web_pages_are_refused(start: Any, tmp_path: Path) -> None:
    gateway = start()
    target = tmp_path / "from-page"
    for headers in ({"origin": "https://evil.example"}, {"origin": "null"},
                    {"origin": gateway.url}, {"sec-fetch-site": "cross-site"},
                    {"sec-fetch-site": "same-site"}):
        reply = post(gateway.url, shell_line(target), headers=headers)
        assert reply.status == 403, (headers, reply.body)
        assert "requests from web pages are refused" in reply.json()["error"]
    assert not target.exists()
    # A preflight from a page gets no CORS permission either.
    preflight = call(gateway.url, "OPTIONS", "/v1/messages", token=None,
                     headers={"origin": "https://evil.example",
                              "access-control-request-method": "POST"})
    assert preflight.status == 403
    assert "access-control-allow-origin" not in preflight.headers


def test_an_allowed_origin_gets_cors_answers(start: Any) -> None:
    origin = "https://app.example.org"
    gateway = start(HOOKLINE_HTTP_ALLOWED_ORIGINS=f"{origin},http://localhost:3000")
    preflight = call(gateway.url, "OPTIONS", "/v1/messages", token=None,
                     headers={"origin": origin, "access-control-request-method": "POST",
                              "access-control-request-headers": "authorization,content-type"})
    assert preflight.status == 204
    assert preflight.headers["access-control-allow-origin"] == origin
    allowed = {name.strip() for name in
               preflight.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "idempotency-key",
            "x-hookline-session"} <= allowed  # a page may send a retry's key and a session
    assert "POST" in preflight.headers["access-control-allow-methods"]
    reply = post(gateway.url, {"content": "from the app"}, headers={"origin": origin})
    assert reply.status == 200 and "from the app" in reply.json()["content"]
    assert reply.headers["access-control-allow-origin"] == origin
    assert reply.headers["access-control-expose-headers"] == "retry-after"
    keyed = post(gateway.url, {"content": "keyed"},
                 headers={"origin": origin, "idempotency-key": "from-the-page"})
    assert keyed.status == 200 and keyed.headers["access-control-allow-origin"] == origin
    # The allowed page still needs the token.
    anonymous = post(gateway.url, {"content": "hi"}, token=None, headers={"origin": origin})
    assert anonymous.status == 401
    assert anonymous.headers["access-control-allow-origin"] == origin
    assert post(gateway.url, {"content": "hi"},
                headers={"origin": "https://app.example.org.evil.example"}).status == 403


def test_a_missing_or_wrong_token_is_refused_everywhere_but_health(start: Any,
                                                                   tmp_path: Path) -> None:
    gateway = start()
    target = tmp_path / "no-token"
    for token in (None, "", "wrong", TEST_TOKEN[:-1], TEST_TOKEN + "x", TEST_TOKEN.upper()):
        reply = post(gateway.url, shell_line(target), token=token or None,
                     headers={"authorization": f"Bearer {token}"} if token == "" else None)
        assert reply.status == 401, (token, reply.body)
        assert reply.headers["www-authenticate"] == 'Bearer realm="hookline"'
        error = reply.json()["error"]
        assert "Authorization: Bearer <token>" in error
        assert "HOOKLINE_HTTP_TOKEN" in error, "says where the token is"
        assert TEST_TOKEN not in error
    for headers in ({"authorization": TEST_TOKEN}, {"authorization": f"Basic {TEST_TOKEN}"}):
        assert post(gateway.url, shell_line(target), token=None,
                    headers=headers).status == 401
    # Unknown paths and wrong methods say nothing to a client without the token.
    assert call(gateway.url, "GET", "/v1/anything", token=None).status == 401
    assert call(gateway.url, "GET", "/v1/messages", token=None).status == 401
    assert not target.exists()
    health = call(gateway.url, "GET", "/v1/health", token=None)
    assert (health.status, health.json()) == (200, {"status": "ok"})
    assert call(gateway.url, "HEAD", "/v1/health", token=None).status == 200
    # The scheme is case-insensitive (RFC 9110); the token is not.
    assert post(gateway.url, {"content": "hi"},
                headers={"authorization": f"bearer {TEST_TOKEN}"}).status == 200


def test_post_bodies_must_be_declared_json(start: Any, tmp_path: Path) -> None:
    gateway = start()
    target = tmp_path / "not-json"
    body = json.dumps(shell_line(target)).encode()
    for content_type in ("text/plain", "text/plain;charset=UTF-8",
                         "application/x-www-form-urlencoded", "multipart/form-data; b=x",
                         "application/jsonx", None):
        headers = {"content-type": content_type} if content_type else {"content-type": ""}
        reply = call(gateway.url, "POST", "/v1/messages", raw=body, headers=headers)
        assert reply.status == 415, (content_type, reply.body)
        assert "Content-Type: application/json" in reply.json()["error"]
    assert not target.exists()
    ok = call(gateway.url, "POST", "/v1/messages", raw=json.dumps({"content": "ok"}).encode(),
              headers={"content-type": "Application/JSON; charset=utf-8"})
    assert ok.status == 200


# -- the token file ----------------------------------------------------------------------


def test_the_token_is_made_once_kept_private_and_shown_how_to_use(start: Any,
                                                                  home: Path) -> None:
    gateway = start(token=None)
    token_file = home / "http_token"
    mode = stat.S_IMODE(token_file.stat().st_mode)
    assert mode == 0o600, oct(mode)
    token = token_file.read_text().strip()
    assert len(token) >= 43, "at least 256 bits, base64url"
    log = "\n".join(gateway.stderr)
    assert f"the token is in {token_file}" in log
    assert f'curl -H "Authorization: Bearer $(cat {token_file})"' in log
    assert token not in log and token not in "\n".join(gateway.stdout), "never printed"
    whole = post(gateway.url, {"content": "with the file's token"}, token=token)
    assert whole.status == 200 and "with the file's token" in whole.json()["content"]
    streamed = post_stream(gateway.url, {"content": "streamed too"}, token=token)
    assert streamed.status == 200 and streamed.events[-1][0] == "done"
    assert post(gateway.url, {"content": "hi"}).status == 401, "the test token is not it"
    gateway.end()
    again = start(token=None)
    assert token_file.read_text().strip() == token, "the same token on the next start"
    assert post(again.url, {"content": "hi"}, token=token).status == 200


def test_a_token_file_others_can_read_is_refused(start: Any, home: Path) -> None:
    home.mkdir(parents=True)
    token_file = home / "http_token"
    token_file.write_text("x" * 40)
    token_file.chmod(0o644)
    gateway = start(token=None, wait=False)
    out = finished(gateway)
    assert out.returncode == 1
    assert (f"error: channel 'http' failed: the http token file {token_file} can be read by "
            f"other users") in out.stderr
    assert "chmod 600" in out.stderr and "Traceback" not in out.stderr
    token_file.chmod(0o600)
    token_file.write_text("short")
    out = finished(start(token=None, wait=False))
    assert out.returncode == 1 and "holds no valid token" in out.stderr


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_a_token_file_that_is_a_fifo_or_a_link_is_refused(
    start: Any, home: Path, tmp_path: Path, kind: str
) -> None:
    """A FIFO never blocks the start, and a link (say, to a file another user can plant)
    is never followed: the gateway stops with one line naming the file."""
    home.mkdir(parents=True)
    token_file = home / "http_token"
    if kind == "fifo":
        os.mkfifo(token_file)
    else:
        target = tmp_path / "planted"
        target.write_text("y" * 40)
        target.chmod(0o600)
        token_file.symlink_to(target)
    out = finished(start(token=None, wait=False))
    assert out.returncode == 1
    assert (f"error: channel 'http' failed: the http token file {token_file} is not a "
            f"regular file; remove it") in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_a_short_configured_token_is_a_settings_error(start: Any) -> None:
    out = finished(start(token="too-short", wait=False, HOOKLINE_HTTP_TOKEN="too-short"))
    assert out.returncode == 1
    assert "HOOKLINE_HTTP_TOKEN must be at least 32 printable characters" in out.stderr
    assert "too-short" not in out.stderr, "a secret is never echoed"


# -- binding -----------------------------------------------------------------------------


def test_a_remote_bind_needs_allow_remote(start: Any) -> None:
    out = finished(start("--host", "0.0.0.0", wait=False))
    assert out.returncode == 1
    assert out.stderr.startswith("error: channel 'http' failed: refusing to listen on 0.0.0.0")
    assert out.stderr.count("error:") == 1, "one failure, one line"
    assert "--allow-remote" in out.stderr and "Traceback" not in out.stderr
    out = finished(start(wait=False, HOOKLINE_HTTP_HOST="0.0.0.0"))
    assert out.returncode == 1 and "refusing to listen on 0.0.0.0" in out.stderr

    gateway = start("--host", "0.0.0.0", "--allow-remote")
    log = "\n".join(gateway.stderr)
    assert "serves plain HTTP" in log and "listening on every address" in log
    local = gateway.url.replace("0.0.0.0", "127.0.0.1")
    assert post(local, {"content": "hi"}, token=None).status == 401, "the token stays required"
    assert post(local, {"content": "hi"}).status == 200


def test_a_remote_bind_without_authentication_never_starts(start: Any) -> None:
    out = finished(start("--host", "0.0.0.0", "--allow-remote", wait=False,
                         HOOKLINE_HTTP_AUTH="false"))
    assert out.returncode == 1
    assert "refusing to listen on 0.0.0.0 (0.0.0.0) with authentication off" in out.stderr
    out = finished(start(wait=False, HOOKLINE_HTTP_AUTH="false", HOOKLINE_HTTP_HOST="0.0.0.0",
                         HOOKLINE_HTTP_ALLOW_REMOTE="true"))
    assert out.returncode == 1 and "with authentication off" in out.stderr


def test_a_remote_bind_with_the_sandbox_off_needs_a_second_setting(start: Any) -> None:
    out = finished(start("--host", "0.0.0.0", "--allow-remote", wait=False,
                         HOOKLINE_SANDBOX="off"))
    assert out.returncode == 1
    assert "refusing to listen on 0.0.0.0 (0.0.0.0) with sandbox = off" in out.stderr
    assert "http_allow_unsandboxed = true" in out.stderr
    gateway = start("--host", "0.0.0.0", "--allow-remote", HOOKLINE_SANDBOX="off",
                    HOOKLINE_HTTP_ALLOW_UNSANDBOXED="true")
    assert any("the shell sandbox is OFF" in line for line in gateway.stderr)
    local = start(HOOKLINE_SANDBOX="off")  # on loopback the one setting is enough (warned)
    assert any("the shell sandbox is OFF" in line for line in local.stderr)


def test_authentication_off_on_loopback_is_warned_and_keeps_the_other_checks(
        start: Any, tmp_path: Path) -> None:
    gateway = start(HOOKLINE_HTTP_AUTH="false")
    assert any("http authentication is OFF" in line for line in gateway.stderr)
    assert post(gateway.url, {"content": "no token needed"}, token=None).status == 200
    target = tmp_path / "auth-off"
    assert post(gateway.url, shell_line(target), token=None,
                headers={"origin": "https://evil.example"}).status == 403
    assert post(gateway.url, shell_line(target), token=None,
                headers={"host": "evil.example"}).status == 403
    assert call(gateway.url, "POST", "/v1/messages", raw=json.dumps(shell_line(target)).encode(),
                token=None, headers={"content-type": "text/plain"}).status == 415
    assert not target.exists()


# -- TLS ---------------------------------------------------------------------------------


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path, ssl.SSLContext]:
    authority = trustme.CA()
    issued = authority.issue_cert("127.0.0.1", "localhost")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    for extra in issued.cert_chain_pems[1:]:
        extra.write_to_path(str(cert), append=True)
    issued.private_key_pem.write_to_path(str(key))
    client = ssl.create_default_context()
    authority.configure_trust(client)
    return cert, key, client


def test_https_with_a_generated_certificate(start: Any,
                                           certificate: tuple[Path, Path, Any]) -> None:
    cert, key, client = certificate
    gateway = start(HOOKLINE_HTTP_CERTFILE=str(cert), HOOKLINE_HTTP_KEYFILE=str(key))
    assert gateway.url.startswith("https://127.0.0.1:")
    whole = post(gateway.url, {"content": "over tls"}, ssl_context=client)
    assert whole.status == 200 and "over tls" in whole.json()["content"]
    streamed = post_stream(gateway.url, {"content": "streamed over tls"}, ssl_context=client)
    assert streamed.events[-1][0] == "done"
    assert "streamed over tls" in streamed.events[-1][1]["content"]
    with pytest.raises(ssl.SSLError):
        post(gateway.url, {"content": "hi"}, ssl_context=ssl.create_default_context())
    plain = gateway.url.replace("https://", "http://")
    with pytest.raises((ConnectionError, OSError)):
        post(plain, {"content": "hi"}, timeout=10)


def test_bad_tls_settings_are_one_clear_error(start: Any, tmp_path: Path,
                                              certificate: tuple[Path, Path, Any]) -> None:
    cert, key, _ = certificate
    out = finished(start(wait=False, HOOKLINE_HTTP_CERTFILE=str(cert)))
    assert out.returncode == 1
    assert "http_certfile is set (env:HOOKLINE_HTTP_CERTFILE) but http_keyfile is not" in \
        out.stderr
    out = finished(start(wait=False, HOOKLINE_HTTP_CERTFILE=str(key),
                         HOOKLINE_HTTP_KEYFILE=str(tmp_path / "missing.pem")))
    assert out.returncode == 1 and "cannot serve HTTPS with http_certfile" in out.stderr
    assert "Traceback" not in out.stderr


# -- what error bodies and logs never carry --------------------------------------------


def test_errors_never_show_credentials(start: Any) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    gateway = start(HOOKLINE_MODEL="openai:gpt-4o-mini", HOOKLINE_API_KEY="sk-test",
                    HOOKLINE_API_BASE=f"http://user:PASSWORD@127.0.0.1:{port}/v1")
    reply = post(gateway.url, {"content": "hi"}, timeout=120)
    assert reply.status == 500
    assert "PASSWORD" not in reply.body.decode()
    # The operator's endpoint is theirs: a client sees neither it nor its masked form.
    assert "<api_base>" in reply.json()["error"] and f":{port}" not in reply.body.decode()
    streamed = post_stream(gateway.url, {"content": "hi"}, timeout=120)
    assert "PASSWORD" not in json.dumps(streamed.events)
    assert f":{port}" not in json.dumps(streamed.events)
    gateway.end()
    assert "PASSWORD" not in "\n".join(gateway.stderr + gateway.stdout)


def test_a_provider_error_that_quotes_the_key_does_not_pass_it_on(start: Any) -> None:
    """A self-hosted server or a proxy may echo the key it refused: the client gets
    `<secret>`, and so does the log."""
    from openai_server import OpenAIServer, Reply

    key = "sk-operators-key-0123456789"
    refusal = Reply.failure(401, f"Incorrect API key provided: {key}")
    with OpenAIServer([refusal] * 4) as server:
        gateway = start(HOOKLINE_MODEL="openai-compatible:m", HOOKLINE_API_KEY=key,
                        HOOKLINE_API_BASE=server.base_url)
        reply = post(gateway.url, {"content": "hi"}, timeout=120)
        completion = call(gateway.url, "POST", "/v1/chat/completions", {
            "model": "openai-compatible:m", "messages": [{"role": "user", "content": "hi"}]})
        gateway.end()
    assert "Incorrect API key provided: <secret>" in reply.json()["error"], reply.body
    for said in (reply.body.decode(), completion.body.decode(),
                 "\n".join(gateway.stderr + gateway.stdout)):
        assert key not in said


def test_errors_show_paths_relative_to_the_workspace(start: Any, probe_env: dict[str, str],
                                                      workspace: Path, home: Path) -> None:
    gateway = start(**probe_env)
    reply = post(gateway.url, {"content": "leak the paths"})
    assert reply.status == 500
    body = reply.body.decode()
    assert str(workspace) not in body and str(home) not in body
    assert "cannot open notes/secret.txt or $HOOKLINE_HOME/tapes.db" in reply.json()["error"]
    assert "Traceback" not in body
    # A tool refusing a path outside the workspace names it relative to the workspace.
    escaped = post(gateway.url, {"content": '/tool fs_read {"path": "../../etc/passwd"}'})
    assert "outside the workspace" in escaped.body.decode()
    assert str(workspace) not in escaped.body.decode()


# -- the gateway security page's examples ------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "gateway-security.md"


def console_examples(text: str) -> list[tuple[str, list[str]]]:
    """The `$ command` lines of every ```console block, each with the lines it prints."""
    examples: list[tuple[str, list[str]]] = []
    for block in re.findall(r"^```console\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        for line in block.splitlines():
            if line.startswith("$ "):
                examples.append((line[2:], []))
            elif examples:
                examples[-1][1].append(line)
    return examples


def test_the_gateway_security_page_examples_run(tmp_path: Path) -> None:
    examples = console_examples(DOCS.read_text("utf-8"))
    assert len(examples) >= 6
    curl = shutil.which("curl")
    assert curl, "the examples use curl (.ci/run installs it)"
    env = gateway_env(tmp_path / ".hookline", HOME=str(tmp_path))
    del env["HOOKLINE_HTTP_TOKEN"]  # the page uses the token file
    gateway = start_gateway_process(["--port", "0"], env, tmp_path)
    pwned = tmp_path / "pwned"
    try:
        for command, expected in examples:
            command = command.replace("http://127.0.0.1:8787", gateway.url)
            command = command.replace("/tmp/pwned", str(pwned))
            out = subprocess.run(["bash", "-c", command], env=env, capture_output=True,
                                 text=True, timeout=60)
            assert out.returncode == 0, (command, out.stderr)
            assert out.stdout.splitlines() == expected, command
    finally:
        gateway.end()
    assert not pwned.exists()
