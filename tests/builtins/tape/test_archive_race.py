"""A turn that ends while its session is archived: it is archived with the rest (the
session is written again), never removed unarchived; on the embedded database (which
removes a tape only while nothing was added to it, in one statement) and on a store
without that (a look, then a reset)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, Iterator, Sequence
from pathlib import Path

import pytest

from hookline.builtins.store import InMemoryTapeStore, SQLiteTapeStore
from hookline.builtins.tape import archive as archive_module
from hookline.builtins.tape import archive_session
from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.tape import TapeEntry, TapeQuery, TapeStore

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TapeStore]:
    if request.param == "memory":
        yield InMemoryTapeStore()
        return
    with SQLiteTapeStore(tmp_path / "tapes.db") as sqlite:
        yield sqlite


def said(text: str) -> TapeEntry:
    return TapeEntry.new("message", {"role": "user", "content": text})


def archived(paths: list[Path]) -> list[str]:
    return [json.loads(line)["payload"].get("content", "") for path in paths
            for line in path.read_text().splitlines()]


async def test_a_turn_ended_during_the_archive_is_archived_not_lost(
        store: TapeStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store.append("s", said("first"))
    store.append("s__sidecar__spill", TapeEntry.new("event", {"big": "x"}))
    real = archive_module.write_archive
    late = ["a late turn"]

    async def a_turn_ends_meanwhile(path: Path, pages: AsyncIterable[Sequence[TapeEntry]]
                                    ) -> int:
        written = await real(path, pages)
        if late:
            store.append("s", said(late.pop()))
        return written

    monkeypatch.setattr(archive_module, "write_archive", a_turn_ends_meanwhile)
    folder = tmp_path / "archive"
    folder.mkdir()
    paths = await archive_session(store, "s", folder, sidecars=["spill"])
    assert archived(paths) == ["first", "a late turn", ""]
    assert sorted(folder.iterdir()) == sorted(paths), "the first attempt's files went"
    assert list(store.fetch_all(TapeQuery("s"))) == []
    assert list(store.fetch_all(TapeQuery("s__sidecar__spill"))) == []


async def test_a_session_that_goes_on_at_every_attempt_is_kept_whole(
        store: TapeStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store.append("s", said("first"))
    real = archive_module.write_archive

    async def a_turn_ends_each_time(path: Path, pages: AsyncIterable[Sequence[TapeEntry]]
                                    ) -> int:
        written = await real(path, pages)
        store.append("s", said("again"))
        return written

    monkeypatch.setattr(archive_module, "write_archive", a_turn_ends_each_time)
    folder = tmp_path / "archive"
    folder.mkdir()
    with pytest.raises(HooklineError) as caught:
        await archive_session(store, "s", folder)
    assert caught.value.kind is ErrorKind.temporary
    assert "went on while it was archived" in caught.value.message
    assert list(folder.iterdir()) == []
    kept = [entry.payload["content"] for entry in store.fetch_all(TapeQuery("s"))]
    assert kept == ["first", "again", "again", "again"]


async def test_what_an_archive_killed_part_way_left_is_removed_by_the_next(
        tmp_path: Path) -> None:
    """SIGKILL before its rename leaves a temporary file holding a whole session: the next
    archive removes it once nothing has written it for ten minutes, not one being written."""
    import os
    import time

    folder = tmp_path / "archive"
    folder.mkdir()
    left = folder / ".old__s.20261205T101010.jsonl.k3j2h1.tmp"
    left.write_text('{"id": 1}\n')
    old = time.time() - archive_module.ABANDONED_AFTER - 1
    os.utime(left, (old, old))
    writing = folder / ".other__t.20261206T101010.jsonl.a1b2c3.tmp"
    writing.write_text('{"id": 1}\n')
    store = InMemoryTapeStore()
    store.append("s", said("first"))
    await archive_session(store, "s", folder)
    assert not left.exists() and writing.exists()


async def test_a_session_with_a_turn_running_elsewhere_is_not_archived(tmp_path: Path) -> None:
    """Its turn's entries would land on the emptied tape when it ends, in no archive."""
    with SQLiteTapeStore(tmp_path / "tapes.db") as store:
        store.append("s", said("first"))
        store.journal_write("other-process-run", "s", [("s", "append", said("deploy"))])
        with pytest.raises(HooklineError, match="a turn of the session s is running"):
            await archive_session(store, "s", tmp_path)
        assert [e.payload["content"] for e in store.fetch_all(TapeQuery("s"))] == ["first"]


async def test_two_archives_of_one_session_at_once_lose_nothing(tmp_path: Path) -> None:
    import anyio

    folder = tmp_path / "archive"
    folder.mkdir()
    with SQLiteTapeStore(tmp_path / "tapes.db") as store:
        store.append_many("s", [said(f"m{n}") for n in range(3000)])
        outcomes: list[object] = []

        async def archive() -> None:
            try:
                outcomes.append(await archive_session(store, "s", folder))
            except HooklineError as exc:
                outcomes.append(exc)

        async with anyio.create_task_group() as group:
            group.start_soon(archive)
            group.start_soon(archive)
        kept = list(store.fetch_all(TapeQuery("s")))
    files = [path for outcome in outcomes if isinstance(outcome, list) for path in outcome]
    assert len(archived(files)) + len(kept) == 3000, outcomes
    assert sorted(folder.iterdir()) == sorted(files)
