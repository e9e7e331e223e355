"""Gateway throughput and latency on SQLite, on PostgreSQL, and as two PostgreSQL replicas.

The set-ups, each measured with the same load (the offline model unless said, 50
sessions, 200 concurrent clients on keep-alive HTTP/1.1 connections, posting whole-reply
messages as fast as the replies come):

- floor: a bare hypercorn app answering the same JSON (no framework, no store);
- sqlite: one `hookline gateway` on the default SQLite store;
- postgres: one gateway on a PostgreSQL store;
- 2 replicas: two gateways on one PostgreSQL database, clients split between them (what a
  reverse proxy does);
- streamed: a SQLite gateway whose model streams each reply in `DELTAS` (20) text
  deltas (a scripted model), measured with whole replies, then with each reply streamed
  as Server-Sent Events: the difference is what the deltas cost, the CPU a delta.

Printed: turns/s, p50 and p99 latency, and each as a ratio to the floor, in one run. The
PostgreSQL server is `--postgres-url` (or HOOKLINE_BENCH_POSTGRES_URL), else a throwaway
cluster started here (as tests/postgres_support.py does, but with fsync on, so that
commits are as durable as SQLite's `synchronous=FULL`; needs the binaries). The load
generator runs in this process, on one core: on a small machine it shares the CPU with
the servers, so read the ratios, not the absolute figures. Not a test: nothing is judged.

    python benchmarks/bench_replicas.py [--seconds 10] [--clients 200] [--sessions 50]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOKEN = "bench-token-0123456789abcdefghijklmnopqrstuvwxyz"
DELTAS = 20
"""Text deltas a reply of the streamed set-up."""
HOOKLINE = shutil.which("hookline", path=str(Path(sys.executable).parent)) or "hookline"
TESTS = Path(__file__).resolve().parents[1] / "tests"

FLOOR_APP = r'''
import asyncio, json, sys
from hypercorn.asyncio import serve
from hypercorn.config import Config

REPLY = "[offline model] You said: {!r}. This reply comes from hookline's offline model."

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    data = json.loads(body)
    content = REPLY.format(data["content"])
    out = json.dumps({"session_id": data["session_id"], "content": content, "outbounds": [
        {"session_id": data["session_id"], "channel": "http", "chat_id": "default",
         "content": content, "output_channel": "http", "kind": "normal"}]}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out})

config = Config()
config.bind = [f"127.0.0.1:{sys.argv[1]}"]
config.accesslog = None
print(f"listening on http://127.0.0.1:{sys.argv[1]}", flush=True)
asyncio.run(serve(app, config))
'''


@dataclass
class Result:
    name: str
    turns: int
    seconds: float
    latencies: list[float]
    errors: int
    cpu: float = 0.0
    """CPU seconds the servers used while measured (user + system, their own accounting)."""
    deltas: int = 0
    """Text events received by the streamed replies measured."""

    @property
    def cpu_ms_per_turn(self) -> float:
        return self.cpu * 1000 / self.turns if self.turns else 0.0

    @property
    def rate(self) -> float:
        return self.turns / self.seconds

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


PIDS: dict[str, int] = {}
"""The process id behind each server URL (for its CPU accounting)."""


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process has used, from its own accounting (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def process(args: list[str], env: dict[str, str], cwd: Path) -> Iterator[str]:
    """A server process; yields the URL of its `listening on` line."""
    proc = subprocess.Popen(args, env=env, cwd=cwd, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "listening on http" in line:
                url = line.split("listening on ", 1)[1].split()[0]
                break
        else:
            raise RuntimeError(f"{args[0]} exited before listening")
        # Keep draining its output so a chatty server never blocks on a full pipe.
        threading.Thread(target=_drain, args=(proc.stdout,), daemon=True).start()
        _wait_for(url)
        PIDS[url] = proc.pid
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_for(url: str, timeout: float = 30.0) -> None:
    """Until the server accepts connections (the floor app says it listens a bit early)."""
    host, port = url.split("//", 1)[1].split(":")
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _drain(stream: Any) -> None:
    for _line in stream:
        pass


def gateway_env(home: Path, store: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env.update(HOOKLINE_HOME=str(home), HOOKLINE_HTTP_TOKEN=TOKEN, HOOKLINE_MODEL="offline",
               HOOKLINE_HTTP_TIMEOUT="600")
    if store:
        env["HOOKLINE_TAPE_STORE"] = store
    return env


async def one_client(url: str, sessions: int, offset: int, deadline: list[float],
                     latencies: list[float], errors: list[int],
                     deltas: list[int] | None = None) -> None:
    """Keep one connection busy until the deadline: post, wait for the reply, repeat.
    With `deltas`, the replies are streamed and each one's text events counted there."""
    host, port = url.split("//", 1)[1].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    n = offset
    try:
        while time.perf_counter() < deadline[0]:
            body = json.dumps({"content": f"message {n}", "session_id": f"bench-{n % sessions}",
                               "stream": deltas is not None}).encode()
            head = (f"POST /v1/messages HTTP/1.1\r\nHost: {host}:{port}\r\n"
                    f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n").encode()
            started = time.perf_counter()
            writer.write(head + body)
            line = await reader.readline()
            if not line:  # hypercorn closes a keep-alive connection after 1,000 requests
                writer.close()
                reader, writer = await asyncio.open_connection(host, int(port))
                continue
            status = int(line.split()[1])
            length, chunked = 0, False
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
                elif name.lower() == "transfer-encoding":
                    chunked = "chunked" in value.lower()
            texts = (await read_chunked(reader)).count(b"event: text\n") if chunked else 0
            if not chunked:
                await reader.readexactly(length)
            if time.perf_counter() < deadline[0] and deadline[1] <= started:
                latencies.append(time.perf_counter() - started)
                if deltas is not None:
                    deltas.append(texts)
                if status != 200:
                    errors.append(status)
            n += 200_003  # a different message each time, the same session stripe
    finally:
        writer.close()


async def read_chunked(reader: asyncio.StreamReader) -> bytes:
    """A chunked body (the SSE stream of a streamed reply), to its last chunk."""
    parts = []
    while size := int((await reader.readline()).split(b";")[0], 16):
        parts.append((await reader.readexactly(size + 2))[:-2])
    await reader.readline()  # the empty line after the last chunk
    return b"".join(parts)


async def servers_cpu(urls: list[str], deadline: list[float]) -> float:
    """The CPU seconds the servers behind `urls` use between the two deadlines."""
    pids = [PIDS[url] for url in urls]
    await asyncio.sleep(max(0.0, deadline[1] - time.perf_counter()))
    before = sum(cpu_seconds(pid) for pid in pids)
    await asyncio.sleep(max(0.0, deadline[0] - time.perf_counter()))
    return sum(cpu_seconds(pid) for pid in pids) - before


async def load(urls: list[str], clients: int, sessions: int, warmup: float, seconds: float,
               deltas: list[int] | None = None) -> tuple[list[float], int, float, float]:
    now = time.perf_counter()
    deadline = [now + warmup + seconds, now + warmup]  # [end, start of measurement]
    latencies: list[float] = []
    errors: list[int] = []
    cpu = asyncio.ensure_future(servers_cpu(urls, deadline))
    await asyncio.gather(*(one_client(urls[n % len(urls)], sessions, n, deadline, latencies,
                                      errors, deltas) for n in range(clients)))
    return latencies, len(errors), seconds, await cpu


def measure(name: str, urls: list[str], args: argparse.Namespace,
            streamed: bool = False) -> Result:
    deltas: list[int] | None = [] if streamed else None
    latencies, errors, seconds, cpu = asyncio.run(load(urls, args.clients, args.sessions,
                                                       args.warmup, args.seconds, deltas))
    result = Result(name, len(latencies), seconds, latencies, errors, cpu, sum(deltas or []))
    if streamed:
        print(f"  {name}: {result.deltas / max(1, result.turns):.1f} deltas a reply, "
              f"{result.cpu * 1000 / max(1, result.deltas):.3f} ms CPU a delta", file=sys.stderr)
    print(f"  {name}: {result.rate:.0f} turns/s, p50 {result.quantile(0.5) * 1000:.1f} ms, "
          f"p99 {result.quantile(0.99) * 1000:.1f} ms, {errors} errors, "
          f"{result.cpu_ms_per_turn:.2f} ms CPU a turn", file=sys.stderr)
    return result


@contextlib.contextmanager
def postgres(args: argparse.Namespace) -> Iterator[str]:
    url = args.postgres_url or os.environ.get("HOOKLINE_BENCH_POSTGRES_URL")
    if url:
        yield url
        return
    sys.path.insert(0, str(TESTS))
    from postgres_support import start_cluster

    cluster = start_cluster(fsync=True)  # durable commits, as SQLite's synchronous=FULL
    try:
        yield cluster.url
    finally:
        cluster.remove()


def scripted_turns(root: Path, args: argparse.Namespace) -> Path:
    """A scripted model's file with a reply of `DELTAS` pieces for every turn the two
    scripted measurements can take (more than 1,500 turns/s)."""
    turns = int(1500 * 2 * (args.warmup + args.seconds)) + 1000
    reply = [f"word{n} " for n in range(DELTAS)]
    path = root / "scripted.json"
    path.write_text(json.dumps({"turns": [{"text": reply}] * turns}))
    return path


SCHEMAS: list[str] = []


def fresh_schema(server: str) -> str:
    """A new schema for one set-up (dropped at the end), as the URL selecting it."""
    sys.path.insert(0, str(TESTS))
    from postgres_support import create_schema

    name, url = create_schema(server)
    SCHEMAS.append(name)
    return url


def drop_schemas(server: str) -> None:
    from postgres_support import drop_schema

    for name in SCHEMAS:
        drop_schema(server, name)


class _Skip(Exception):
    """The PostgreSQL set-ups are not wanted (--no-postgres)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--postgres-url", default=None)
    parser.add_argument("--no-postgres", action="store_true",
                        help="only the floor and the SQLite gateway")
    args = parser.parse_args()
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as scratch, \
            (contextlib.nullcontext("") if args.no_postgres else postgres(args)) as server:
        root = Path(scratch)
        workspace = root / "workspace"
        workspace.mkdir()
        print(f"load: {args.clients} clients, {args.sessions} sessions, {args.seconds:g} s "
              f"after {args.warmup:g} s of warm-up", file=sys.stderr)
        port = free_port()
        with process([sys.executable, "-c", FLOOR_APP, str(port)], dict(os.environ),
                     workspace) as url:
            results.append(measure("floor (bare hypercorn)", [url], args))
        gateway = [HOOKLINE, "gateway", "--port", "0"]
        with process(gateway, gateway_env(root / "home-sqlite", None), workspace) as url:
            results.append(measure("sqlite, 1 gateway", [url], args))
        scripted = gateway_env(root / "home-scripted", None)
        scripted["HOOKLINE_MODEL"] = f"scripted:{scripted_turns(root, args)}"
        with process(gateway, scripted, workspace) as url:
            whole = measure(f"sqlite, {DELTAS} deltas, whole", [url], args)
            streamed = measure(f"sqlite, {DELTAS} deltas, SSE", [url], args, streamed=True)
        try:
            if not server:
                raise _Skip
            url_pg = fresh_schema(server)
            with process(gateway, gateway_env(root / "home-pg", url_pg), workspace) as url:
                results.append(measure("postgres, 1 gateway", [url], args))
            url_pg = fresh_schema(server)
            with process(gateway, gateway_env(root / "home-a", url_pg), workspace) as url_a, \
                    process(gateway, gateway_env(root / "home-b", url_pg), workspace) as url_b:
                results.append(measure("postgres, 2 replicas", [url_a, url_b], args))
        except _Skip:
            pass
        finally:
            if server:
                drop_schemas(server)
    floor = results[0]
    print(f"\n{'set-up':<24} {'turns/s':>9} {'x floor':>8} {'p50 ms':>8} {'x floor':>8} "
          f"{'p99 ms':>8} {'x floor':>8} {'errors':>6} {'CPU ms/turn':>10}")
    for result in [*results, whole, streamed]:
        p50, p99 = result.quantile(0.5), result.quantile(0.99)
        print(f"{result.name:<24} {result.rate:>9.0f} {result.rate / floor.rate:>8.3f} "
              f"{p50 * 1000:>8.1f} {p50 / floor.quantile(0.5):>8.1f} "
              f"{p99 * 1000:>8.1f} {p99 / floor.quantile(0.99):>8.1f} {result.errors:>6} "
              f"{result.cpu_ms_per_turn:>10.2f}")
    per_reply = streamed.deltas / max(1, streamed.turns)
    marginal = (streamed.cpu_ms_per_turn - whole.cpu_ms_per_turn) / max(1.0, per_reply)
    print(f"\nstreamed: {per_reply:.1f} text deltas a reply, "
          f"{streamed.cpu * 1000 / max(1, streamed.deltas):.3f} ms of CPU a delta with the "
          f"turn's share, {marginal:.3f} ms a delta over the same replies whole")
    print(f"{os.cpu_count()} CPU(s) shared by the servers, PostgreSQL and the load "
          f"generator")


if __name__ == "__main__":
    main()
