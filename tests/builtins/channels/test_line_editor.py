"""The chat line editor's history file and what the cli channel lets reach the terminal.

The editor itself (keys, the prompt that stays put) is driven in tmux by
tests/cli/test_chat_tmux.py; these are the parts a hostile or huge file can reach."""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hookline.builtins.channels.cli.channel import CliChannel
from hookline.builtins.channels.cli.line_editor import (
    MAX_ENTRY_CHARS,
    MAX_HISTORY_BYTES,
    BoundedFileHistory,
)
from hookline.builtins.terminal.tool_notes import terminal_text
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent


def test_history_is_kept_newest_first_in_a_private_file(tmp_path: Path) -> None:
    path = tmp_path / "home" / "chat_history"
    history = BoundedFileHistory(path)
    for line in ("one", "two\nlines", "  ", "three"):
        history.store_string(line)
    assert path.stat().st_mode & 0o777 == 0o600
    assert list(BoundedFileHistory(path).load_history_strings()) == ["three", "two\nlines",
                                                                    "one"]


def test_history_reads_only_its_tail_and_skips_torn_or_foreign_lines(tmp_path: Path) -> None:
    path = tmp_path / "chat_history"
    with path.open("wb") as handle:
        handle.write(b"x" * (3 * MAX_HISTORY_BYTES))  # one huge line, never read whole
        handle.write(b'\n"kept"\n\xff\xfe not json\n{"a": 1}\n"also kept"\n')
    entries = list(BoundedFileHistory(path, max_entries=10).load_history_strings())
    assert entries == ["also kept", "kept"]


def test_history_is_capped_in_entries_and_compacted_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "chat_history"
    history = BoundedFileHistory(path, max_entries=5)
    line = json.dumps("y" * 1000) + "\n"
    path.write_text(line * (2 * MAX_HISTORY_BYTES // len(line) + 1))
    path.chmod(0o600)
    history.store_string("last")
    assert path.stat().st_size <= MAX_HISTORY_BYTES  # rewritten to its last entries
    assert next(iter(history.load_history_strings())) == "last"
    assert len(list(history.load_history_strings())) == 5
    history.store_string("z" * (MAX_ENTRY_CHARS + 1))  # a pasted file: sent, not kept
    assert next(iter(history.load_history_strings())) == "last"


def test_a_fifo_or_a_link_in_place_of_the_history_is_neither_read_nor_written(
        tmp_path: Path) -> None:
    fifo = tmp_path / "fifo_history"
    os.mkfifo(fifo)
    done = threading.Event()

    def use_fifo() -> None:
        history = BoundedFileHistory(fifo)
        assert list(history.load_history_strings()) == []
        history.store_string("secret")
        done.set()

    worker = threading.Thread(target=use_fifo, daemon=True)
    worker.start()
    worker.join(5)
    assert done.is_set(), "a FIFO as the history file blocked the chat"

    target = tmp_path / "elsewhere"
    target.write_text('"planted"\n')
    link = tmp_path / "link_history"
    link.symlink_to(target)
    history = BoundedFileHistory(link)
    assert list(history.load_history_strings()) == []
    history.store_string("secret")
    assert target.read_text() == '"planted"\n'


def test_terminal_text_escapes_control_characters() -> None:
    hostile = "ok\x1b]52;c;cGF5bG9hZA==\x07 \x1b[2J\rdone\n\ttab"
    assert terminal_text(hostile) == "ok\\x1b]52;c;cGF5bG9hZA==\\x07 \\x1b[2J\\rdone\n\ttab"
    assert terminal_text("line\nnext", keep_newlines=False) == "line\\nnext"
    assert terminal_text("plain 文字") == "plain 文字"


@pytest.mark.anyio
async def test_the_cli_channel_never_writes_a_reply_s_escape_sequences() -> None:
    out = io.StringIO()
    cli = CliChannel(lambda message: None, output=out, interactive=False)
    cli.ending.closed = False

    async def source() -> AsyncIterator[StreamEvent]:
        yield StreamEvent("text", {"delta": "title\x1b]0;pwned\x07"})
        yield StreamEvent("tool_call", {"tool_calls": [
            {"id": "c", "name": "shell\x1b[2J", "arguments": '{"command": "ls"}'}]})

    inbound = {"content": "hi", "channel": "cli", "session_id": "s"}
    _ = [event async for event in cli.stream_events(inbound, AsyncStreamEvents(source()))]
    await cli.send({"content": "other\x1b[31m", "session_id": "x", "kind": "normal"})
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "title\\x1b]0;pwned\\x07" in text and "[tool] shell\\x1b[2J" in text
    assert "other\\x1b[31m" in text
