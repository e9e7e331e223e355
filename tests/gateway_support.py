"""Helpers for tests that talk to a real `hookline gateway` over loopback HTTP.

`start_gateway_process` runs the console script in a subprocess and reads the address it
listens on; `call`, `post` and `post_stream` send real requests with `http.client`. Every
request carries `Authorization: Bearer TEST_TOKEN` unless told otherwise (`token=None`
sends none); gateways started with `gateway_env` get that token through
`HOOKLINE_HTTP_TOKEN`. Import with `from gateway_support import ...` (tests/ is on
`sys.path`, as the folder of the top-level conftest).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import queue
import shutil
import signal
import sqlite3
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HOOKLINE = shutil.which("hookline", path=str(Path(sys.executable).parent))
START_TIMEOUT = 60.0
TEST_TOKEN = "test-token-0123456789abcdefghijklmnopqrstuvwxyz"
"""The token every test gateway is given (HOOKLINE_HTTP_TOKEN) and every helper sends."""


def gateway_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment without the developer's HOOKLINE_* settings, a fresh home, the
    test token and `extra`."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    environ["HOOKLINE_HOME"] = str(home)
    environ["HOOKLINE_HTTP_TOKEN"] = TEST_TOKEN
    environ.update(extra)
    return environ


@dataclass
class Gateway:
    proc: subprocess.Popen[str]
    gates: Path
    home: Path
    url: str = ""
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    passed: list[str] = field(default_factory=list)
    """Lines read while waiting for another one: stdout and stderr are read by two
    threads, so a later wait may be for a line that arrived first."""

    def wait_for_line(self, text: str, timeout: float = START_TIMEOUT) -> str:
        """The first line containing `text` not returned yet, waiting up to `timeout`."""
        for index, line in enumerate(self.passed):
            if text in line:
                return self.passed.pop(index)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no line containing {text!r}; stdout={self.stdout} "
                                     f"stderr={self.stderr}")
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if text in line:
                return line
            self.passed.append(line)

    def wait_for_gate(self, name: str, timeout: float = 30.0) -> None:
        marker = self.gates / f"{name}.started"
        deadline = time.monotonic() + timeout
        while not marker.exists():
            assert time.monotonic() < deadline, f"turn {name!r} never reached the model"
            assert self.proc.poll() is None, f"gateway exited: {self.stderr}"
            time.sleep(0.02)

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        self.proc.send_signal(signum)
        return self.proc.wait(timeout=timeout)

    def end(self) -> None:
        """Stop the gateway if it still runs: SIGTERM, then SIGKILL after 30 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _pump(stream: Any, into: list[str], lines: queue.Queue[str]) -> None:
    for line in stream:
        into.append(line.rstrip("\n"))
        lines.put(line)


def start_gateway_process(args: list[str], env: Mapping[str, str], cwd: Path,
                          gates: Path | None = None, wait: bool = True,
                          hookline: Sequence[str] = ()) -> Gateway:
    """`hookline gateway ARGS` in a subprocess (`hookline`: how to run it, by default the
    console script); with `wait`, returns once it listens and has logged its start-up
    lines."""
    assert HOOKLINE, "the hookline console script is not installed in this environment"
    proc = subprocess.Popen([*(hookline or [HOOKLINE]), "gateway", *args], cwd=cwd, text=True,
                            env=dict(env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    gateway = Gateway(proc, gates or cwd, Path(env["HOOKLINE_HOME"]))
    for stream, into in ((proc.stdout, gateway.stdout), (proc.stderr, gateway.stderr)):
        threading.Thread(target=_pump, args=(stream, into, gateway.lines), daemon=True).start()
    if wait:
        try:
            line = gateway.wait_for_line("listening on http")
        except AssertionError:
            gateway.end()
            raise
        gateway.url = line.split("listening on ", 1)[1].split()[0]
        gateway.wait_for_line("http channel: try")  # the last line the channel logs at start
    return gateway


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def connect(url: str, timeout: float = 60.0,
            ssl_context: ssl.SSLContext | None = None) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    if parts.scheme == "https":
        return http.client.HTTPSConnection(parts.hostname, parts.port, timeout=timeout,
                                           context=ssl_context)
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)


def request_headers(body: bytes | None, token: str | None,
                    headers: Mapping[str, str] | None) -> dict[str, str]:
    """JSON content type for a body, the bearer token, then `headers` (which win)."""
    result = {"content-type": "application/json"} if body is not None else {}
    if token is not None:
        result["authorization"] = f"Bearer {token}"
    result.update(headers or {})
    return result


def call(url: str, method: str, path: str, payload: Any = None, *, raw: bytes | None = None,
         timeout: float = 60.0, token: str | None = TEST_TOKEN,
         headers: Mapping[str, str] | None = None,
         ssl_context: ssl.SSLContext | None = None) -> Response:
    conn = connect(url, timeout, ssl_context)
    try:
        body = raw if raw is not None else (
            None if payload is None else json.dumps(payload).encode())
        conn.request(method, path, body=body, headers=request_headers(body, token, headers))
        response = conn.getresponse()
        return Response(response.status, {k.lower(): v for k, v in response.getheaders()},
                        response.read())
    finally:
        conn.close()


def post(url: str, payload: Any, **kwargs: Any) -> Response:
    return call(url, "POST", "/v1/messages", payload, **kwargs)


@dataclass
class EventStream:
    status: int
    headers: dict[str, str]
    events: list[tuple[str, Any]]
    comments: list[str]


def post_stream(url: str, payload: dict[str, Any], timeout: float = 60.0,
                token: str | None = TEST_TOKEN,
                ssl_context: ssl.SSLContext | None = None,
                headers: Mapping[str, str] | None = None) -> EventStream:
    """POST with `"stream": true` and read Server-Sent Events until the server ends."""
    conn = connect(url, timeout, ssl_context)
    try:
        body = json.dumps({**payload, "stream": True}).encode()
        conn.request("POST", "/v1/messages", body=body,
                     headers=request_headers(body, token, headers))
        response = conn.getresponse()
        headers = {k.lower(): v for k, v in response.getheaders()}
        if not headers.get("content-type", "").startswith("text/event-stream"):
            return EventStream(response.status, headers, [("json", json.loads(response.read()))],
                               [])
        events: list[tuple[str, Any]] = []
        comments: list[str] = []
        kind, data = "message", []
        for raw in response:
            line = raw.decode("utf-8").rstrip("\r\n")
            if not line:
                if data:
                    events.append((kind, json.loads("\n".join(data))))
                kind, data = "message", []
            elif line.startswith(":"):
                comments.append(line[1:].strip())
            elif line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        return EventStream(response.status, headers, events, comments)
    finally:
        conn.close()


def tape_payloads(home: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(home / "tapes.db")) as db:
        return [row[0] for row in db.execute("SELECT payload FROM entries")]
