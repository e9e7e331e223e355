"""Regression tests for defects found in review: each names what used to go wrong."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from hookline.builtins.environment import LocalEnvironment
from hookline.builtins.models.base import Finished
from hookline.builtins.plugin import BuiltinPlugin
from hookline.builtins.settings import Settings
from hookline.builtins.store import InMemoryTapeStore
from hookline.builtins.store.asyncstore import as_async_store
from hookline.builtins.tape import Tape
from hookline.kernel import Framework
from hookline.kernel.tape import TapeEntry, TapeQuery


class FlakyStore:
    """An async memory store whose next appends fail on request."""

    def __init__(self) -> None:
        self.inner = as_async_store(InMemoryTapeStore())
        self.failures = 0

    async def list_tapes(self) -> list[str]:
        return await self.inner.list_tapes()

    async def reset(self, tape: str) -> None:
        await self.inner.reset(tape)

    async def fetch_all(self, query: TapeQuery) -> list[TapeEntry]:
        return list(await self.inner.fetch_all(query))

    async def append(self, tape: str, entry: TapeEntry) -> TapeEntry:
        if self.failures:
            self.failures -= 1
            raise OSError("disk full")
        return await self.inner.append(tape, entry)


@pytest.mark.anyio
async def test_a_failed_merge_keeps_what_was_not_written() -> None:
    """Merging used to empty the fork's buffer first: a failing append lost the rest."""
    store = FlakyStore()
    tape = Tape(store, "t")
    with pytest.raises(OSError, match="disk full"):
        async with tape.fork() as fork:
            for n in range(4):
                await fork.append("event", {"n": n})
            store.failures = 1
            forked_store = fork.store
    assert await tape.entries() == []
    await forked_store.merge("t")  # retry: everything buffered is still there
    assert [e.payload["n"] for e in await tape.entries()] == [0, 1, 2, 3]


@pytest.mark.anyio
async def test_file_writes_replace_the_file_whole(tmp_path: Path) -> None:
    """fs.write used to truncate the file before writing; now a sibling is renamed over it."""
    target = tmp_path / "notes.txt"
    target.write_text("old")
    os.chmod(target, 0o640)
    environment = LocalEnvironment(tmp_path)
    await environment.write_text("notes.txt", "new")
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o640, "the file keeps its mode"
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"], "no temporary left behind"


def test_finished_text_without_deltas_is_the_reply() -> None:
    from hookline.builtins.agent import _StepOutcome

    outcome = _StepOutcome()
    event = outcome.take(Finished(text="whole reply"))
    assert outcome.text == "whole reply"
    assert event is not None and event.data == {"delta": "whole reply"}


def test_model_options_name_the_model_turns_use(tmp_path: Path) -> None:
    """With only fallbacks set, the first fallback used to be reported as current."""
    plugin = BuiltinPlugin(Framework(tmp_path),
                           settings=Settings(home=tmp_path, fallback_models=("a:x", "b:y")))
    options = plugin.provide_model_options("s", tmp_path)
    assert options.current_model == "offline"
    assert [choice.id for choice in options.models] == ["offline", "a:x", "b:y"]


def test_media_without_a_remote_or_inline_url_is_not_sent(tmp_path: Path) -> None:
    """A plain path used to be read by republic as a local file, outside workspace rules."""
    plugin = BuiltinPlugin(Framework(tmp_path), settings=Settings(home=tmp_path))
    message = {"content": "look", "media": [{"type": "image", "url": "/etc/passwd"},
                                            {"type": "image", "url": None}]}
    assert plugin.build_prompt(message, "s", {}) == "look"


@pytest.mark.anyio
async def test_invalid_json_arguments_are_reported_as_such(tmp_path: Path) -> None:
    script = tmp_path / "turns.json"
    script.write_text(json.dumps([
        {"tool_calls": [{"name": "fs_read", "arguments": "{not json"}]},
        {"text": "done"},
    ]))
    framework = Framework(tmp_path)
    plugin = BuiltinPlugin(framework, settings=Settings(home=tmp_path / "home",
                                                        model=f"scripted:{script}"))
    framework.registry.register(plugin, name="builtin")
    async with framework.running():
        await framework.process_inbound({"content": "go"})
    model = plugin.get_agent().open_model(f"scripted:{script}")
    tool_message = model.calls[1].messages[-1]
    assert "not valid JSON" in tool_message.text and "_raw" not in tool_message.text


@pytest.mark.anyio
async def test_temp_sessions_leave_nothing_in_the_store(tmp_path: Path) -> None:
    """The bootstrap anchor used to be written to the store before the fork."""
    framework = Framework(tmp_path)
    plugin = BuiltinPlugin(framework, settings=Settings(home=tmp_path / "home"))
    framework.registry.register(plugin, name="builtin")
    async with framework.running():
        await framework.process_inbound({"content": "hi", "session_id": "temp/x"})
        store: Any = framework.get_tape_store()
        assert store.list_tapes() == []
