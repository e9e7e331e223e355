"""A turn's latency on an idle gateway and while 16 connections poll `GET /v1/health`.

One `hookline gateway` on SQLite (offline model). First `--turns` turns one after the
other with nothing else going on; then the same number while 16 keep-alive connections,
without the token, ask for `/v1/health` as fast as it answers. Printed: the median turn
latency of each, their ratio, and the health answers a second. Health checks the store
at most once a second whatever the number of callers, so the goal is a ratio of at most
1.2. Not a test: the PASS / MISS line never changes the exit status.

    python benchmarks/bench_health.py [--turns 100] [--pollers 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_replicas import HOOKLINE, TOKEN, gateway_env, process

GOAL = 1.2


async def request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes,
                  body: bytes = b"") -> int:
    writer.write(head + body)
    line = await reader.readline()
    if not line:
        return 0  # the server closed the connection
    status = int(line.split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def turns(host: str, port: int, count: int) -> list[float]:
    reader, writer = await asyncio.open_connection(host, port)
    latencies = []
    try:
        for n in range(count):
            body = json.dumps({"content": f"message {n}", "session_id": f"s-{n % 5}"}).encode()
            head = (f"POST /v1/messages HTTP/1.1\r\nHost: {host}\r\n"
                    f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n").encode()
            started = time.perf_counter()
            if await request(reader, writer, head, body) != 200:
                raise SystemExit("a turn failed")
            latencies.append(time.perf_counter() - started)
    finally:
        writer.close()
    return latencies


async def poll(host: str, port: int, stop: asyncio.Event, answers: list[int]) -> None:
    head = f"GET /v1/health HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    while not stop.is_set():
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while not stop.is_set():
                status = await request(reader, writer, head)
                if not status:
                    break  # closed by the server: a new connection
                answers.append(status)
        finally:
            writer.close()


async def measure(url: str, count: int, pollers: int) -> tuple[float, float, float, int]:
    host, port = url.split("//", 1)[1].split(":")
    await turns(host, int(port), 10)  # warm-up
    idle = statistics.median(await turns(host, int(port), count))
    stop = asyncio.Event()
    answers: list[int] = []
    tasks = [asyncio.ensure_future(poll(host, int(port), stop, answers))
             for _ in range(pollers)]
    await asyncio.sleep(0.5)
    started, before = time.perf_counter(), len(answers)
    busy = statistics.median(await turns(host, int(port), count))
    rate = (len(answers) - before) / (time.perf_counter() - started)
    stop.set()
    await asyncio.gather(*tasks)
    return idle, busy, rate, sum(1 for status in answers if status != 200)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--pollers", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "workspace").mkdir()
        with process([HOOKLINE, "gateway", "--port", "0"], gateway_env(root / "home", None),
                     root / "workspace") as url:
            idle, busy, rate, failed = asyncio.run(measure(url, args.turns, args.pollers))
    ratio = busy / idle
    print(f"turn median idle            {idle * 1000:8.2f} ms")
    print(f"turn median, {args.pollers} polling health {busy * 1000:8.2f} ms")
    print(f"health answers              {rate:8.0f} /s ({failed} not 200)")
    verdict = "PASS" if ratio <= GOAL else "MISS"
    print(f"goal: a turn under health polling <= {GOAL}x idle: {verdict} ({ratio:.2f}x)")


if __name__ == "__main__":
    main()
