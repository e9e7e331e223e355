"""What `hookline run` writes: a reply's escape sequences reach a terminal escaped, and a
pipe unchanged (scripts get the exact reply); an error line is escaped everywhere."""

from __future__ import annotations

import io
import logging
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from openai_server import OpenAIServer, Reply
from test_cli import hookline

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


def test_text_stays_text_and_only_what_drives_a_terminal_is_escaped() -> None:
    """A reply's no-break spaces (French before "!"), an emoji's joiner, the joiner
    Persian writes with, an ideographic space and a soft hyphen are text; C0, C1, a
    right-to-left override and a line separator are escaped. A question escapes more."""
    from hookline.builtins.terminal import terminal_text

    text = "Bonjour\u202f! \xa0\U0001f469\u200d\U0001f4bb \u0645\u06cc\u200c 日\u3000語 co\xadop"
    assert terminal_text(text) == text
    assert terminal_text("a\x1b[2J b\x9b2J c\u202eevil d\u2028e\x7f") == (
        "a\\x1b[2J b\\x9b2J c\\u202eevil d\\u2028e\\x7f")
    assert terminal_text("\U0001f469\u200d\U0001f4bb", strict=True) == (
        "\U0001f469\\u200d\U0001f4bb")


def test_a_warning_quoting_a_session_id_is_escaped() -> None:
    """A warning may quote a session id a tape gave (an older hookline took any): escaped,
    it cannot retitle or clear the terminal."""
    out, err = io.StringIO(), FakeTerminal()
    printer = TurnPrinter(stream=False, out=out, err=err)
    printer.warnings.append("session evil\x1b]0;PWNED\x07\x1b[2J is long")
    printer.finish(SimpleNamespace(outbounds=[{"content": "ok", "kind": "normal"}]))
    assert "warning: session evil\\x1b]0;PWNED\\x07\\x1b[2J is long" in err.getvalue()
    assert "\x1b" not in err.getvalue()


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
    logging.getLogger("hookline.some.plugin").error("quota \x1b]0;pwned\x07\nnext")
    assert during.getvalue().splitlines()[-1] == "error: quota \\x1b]0;pwned\\x07\\nnext"
    # Another library's record (the MCP SDK quoting what a server sent): one line too,
    # named, escaped; its traceback one line, not Python's raw handler's.
    try:
        raise ValueError("bad \x1b[2J notification")
    except ValueError:
        logging.getLogger("mcp.client.sse").warning("Unknown SSE event: \x1b]0;T\x07",
                                                    exc_info=True)
    logging.getLogger("mcp.client.sse").info("not shown")
    assert during.getvalue().splitlines()[-1] == (
        "warning: mcp.client.sse: Unknown SSE event: \\x1b]0;T\\x07 (ValueError: bad "
        "\\x1b[2J notification)")
    assert during.getvalue().count("disk full") == 1, "hookline's records are shown once"


@pytest.mark.parametrize("stream", [False, True])
def test_a_provider_error_reaches_no_stream_with_its_escape_sequences(
        tmp_path: Path, stream: bool) -> None:
    """A provider (or whoever sits at its address) chooses the text of its errors; the
    error line `hookline run` prints must not retitle the window or clear the screen."""
    hostile = "quota \x1b]0;pwned\x07 gone \x1b[2J now\r\x1b[1Aover"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    with OpenAIServer([Reply.failure(400, hostile)] * 3) as server:
        env.update(HOOKLINE_HOME=str(tmp_path / "home"), HOOKLINE_API_KEY="k",
                   HOOKLINE_MODEL="openai-compatible:test-model",
                   HOOKLINE_API_BASE=server.base_url)
        out = hookline("run", *(["--stream"] if stream else []), "hello", env=env,
                       cwd=tmp_path)
    assert server.requests, "the provider was never asked"
    assert out.returncode == 1
    for text in (out.stdout, out.stderr):
        assert not any(ord(char) < 0x20 and char != "\n" for char in text), repr(text)
    assert "quota \\x1b]0;pwned\\x07 gone \\x1b[2J now" in out.stderr
    assert "\\x1b[1Aover" in out.stderr
    assert out.stderr.startswith("error: ")
