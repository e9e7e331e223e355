"""The session Tape's sidecar tapes, reset and archive."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tape_support import RecordingStore, Sidecar, events

from hookline.builtins.store import InMemoryTapeStore
from hookline.builtins.tape.tape import BOOTSTRAP_ANCHOR, Tape
from hookline.kernel.tape import TapeQuery

pytestmark = pytest.mark.anyio


# -- sidecars, reset, archive ---------------------------------------------------------------


async def test_sidecar_tapes() -> None:
    store = InMemoryTapeStore()
    tape = Tape(store, "ws__sess", sidecars=[Sidecar("spill")])
    assert tape.sidecar_tape_name("spill") == "ws__sess__sidecar__spill"
    with pytest.raises(KeyError):
        tape.sidecar_tape_name("nope")
    with pytest.raises(KeyError):
        tape.sidecar_tape("nope")
    spill = tape.sidecar_tape("spill")
    assert spill.name == "ws__sess__sidecar__spill" and spill.sidecars == ()
    assert spill.context.anchor is None
    await spill.append("event", {"blob": 1})
    await tape.append("message", {"role": "user", "content": "x"})
    assert await tape.store.list_tapes() == ["ws__sess"]
    assert [e.payload for e in await spill.entries()] == [{"blob": 1}]


async def test_reset_resets_sidecars_not_kept_and_records_events() -> None:
    store = InMemoryTapeStore()
    tape = Tape(store, "main", sidecars=[Sidecar("a"), Sidecar("b")])
    await tape.append("message", {"role": "user", "content": "old"})
    for name in ("a", "b"):
        await tape.sidecar_tape(name).append("event", {"n": 1})
    anchor = await tape.reset({"reason": "new topic"}, keep_sidecars=["b", "unknown"])
    assert anchor.payload == {
        "name": BOOTSTRAP_ANCHOR,
        "state": {"owner": "human", "reason": "new topic"},
    }
    entries = await tape.entries()
    assert entries[0] == anchor and anchor.id == 1
    resets = events(entries, "sidecar.reset")
    assert [e.payload["data"] for e in resets] == [
        {"sidecar": "a", "reason": "tape.reset", "status": "ok"}
    ]
    assert resets[0].meta == {"context": False}
    assert await tape.sidecar_tape("a").entries() == []
    assert len(await tape.sidecar_tape("b").entries()) == 1
    assert await tape.read_messages() == []  # the events are not context


async def test_reset_records_sidecar_failures() -> None:
    store = RecordingStore()
    tape = Tape(store, "main", sidecars=[Sidecar("bad"), Sidecar("good")])
    store.fail.add(("reset", "main__sidecar__bad"))
    await tape.reset()
    data = [e.payload["data"] for e in events(await tape.entries(), "sidecar.reset")]
    assert data[0]["sidecar"] == "bad" and data[0]["status"] == "error"
    assert "reset failed on main__sidecar__bad" in data[0]["error"]
    assert data[1] == {"sidecar": "good", "reason": "tape.reset", "status": "ok"}


async def test_reset_sidecar() -> None:
    store = RecordingStore()
    tape = Tape(store, "main", sidecars=[Sidecar("a")])
    await tape.sidecar_tape("a").append("event", {})
    assert await tape.reset_sidecar("a") == "ok"
    assert await tape.sidecar_tape("a").entries() == []
    store.fail.add(("reset", "main__sidecar__a"))
    assert await tape.reset_sidecar("a", reason="size") == (
        "a reset failed: reset failed on main__sidecar__a"
    )
    data = [e.payload["data"] for e in events(await tape.entries(), "sidecar.reset")]
    assert [(d["reason"], d["status"]) for d in data] == [("gc", "ok"), ("size", "error")]
    with pytest.raises(KeyError):
        await tape.reset_sidecar("zzz")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def test_archive_writes_backups_then_resets(tmp_path: Path) -> None:
    tape = Tape(InMemoryTapeStore(), "main", sidecars=[Sidecar("a")])
    await tape.append("message", {"role": "user", "content": "keep me ✓"})
    await tape.sidecar_tape("a").append("event", {"n": 1})
    before = await tape.entries()
    path = await tape.archive(tmp_path / "archive", state={"by": "test"})
    assert re.fullmatch(r"main\.jsonl\.\d{8}T\d{12}Z\.bak", path.name)
    assert read_jsonl(path) == [
        {"id": e.id, "kind": e.kind, "payload": e.payload, "meta": e.meta, "date": e.date}
        for e in before
    ]
    sidecar_files = sorted((tmp_path / "archive").glob("main__sidecar__a.jsonl.*.bak"))
    assert len(sidecar_files) == 1 and read_jsonl(sidecar_files[0])[0]["payload"] == {"n": 1}
    assert not list((tmp_path / "archive").glob(".*.tmp")), "no temporary file is left"

    entries = await tape.entries()
    assert entries[0].payload["state"] == {"owner": "human", "archive": str(path), "by": "test"}
    assert [e.payload["data"] for e in events(entries, "sidecar.archive")] == [
        {"sidecar": "a", "status": "ok", "path": str(sidecar_files[0])}
    ]
    assert [e.payload["data"]["status"] for e in events(entries, "sidecar.reset")] == ["ok"]
    assert await tape.sidecar_tape("a").entries() == []


async def test_archive_keeps_a_sidecar_whose_archive_failed(tmp_path: Path) -> None:
    store = RecordingStore()
    tape = Tape(store, "main", sidecars=[Sidecar("bad"), Sidecar("good")])
    for name in ("bad", "good"):
        await tape.sidecar_tape(name).append("event", {"n": name})
    store.fail.add(("fetch", "main__sidecar__bad"))
    await tape.archive(tmp_path)
    entries = await tape.entries()
    archived = [e.payload["data"] for e in events(entries, "sidecar.archive")]
    assert [(d["sidecar"], d["status"]) for d in archived] == [("bad", "error"), ("good", "ok")]
    assert "fetch failed" in archived[0]["error"]
    resets = [e.payload["data"] for e in events(entries, "sidecar.reset")]
    assert {"sidecar": "bad", "status": "skipped", "cause": "archive_failed"} in resets
    assert {"sidecar": "good", "reason": "tape.reset", "status": "ok"} in resets
    assert all(e.meta == {"context": False} for e in entries if e.kind == "event")
    store.fail.clear()
    assert len(await tape.sidecar_tape("bad").entries()) == 1  # kept
    assert await tape.sidecar_tape("good").entries() == []


async def test_archive_of_the_main_tape_failing_resets_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    tape = Tape(InMemoryTapeStore(), "main", sidecars=[Sidecar("a")])
    await tape.append("message", {"role": "user", "content": "precious"})
    with pytest.raises(OSError):
        await tape.archive(blocker / "sub")
    assert len(await tape.entries()) == 1


async def test_removing_a_sidecar_provider_keeps_its_data() -> None:
    store = InMemoryTapeStore()
    mounted = Tape(store, "main", sidecars=[Sidecar("spill")])
    await mounted.sidecar_tape("spill").append("event", {"kept": True})
    unmounted = Tape(store, "main")
    assert unmounted.get_sidecar("spill") is None
    with pytest.raises(KeyError):
        unmounted.sidecar_tape_name("spill")
    await unmounted.reset()
    async with unmounted.fork() as forked:
        await forked.append("message", {"role": "user", "content": "x"})
    assert [e.payload for e in store.fetch_all(TapeQuery("main__sidecar__spill"))] == [
        {"kept": True}
    ]


async def test_archiving_a_session_that_fails_part_way_leaves_no_file_and_keeps_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk while the second file (a sidecar's) is written: the first file goes, the
    session stays whole, and the error names the file and the fix."""
    import errno

    from hookline.builtins.tape import archive as archive_module
    from hookline.builtins.tape import archive_session
    from hookline.kernel.errors import ErrorKind, HooklineError
    from hookline.kernel.tape import TapeEntry

    store = InMemoryTapeStore()
    store.append("s", TapeEntry.new("message", {"role": "user", "content": "keep me"}))
    store.append("s__sidecar__spill", TapeEntry.new("event", {"big": "x"}))
    real = archive_module.write_archive
    calls: list[Path] = []

    async def disk_fills(path: Path, entries: list[TapeEntry]) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        await real(path, entries)

    monkeypatch.setattr(archive_module, "write_archive", disk_fills)
    with pytest.raises(HooklineError) as caught:
        await archive_session(store, "s", tmp_path, sidecars=["spill"])
    assert caught.value.kind is ErrorKind.temporary
    assert caught.value.message.startswith(f"could not write the archive {calls[1]} (No "
                                           f"space left on device): the session is kept")
    assert list(tmp_path.iterdir()) == [], "no half of an archive is left"
    assert [e.payload for e in store.fetch_all(TapeQuery("s"))] == [
        {"role": "user", "content": "keep me"}]


async def test_a_session_archive_stays_in_its_folder_whatever_a_sidecar_is_named(
    tmp_path: Path,
) -> None:
    from hookline.builtins.tape import archive_session
    from hookline.kernel.tape import TapeEntry

    store = InMemoryTapeStore()
    store.append("sess", TapeEntry.new("event", {"n": 1}))
    store.append("sess__sidecar__../../escaped", TapeEntry.new("event", {"n": 2}))
    folder = tmp_path / "home" / "archive"
    paths = await archive_session(store, "sess", folder, sidecars=["../../escaped"])
    assert len(paths) == 2 and all(path.parent == folder for path in paths), paths
    assert sorted(path.name for path in tmp_path.rglob("*.jsonl")) == sorted(
        path.name for path in paths)
