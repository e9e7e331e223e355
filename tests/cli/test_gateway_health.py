"""`GET /v1/health` of a real gateway, probed as a stranger and as the token holder.

A test plugin's tape store counts every write check (`check_writable`, what the builtin
health check asks) in a file, and fails it while a flag file exists, with the kind of
reason a database driver gives (host, port, database, driver). Probes without a token
must not make the store write per probe, nor learn that reason; the token holder gets it,
and the gateway log has it once per change of state.
"""

from __future__ import annotations

import errno
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from gateway_support import (
    TEST_TOKEN,
    Gateway,
    Response,
    call,
    gateway_env,
    start_gateway_process,
)
from plugin_site import install_plugin

COUNTING_PLUGIN = '''
import os
from pathlib import Path

from hookline.kernel import hookimpl

HOME = Path(os.environ["HOOKLINE_HOME"])


class CountingPlugin:
    def __init__(self, framework):
        self.framework = framework

    @hookimpl
    def provide_tape_store(self):
        return CountingStore()


class CountingStore:
    def __init__(self):
        from hookline.builtins.store import InMemoryTapeStore

        self.inner = InMemoryTapeStore()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def check_writable(self):
        with open(HOME / "checks", "a") as log:
            log.write("check\\n")
        if (HOME / "down").exists():
            raise OSError(ERRNO, 'connection to server at "db.internal" (10.9.8.7), port '
                                 '6543 failed: FATAL: database "tapes_prod" does not exist '
                                 '(psycopg)')
'''.replace("ERRNO", str(errno.ECONNREFUSED))
LEAKY_WORDS = ("db.internal", "10.9.8.7", "6543", "tapes_prod", "psycopg", "reason")


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    site = install_plugin(tmp_path / "site", "counting_plugin", COUNTING_PLUGIN,
                          "count = counting_plugin:CountingPlugin")
    home = tmp_path / "home"
    home.mkdir()
    started = start_gateway_process(["--port", "0"], gateway_env(home, PYTHONPATH=str(site)),
                                    tmp_path)
    try:
        yield started
    finally:
        started.end()


def checks(gateway: Gateway) -> int:
    path = gateway.home / "checks"
    return len(path.read_text().splitlines()) if path.exists() else 0


def probe(gateway: Gateway, token: str | None = None) -> Response:
    return call(gateway.url, "GET", "/v1/health", token=token)


def until(gateway: Gateway, status: int, token: str | None = None) -> Response:
    """Probe until the cached answer turns to `status` (it may lag one check behind)."""
    deadline = time.monotonic() + 30
    while (answer := probe(gateway, token)).status != status:
        assert time.monotonic() < deadline, f"health never became {status}: {answer.body!r}"
        time.sleep(0.05)
    return answer


def test_many_probes_make_few_store_writes(gateway: Gateway) -> None:
    before = checks(gateway)
    began = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda _: probe(gateway), range(400)))
    elapsed = time.monotonic() - began
    assert {answer.status for answer in answers} == {200}
    # At most one real check per second of probing (plus the one a second may start).
    assert checks(gateway) - before <= int(elapsed) + 2, (checks(gateway) - before, elapsed)


def test_a_stranger_learns_the_status_and_the_token_holder_the_reason(
        gateway: Gateway) -> None:
    assert probe(gateway).json() == {"status": "ok"}
    (gateway.home / "down").write_text("")
    stranger = until(gateway, 503)
    assert stranger.json() == {"status": "unavailable"}
    for answer in (stranger, call(gateway.url, "HEAD", "/v1/health", token=None)):
        assert answer.status == 503
        assert not any(word in answer.body.decode() for word in LEAKY_WORDS), answer.body
    holder = probe(gateway, TEST_TOKEN)
    assert holder.status == 503 and holder.json()["status"] == "unavailable"
    assert 'server at "db.internal" (10.9.8.7), port 6543' in holder.json()["reason"]
    assert holder.json()["reason"].startswith("the tape store cannot write: ")
    wrong = probe(gateway, "not-the-token-0123456789abcdefghijklmnopqrstuvwxyz")
    assert wrong.status == 401 and "db.internal" not in wrong.body.decode()
    # Several real checks fail while strangers keep probing; the log says it once.
    failing_since = checks(gateway)
    deadline = time.monotonic() + 30
    while checks(gateway) < failing_since + 3:
        assert probe(gateway).status == 503 and time.monotonic() < deadline
        time.sleep(0.05)
    (gateway.home / "down").unlink()
    until(gateway, 200)
    assert until(gateway, 200, TEST_TOKEN).json() == {"status": "ok"}
    gateway.end()
    time.sleep(0.2)  # let the reader threads take the last lines
    log = "\n".join(gateway.stdout + gateway.stderr)
    assert log.count("http.health unavailable: the tape store cannot write") == 1, log
    assert log.count("http.health ok again") == 1, log


def test_probes_while_a_check_runs_share_it(anyio_backend: str) -> None:
    """The in-process cache: many callers at once, one check; then one check a second."""
    import anyio

    from hookline.builtins.channels.http.health import HealthCache

    now = [0.0]
    release = None

    async def slow_check() -> str | None:
        assert release is not None
        await release.wait()
        return "down"

    async def main() -> list[Any]:
        nonlocal release
        release = anyio.Event()
        cache = HealthCache(slow_check, clock=lambda: now[0])
        answers: list[Any] = []

        async def ask() -> None:
            answers.append(await cache.reason())

        async with anyio.create_task_group() as group:
            for _ in range(50):
                group.start_soon(ask)
            await anyio.wait_all_tasks_blocked()
            release.set()
        assert cache.checks == 1 and answers == ["down"] * 50
        now[0] += 0.5
        assert await cache.reason() == "down" and cache.checks == 1
        now[0] += 0.6
        assert await cache.reason() == "down" and cache.checks == 2
        return answers

    anyio.run(main, backend=anyio_backend)


def test_a_stranger_polling_on_one_connection_is_paced(gateway: Gateway) -> None:
    """Keep-alive probes without the token get at most five answers a second; a probe on
    a new connection (a load balancer's) is answered at once meanwhile."""
    import http.client

    host, port = gateway.url.split("//", 1)[1].split(":")
    poller = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        began = time.monotonic()
        for _ in range(11):
            poller.request("GET", "/v1/health")
            answer = poller.getresponse()
            assert answer.status == 200 and json.loads(answer.read()) == {"status": "ok"}
        polled = time.monotonic() - began
        fresh_began = time.monotonic()
        assert probe(gateway).status == 200
        fresh = time.monotonic() - fresh_began
    finally:
        poller.close()
    assert polled >= 1.9, polled  # ten gaps of 0.2 s after the first answer
    assert fresh < 0.19, fresh


def test_health_pace_spaces_each_client_alone() -> None:
    from hookline.builtins.channels.http.health import HealthPace

    now = [100.0]
    pace = HealthPace(rate=5.0, clock=lambda: now[0], limit=2)
    assert pace.delay(("a", 1)) == 0.0
    assert pace.delay(("a", 1)) == pytest.approx(0.2)  # asked again at once: waits its gap
    assert pace.delay(("b", 2)) == 0.0  # another connection is not held up
    now[0] += 0.5
    assert pace.delay(("a", 1)) == 0.0  # its turn has come by now
    assert pace.delay(("c", 3)) == 0.0  # over the limit: clients not waiting are forgotten
    assert len(pace._due) <= 3
