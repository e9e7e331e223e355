"""What `hookline run` writes: a reply's escape sequences reach a terminal escaped, and a
pipe unchanged (scripts get the exact reply)."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import AsyncIterator
from types import SimpleNamespace

import pytest

from hookline.cli.output import TurnPrinter, show_logs
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent

HOSTILE = "reply\x1b]52;c;cGF5bG9hZA==\x07"


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def _print_turn(out: io.StringIO, stream: bool) -> None:
    printer = TurnPrinter(stream=stream, out=out)

    async def source() -> AsyncIterator[StreamEvent]:
        yield StreamEvent("text", {"delta": HOSTILE})

    _ = [event async for event in printer.wrap_stream({}, AsyncStreamEvents(source()))]
    printer.finish(SimpleNamespace(outbounds=[{"content": HOSTILE, "kind": "normal"}]))


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_a_terminal_gets_the_reply_with_control_characters_escaped(stream: bool) -> None:
    out = FakeTerminal()
    await _print_turn(out, stream)
    assert out.getvalue() == "reply\\x1b]52;c;cGF5bG9hZA==\\x07\n"


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_a_pipe_gets_the_reply_unchanged(stream: bool) -> None:
    out = io.StringIO()
    await _print_turn(out, stream)
    assert out.getvalue() == HOSTILE + "\n"


def test_the_log_goes_to_the_stderr_of_the_moment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chat's line editor replaces sys.stderr after the log handler is made; a record
    must go to the replacement (which prints above the prompt), not to the old stream."""
    log = logging.getLogger("hookline")
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(log, "handlers", [])
    monkeypatch.setattr(log, "level", logging.NOTSET)
    before, during = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", before)
    show_logs(logging.ERROR)
    monkeypatch.setattr(sys, "stderr", during)  # what patch_stdout does
    logging.getLogger("hookline.some.plugin").error("disk full")
    assert during.getvalue() == "error: disk full\n"
    assert before.getvalue() == ""
