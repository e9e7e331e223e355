"""A real PostgreSQL server for the tests, and PostgreSQL tape stores on it.

The server: `HOOKLINE_TEST_POSTGRES_URL` when set (`.ci/run` starts one and exports it);
else a throwaway cluster this module starts (`initdb` in a temporary folder, a loopback
port, password authentication, run as an unprivileged user when the tests run as root)
when the PostgreSQL binaries are found (on PATH, `HOOKLINE_TEST_POSTGRES_BIN`, or Debian's
`/usr/lib/postgresql/<version>/bin`). Without either, PostgreSQL tests FAIL when the `CI`
variable is set and are skipped, with a loud reason, otherwise.

Each store gets a fresh schema (`search_path` set through the URL's `options`), so tests
share one server without seeing each other's tapes. `BlockingStore` gives the async store
the synchronous protocol, through an asyncio loop in a portal thread, so the synchronous
store contract runs on it unchanged.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

ENV_URL = "HOOKLINE_TEST_POSTGRES_URL"
ENV_BIN = "HOOKLINE_TEST_POSTGRES_BIN"
PASSWORD = "pw-" + secrets.token_hex(8)
"""The superuser password of clusters started here (tests check it is never printed)."""


def password_of(url: str) -> str:
    """The URL's password (a placeholder no text contains when it has none), for tests
    checking that it is never shown."""
    return urlsplit(url).password or "\x00no password\x00"


def find_binaries() -> Path | None:
    """The folder holding initdb and pg_ctl, or None."""
    candidates = [os.environ.get(ENV_BIN, "")]
    found = shutil.which("initdb")
    if found:
        candidates.append(str(Path(found).resolve().parent))
    candidates += sorted((str(p) for p in Path("/usr/lib/postgresql").glob("*/bin")),
                         reverse=True)
    for folder in candidates:
        if folder and (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    return None


def unavailable(reason: str) -> None:
    """Fail in CI, skip (loudly) elsewhere: a CI run never silently skips these tests."""
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"NO POSTGRESQL: {reason}; set {ENV_URL} or install the PostgreSQL binaries")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Cluster:
    """A throwaway PostgreSQL cluster run by `user` (None: the current user)."""

    bin: Path
    root: Path
    port: int
    user: str | None
    fsync: bool = False
    """Off for tests (speed); a benchmark turns it on to measure real durability."""

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def url(self) -> str:
        return f"postgresql://hookline:{PASSWORD}@127.0.0.1:{self.port}/postgres"

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.bin / args[0]), *args[1:]], cwd="/", text=True,
                              capture_output=True, check=check, user=self.user,
                              group=None if self.user is None else _group(self.user),
                              extra_groups=None if self.user is None else [])

    def start(self) -> None:
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data} "
                   f"-c fsync={'on' if self.fsync else 'off'} -c max_connections=200 "
                   f"-c shared_buffers=64MB")
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "60",
                 "-o", options, "start")

    def stop(self, mode: str = "fast") -> None:
        self.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def remove(self) -> None:
        """Stop the server (immediately) and delete its folder."""
        if (self.data / "postmaster.pid").exists():
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def _group(user: str) -> int:
    return pwd.getpwnam(user).pw_gid


def start_cluster(*, fsync: bool = False) -> Cluster:
    """initdb and start a cluster in a new temporary folder (owned by the cluster's user);
    `cluster.remove()` stops it and deletes the folder."""
    binaries = find_binaries()
    if binaries is None:
        raise RuntimeError("no PostgreSQL binaries")
    user = "nobody" if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix="hookline-pg-"))
    (root / "pw").write_text(PASSWORD + "\n")
    if user is not None:
        entry = pwd.getpwnam(user)
        for path in (root, root / "pw"):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    cluster = Cluster(binaries, root, free_port(), user, fsync)
    try:
        cluster.run("initdb", "-D", str(cluster.data), "-U", "hookline",
                    "--auth=scram-sha-256", f"--pwfile={root / 'pw'}", "-E", "UTF8",
                    "--locale=C", "--no-sync")
        cluster.start()
    except BaseException:
        cluster.remove()
        raise
    return cluster


@contextlib.contextmanager
def server_url() -> Iterator[str]:
    """The test server's URL: the environment's, else a cluster started (and stopped) here."""
    url = os.environ.get(ENV_URL)
    if url:
        yield url
        return
    if find_binaries() is None:
        yield ""
        return
    cluster = start_cluster()
    try:
        yield cluster.url
    finally:
        cluster.remove()


def with_schema(url: str, schema: str) -> str:
    """`url` with `search_path` set to `schema` (libpq's `options` parameter)."""
    separator = "&" if urlsplit(url).query else "?"
    return f"{url}{separator}options={quote(f'-csearch_path={schema}')}"


def create_schema(url: str) -> tuple[str, str]:
    """A fresh schema on the server: its name and a URL whose tables live in it."""
    import psycopg

    name = "t_" + secrets.token_hex(6)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    return name, with_schema(url, name)


def drop_schema(url: str, name: str) -> None:
    import psycopg

    with contextlib.suppress(psycopg.Error), psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


class BlockingStore:
    """The synchronous store protocol over a PostgresTapeStore running on a portal's loop."""

    def __init__(self, portal: Any, store: Any) -> None:
        self.portal = portal
        self.store = store

    def _call(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        return self.portal.call(partial(function, *args, **kwargs))

    def list_tapes(self) -> list[str]:
        return self._call(self.store.list_tapes)

    def list_all_tapes(self) -> list[str]:
        return self._call(self.store.list_all_tapes)

    def reset(self, tape: str) -> None:
        self._call(self.store.reset, tape)

    def fetch_all(self, query: Any) -> list[Any]:
        return self._call(self.store.fetch_all, query)

    def append(self, tape: str, entry: Any) -> Any:
        return self._call(self.store.append, tape, entry)

    def append_many(self, tape: str, entries: Sequence[Any], *, bootstrap: Any = None) -> Any:
        return self._call(self.store.append_many, tape, entries, bootstrap=bootstrap)

    def journal_write(self, run: str, tape: str, ops: Sequence[Any]) -> None:
        self._call(self.store.journal_write, run, tape, ops)

    def journal_commit(self, run: str, ops: Sequence[Any] = ()) -> Any:
        return self._call(self.store.journal_commit, run, ops)

    def pending_runs(self) -> int:
        return self._call(self.store.pending_runs)

    def close(self) -> None:
        self._call(self.store.close)

    def __repr__(self) -> str:
        return f"BlockingStore({self.store!r})"


class StoreFactory:
    """Opens PostgresTapeStores (each on a fresh schema unless given a URL) on one portal
    and closes them, and drops the schemas, at the end."""

    def __init__(self, server: str) -> None:
        from anyio.from_thread import start_blocking_portal

        self.server = server
        self._portal_cm = start_blocking_portal("asyncio")
        self.portal = self._portal_cm.__enter__()
        self.stores: list[Any] = []
        self.schemas: list[str] = []

    def url(self) -> str:
        name, url = create_schema(self.server)
        self.schemas.append(name)
        return url

    def open(self, url: str | None = None, **options: Any) -> Any:
        from hookline.builtins.store.postgres.store import PostgresTapeStore

        store = PostgresTapeStore(url or self.url(), **options)
        self.portal.call(store.open)
        self.stores.append(store)
        return store

    def blocking(self, url: str | None = None, **options: Any) -> BlockingStore:
        return BlockingStore(self.portal, self.open(url, **options))

    def close(self) -> None:
        for store in self.stores:
            with contextlib.suppress(Exception):
                self.portal.call(store.close)
        self._portal_cm.__exit__(None, None, None)
        for name in self.schemas:
            drop_schema(self.server, name)


def wait_until(predicate: Any, timeout: float = 30.0, interval: float = 0.05) -> Any:
    """Poll `predicate` until it returns something true; that value, or AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)
