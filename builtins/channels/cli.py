"""The `cli` channel: a conversation in the terminal, behind `hookline chat`.

It reads lines from the terminal in a worker thread and hands each to the manager as an
envelope `{content, channel: "cli", chat_id, session_id?, context?}`. While a turn runs it
shows what happens: a transient `…thinking` indicator until the model's first event (and
`…running <tool>` while a tool runs), the reply text as it streams, and a `[tool] name
arguments` line for every tool call. Outbound messages that were not streamed are printed
when they arrive; error messages are printed as `error: ...` (in red on a colour terminal).

A line typed while a turn of the session runs is steered into that turn (`admit_message`
answers `steer`). End of input (Ctrl-D) or `/quit` ends the session by setting the stop
event the channel was started with. Under a channel manager, no typed line is lost
silently (`cli_lines`): one dropped while the session goes on is shown as
`(not answered: ...)` at once, and when the channel stops it prints `not answered: <line>`
for each line still without an answer (`unanswered` lists them).

When both the input and the output are a terminal, lines are read with the line editor
(`line_editor.py`: editing, a history kept in the `history` file, Ctrl-R search, multi-line
messages, and a prompt that stays at the bottom while replies print above it). Otherwise
(pipes, files, `TERM=dumb`) reading polls the input with a short timeout, so the reading
thread never outlives the channel; when the input has no selectable file descriptor
(Windows consoles, test doubles) it falls back to a blocking `readline` whose thread is
abandoned on cancellation.

Text from the model, tools and plugins is shown with control characters escaped
(`terminal_text`): a reply cannot move the cursor, retitle the window or write the
clipboard through escape sequences.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TextIO

import anyio

from hookline.kernel.channels import (
    AdmitDecision,
    AdmitOutcome,
    Interface,
    MessageHandler,
    StopEvent,
    TurnSnapshot,
)
from hookline.kernel.envelope import get_field
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent

from ..tool_notes import is_terminal, terminal_text, tool_notes
from .cli_lines import Line, LineLedger

if TYPE_CHECKING:
    from .line_editor import LineEditor

__all__ = ["PROMPT", "QUIT_COMMAND", "CliChannel"]

PROMPT = "you> "
QUIT_COMMAND = "/quit"

_POLL_SECONDS = 0.2
_NO_LINE = object()
"""Returned by a poll that saw no complete line."""

_CLEAR_LINE = "\r\x1b[K"
_DIM, _RED, _CYAN, _RESET = "\x1b[2m", "\x1b[31m", "\x1b[36m", "\x1b[0m"


class _LineReader:
    """Lines from a text stream, read in a worker thread.

    With a selectable file descriptor (POSIX terminals, pipes, files) it reads raw bytes
    after `select` says there are some, so a call returns within `timeout` seconds when
    no line is complete. Otherwise it calls the stream's `readline`.
    """

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.fd = _selectable_fd(stream)
        self._buffer = b""
        self._eof = False

    def read(self, timeout: float) -> Any:
        """A line without its newline, None at end of input, or `_NO_LINE`."""
        if self.fd is None:
            line = self.stream.readline()
            return line.rstrip("\r\n") if line else None
        while True:
            if b"\n" in self._buffer:
                line, _, self._buffer = self._buffer.partition(b"\n")
                return line.rstrip(b"\r").decode("utf-8", errors="replace")
            if self._eof:
                if not self._buffer:
                    return None
                line, self._buffer = self._buffer, b""
                return line.decode("utf-8", errors="replace")
            ready, _, _ = select.select([self.fd], [], [], timeout)
            if not ready:
                return _NO_LINE
            chunk = os.read(self.fd, 65536)
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True


def _selectable_fd(stream: Any) -> int | None:
    if os.name != "posix":
        return None
    try:
        fd = stream.fileno()
        select.select([fd], [], [], 0)
    except (AttributeError, OSError, ValueError):
        return None
    return fd



def _can_edit(stream: Any, output: Any) -> bool:
    """The line editor needs the process's own terminal at both ends, and asyncio."""
    if stream is not sys.stdin or output is not sys.stdout or os.environ.get("TERM") == "dumb":
        return False
    if not (is_terminal(stream) and is_terminal(output)):
        return False
    return _running_on_asyncio()


def _running_on_asyncio() -> bool:
    """Whether the running event loop is asyncio's. sniffio says so when it is installed;
    anyio no longer needs it, and trio does, so without it only asyncio can be running."""
    try:
        import sniffio
    except ImportError:
        import asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True
    try:
        return sniffio.current_async_library() == "asyncio"
    except sniffio.AsyncLibraryNotFoundError:
        return False


class CliChannel(Interface):
    """The terminal as a channel (see the module docstring).

    `session_id` (None: the framework's default, `cli:default`), `chat_id` and `model`
    (None: the configured one) shape the envelopes; `input` and `output` default to the
    process's stdin and stdout, read when the channel starts. `interactive` (default: the
    output is a terminal) enables the transient indicators and colours. `editor` (default:
    both are the process's terminal) reads lines with the line editor, keeping them in the
    `history` file (None: for this session only).
    """

    name: ClassVar[str] = "cli"

    def __init__(
        self,
        message_handler: MessageHandler,
        *,
        session_id: str | None = None,
        chat_id: str = "default",
        model: str | None = None,
        input: TextIO | None = None,
        output: TextIO | None = None,
        interactive: bool | None = None,
        editor: bool | None = None,
        history: Path | None = None,
    ) -> None:
        self.message_handler = message_handler
        self.session_id = session_id
        self.chat_id = chat_id
        self.model = model
        self.input = input
        self.output = output
        self.interactive = interactive
        self.editor = editor
        self.history = history
        self._editor: LineEditor | None = None
        self.session_ids: set[str] = set()
        """Resolved ids of the sessions this channel's messages went to."""
        self.quit_requested = False
        self._stop_event: StopEvent | None = None
        self._closed = True
        self._streams: dict[object, str] = {}
        """The model streams being shown: a token per stream, with its session id."""
        self._streamed: dict[str, str] = {}
        self._at_line_start = True
        self._prompt_shown = False
        self._indicator = False
        self._managed = False
        self._ledger = LineLedger()
        self.unanswered: list[str] = []
        """The lines the channel reported unanswered when it stopped."""

    def configure(self, **options: Any) -> None:
        """Set envelope and terminal options (`session_id`, `chat_id`, `model`, `input`,
        `output`, `interactive`, `editor`, `history`) before the channel starts."""
        known = {"session_id", "chat_id", "model", "input", "output", "interactive", "editor",
                 "history"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"CliChannel.configure: unknown option(s) {', '.join(unknown)}")
        for key, value in options.items():
            setattr(self, key, value)

    def envelope(self, text: str) -> dict[str, Any]:
        """The envelope for one line typed by the user."""
        message: dict[str, Any] = {"content": text, "channel": self.name, "chat_id": self.chat_id}
        if self.session_id:
            message["session_id"] = self.session_id
        if self.model:
            message["context"] = {"model": self.model}
        return message

    # -- Channel -----------------------------------------------------------------------

    async def start(self, stop_event: StopEvent) -> None:
        """Read lines until end of input, `/quit`, or `stop_event`."""
        self._stop_event = stop_event
        self._closed = False
        self.quit_requested = False
        self._ledger, self.unanswered = LineLedger(), []
        stream = self.input if self.input is not None else sys.stdin
        use_editor = self.editor if self.editor is not None else _can_edit(stream, self._out())
        if use_editor:
            await self._read_with_editor()
            return
        reader = _LineReader(stream)
        echo = not is_terminal(stream)
        self.show_prompt()
        while not (self._closed or stop_event.is_set()):
            if reader.fd is None:
                line = await anyio.to_thread.run_sync(reader.read, _POLL_SECONDS,
                                                      abandon_on_cancel=True)
            else:
                line = await anyio.to_thread.run_sync(reader.read, _POLL_SECONDS)
            if line is _NO_LINE:
                continue
            after_prompt, self._prompt_shown = self._prompt_shown, False
            if line is None:  # end of input (Ctrl-D)
                if not self._at_line_start:
                    self._write("\n")
                self.request_quit()
                return
            if echo:  # piped input: after the prompt, or on a line of its own mid-reply
                fresh = after_prompt or self._at_line_start
                self._write(f"{'' if fresh else chr(10)}{line}\n")
            else:
                self._at_line_start = True  # the terminal echoed the newline
            if line.strip() == QUIT_COMMAND:
                self.request_quit()
                return
            if not line.strip():
                if not self._streams:
                    self.show_prompt()
                continue
            await self._submit(line)

    async def _read_with_editor(self) -> None:
        from .line_editor import LineEditor

        self._editor = editor = LineEditor(prompt=PROMPT, history=self.history)
        try:
            with editor.active():
                while not (self._closed or self._stop_event is None
                           or self._stop_event.is_set()):
                    line = await editor.read()
                    if line is None or line.strip() == QUIT_COMMAND:
                        self.request_quit()
                        return
                    if line.strip():
                        await self._submit(line)
        finally:
            if editor.partial:
                editor.write("\n")
            self._editor = None

    async def _submit(self, line: str) -> None:
        message = self.envelope(line)
        typed = self._ledger.record(message, line)
        try:
            await self.message_handler(message)
        except Exception as exc:  # the manager handles its own errors; be safe anyway
            self.show_error(f"{type(exc).__name__}: {exc}")
            self._ledger.told(typed)
            return
        if self._managed and not self._ledger.taken(typed) and not self._ending():
            self._not_answered(typed, "it was not taken")
        session_id = get_field(message, "session_id")
        if session_id:
            self.session_ids.add(str(session_id))

    async def stop(self) -> None:
        """Stop reading; say which typed lines have no answer; leave the terminal on a
        fresh line."""
        self._closed = True
        self._clear_indicator()
        if not self._at_line_start:
            self._write("\n")
        if self._managed:
            for line in self._ledger.unanswered():
                self.unanswered.append(line.text)
                self.say(f"not answered: {_clip(line.text)}")

    # -- what the manager tells the channel --------------------------------------------

    def manager_attached(self) -> None:
        """The manager reports what becomes of each line: the channel keeps count."""
        self._managed = True

    def message_admitted(self, message: Any, outcome: AdmitOutcome,
                         reason: str | None = None) -> None:
        dropped = self._ledger.admitted(message, outcome)
        if dropped is not None and not self._ending():
            self._not_answered(dropped, reason)

    def turn_started(self, message: Any) -> None:
        self._ledger.started(message)

    def turn_finished(self, message: Any) -> None:
        self._ledger.finished(message)

    def _ending(self) -> bool:
        """The session is ending: lines without an answer are reported by `stop`."""
        return self._closed or (self._stop_event is not None and self._stop_event.is_set())

    def _not_answered(self, line: Line, reason: str | None) -> None:
        self._ledger.told(line)
        why = f" ({terminal_text(reason, keep_newlines=False)})" if reason else ""
        self.say(self._style(f"(not answered{why}: {_clip(line.text)})", _DIM))
        if not self._streams:
            self.show_prompt()

    def request_quit(self) -> None:
        """End the session: set the stop event the channel was started with."""
        self.quit_requested = True
        self._closed = True
        setter = getattr(self._stop_event, "set", None)
        if callable(setter):
            setter()

    async def admit_message(
        self, session_id: str, message: Any, turn: TurnSnapshot
    ) -> AdmitDecision | None:
        """A line typed while a turn runs joins that turn (contract 2.20)."""
        if turn.is_running:
            return AdmitDecision.steer("typed while a turn was running")
        return None

    def stream_events(self, message: Any, stream: AsyncStreamEvents) -> AsyncIterator[StreamEvent]:
        return self._show(message, stream)

    async def _show(self, message: Any, stream: AsyncStreamEvents) -> AsyncIterator[StreamEvent]:
        session_id = str(get_field(message, "session_id") or "")
        token = object()
        self._streams[token] = session_id
        self._streamed[session_id] = ""
        self._begin_output()
        self._show_indicator("thinking")
        try:
            async for event in stream:
                self._show_event(session_id, event)
                yield event
        finally:
            # A cancelled turn was already let go by `turns_cancelled`; it may end after
            # the next turn started, whose output it must not touch.
            if self._streams.pop(token, None) is not None:
                self._clear_indicator()

    def _show_event(self, session_id: str, event: StreamEvent) -> None:
        if event.kind == "text":
            delta = terminal_text(str(event.data.get("delta", "")))
            if delta:
                self._begin_output()
                self._write(delta)
                self._streamed[session_id] = self._streamed.get(session_id, "") + delta
        elif event.kind == "tool_call":
            calls = list(event.data.get("tool_calls") or [])
            self._begin_output()
            if not self._at_line_start:
                self._write("\n")
            for call in calls:
                line = terminal_text(f"[tool] {call.get('name')} {call.get('arguments', '')}",
                                     keep_newlines=False)
                self._write(self._style(line, _CYAN) + "\n")
            names = ", ".join(str(call.get("name")) for call in calls)
            self._show_indicator(f"running {names}" if names else "thinking")
        elif event.kind == "tool_result":
            notes = tool_notes(list(event.data.get("tool_results") or []))
            if notes:
                self._begin_output()
                if not self._at_line_start:
                    self._write("\n")
                for note in notes:
                    self._write(self._style(note, _CYAN) + "\n")
            self._show_indicator("thinking")

    async def send(self, message: Any) -> None:
        """Print an outbound message unless its text was already streamed; then prompt."""
        self._ledger.replied()
        kind = get_field(message, "kind") or "normal"
        content = terminal_text(str(get_field(message, "content") or ""))
        streamed = self._streamed.pop(str(get_field(message, "session_id") or ""), None)
        if kind == "error":
            self.show_error(content)
            return
        self._begin_output()
        if streamed is None or streamed.strip() != content.strip():
            if not self._at_line_start:
                self._write("\n")
            if content:
                self._write(content)
        if not self._streams:
            self.show_prompt()

    # -- terminal ----------------------------------------------------------------------

    def say(self, text: str) -> None:
        """Print a line of the channel's own (banner, notices)."""
        self._begin_output()
        if not self._at_line_start:
            self._write("\n")
        self._write(text + "\n")

    def show_error(self, text: str) -> None:
        """Print an error line, distinguishable from replies, then the prompt."""
        self._begin_output()
        if not self._at_line_start:
            self._write("\n")
        self._write(self._style(f"error: {text}", _RED) + "\n")
        if not self._streams:
            self.show_prompt()

    def turns_cancelled(self, session_ids: Iterable[str]) -> None:
        """Tell the user the running turn was cancelled and give the prompt back."""
        cancelled = set(session_ids)
        if not self._ending():  # else `stop` names the cancelled lines among the unanswered
            self._ledger.cancelled(cancelled)
        for session_id in cancelled:
            self._streamed.pop(session_id, None)
        for token, session_id in list(self._streams.items()):
            if session_id in cancelled:
                del self._streams[token]
        if self._editor is not None:
            self._editor.set_status(None)
        self.say(self._style("(turn cancelled)", _DIM))
        self.show_prompt()

    def show_prompt(self) -> None:
        """Show the input prompt on a fresh line (once until the next input or output)."""
        if self._prompt_shown or self._closed or self._editor is not None:
            return
        self._clear_indicator()
        if not self._at_line_start:
            self._write("\n")
        self._write(PROMPT)
        self._prompt_shown = True

    def _begin_output(self) -> None:
        self._clear_indicator()
        if self._prompt_shown and self._editor is None:
            self._write("\n")
            self._prompt_shown = False

    def _show_indicator(self, text: str) -> None:
        if self._editor is not None:
            self._editor.set_status(text)
            return
        if not self._is_interactive():
            return
        self._clear_indicator()
        if not self._at_line_start:
            return
        self._write(self._style(f"…{text}", _DIM), track=False)
        self._indicator = True

    def _clear_indicator(self) -> None:
        if self._editor is not None:
            self._editor.set_status(None)
        if self._indicator:
            self._indicator = False
            self._write(_CLEAR_LINE, track=False)

    def _is_interactive(self) -> bool:
        if self.interactive is not None:
            return self.interactive
        return is_terminal(self._out())

    def _style(self, text: str, code: str) -> str:
        if not self._is_interactive() or os.environ.get("NO_COLOR"):
            return text
        return f"{code}{text}{_RESET}"

    def _out(self) -> TextIO:
        return self.output if self.output is not None else sys.stdout

    def _write(self, text: str, *, track: bool = True) -> None:
        if not text:
            return
        if self._editor is not None:
            if track:
                self._editor.write(text)
                self._at_line_start = self._editor.at_line_start
            return
        out = self._out()
        with contextlib.suppress(ValueError, OSError):  # closed or broken terminal
            out.write(text)
            out.flush()
        if track:
            self._at_line_start = text.endswith("\n")


def _clip(text: str, limit: int = 120) -> str:
    """A typed line on one line of the terminal, control characters escaped."""
    text = terminal_text(" ".join(text.split()), keep_newlines=False)
    return text if len(text) <= limit else text[:limit - 3] + "..."
