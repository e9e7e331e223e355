"""A gateway whose PostgreSQL tables live on a full volume: a tablespace on a small tmpfs
(mounted by the test, which runs as root in CI) that a filler file then fills. Turns fail
with 503 and `Retry-After`, never 500; health says 503 too (its check writes what a turn
writes, rolled back); once the filler is gone both recover without a restart."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from gateway_support import Gateway, Response, call, gateway_env, post, start_gateway_process
from postgres_support import password_of, unavailable, wait_until

pytestmark = pytest.mark.skipif(os.name != "posix", reason="mounts are POSIX")


def execute(url: str, statement: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement)
        return cursor.fetchall() if cursor.description else []


@contextlib.contextmanager
def full_volume_store(server: str) -> Iterator[tuple[str, Path]]:
    """A store URL whose tables are created on a 16 MB tmpfs, and the tmpfs's folder."""
    if not server:
        unavailable("no PostgreSQL server")
    if os.geteuid() != 0:
        unavailable("mounting a tmpfs needs root")
    outer = Path(tempfile.mkdtemp(prefix="hookline-volume-"))
    outer.chmod(0o755)  # the server's user reaches the tablespace through it
    volume = outer / "volume"
    volume.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(volume)],
                             capture_output=True, text=True)
    if mounted.returncode:
        unavailable(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    name = "t_" + secrets.token_hex(6)
    try:
        (data_dir,), = execute(server, "SHOW data_directory")
        server_user = Path(data_dir).stat()
        os.chown(volume, server_user.st_uid, server_user.st_gid)
        execute(server, f"CREATE TABLESPACE {name} LOCATION '{volume}'")
        execute(server, f"CREATE SCHEMA {name}")
        options = quote(f"-csearch_path={name} -cdefault_tablespace={name}")
        separator = "&" if urlsplit(server).query else "?"
        yield f"{server}{separator}options={options}", volume
    finally:
        with contextlib.suppress(Exception):
            execute(server, f"DROP SCHEMA IF EXISTS {name} CASCADE")
        with contextlib.suppress(Exception):
            execute(server, f"DROP TABLESPACE IF EXISTS {name}")
        subprocess.run(["umount", "-l", str(volume)], check=False)
        with contextlib.suppress(OSError):
            volume.rmdir()
            outer.rmdir()


def fill(volume: Path) -> Path:
    """Write a file on the volume until it is full."""
    filler = volume / "filler"
    chunk = os.urandom(1 << 16)
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return filler


def health(gateway: Gateway) -> Response:
    return call(gateway.url, "GET", "/v1/health", timeout=30)


def ask(gateway: Gateway, content: str) -> Response:
    return post(gateway.url, {"content": content, "session_id": "full"}, timeout=60)


def test_a_full_volume_answers_503_to_turns_and_to_health_and_recovers(
    postgres_server: str, tmp_path: Path,
) -> None:
    with full_volume_store(postgres_server) as (url, volume):
        workspace = tmp_path / "workspace"
        workspace.mkdir()
        gateway = start_gateway_process(["--port", "0"], gateway_env(
            tmp_path / "home", HOOKLINE_TAPE_STORE=url), workspace)
        try:
            assert ask(gateway, "before").status == 200
            assert health(gateway).status == 200
            filler = fill(volume)
            answers = []  # the pages' free space first takes a few turns
            while not answers or answers[-1].status == 200:
                assert len(answers) < 300, "300 turns stored on a full volume"
                answers.append(ask(gateway, f"while full {len(answers)} " + "x" * 4000))
            failed = answers[-1:] + [ask(gateway, f"still full {n}") for n in range(3)]
            assert [r.status for r in failed] == [503] * 4, [r.body for r in failed]
            assert all(r.headers.get("retry-after") for r in failed)
            said = wait_until(lambda: (r := health(gateway)).status == 503 and r, timeout=10)
            assert "could not extend" in said.json()["reason"] or "space" in said.json()["reason"]
            filler.unlink()
            wait_until(lambda: health(gateway).status == 200, timeout=10)
            assert ask(gateway, "after").status == 200
        finally:
            gateway.end()
        assert password_of(url) not in "\n".join(gateway.stdout + gateway.stderr)
