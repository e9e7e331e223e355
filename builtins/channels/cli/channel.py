"""The `cli` channel: a conversation in the terminal, behind `hookline chat`.

It reads lines from the terminal in a worker thread and hands each to the manager as an
envelope `{content, channel: "cli", chat_id, session_id?, context?, media?}`. While a turn
runs it shows what happens: a transient `…thinking` indicator until the model's first event
(and `…running <tool>` while a tool runs), the reply text as it streams, and what ran as
`hookline run` shows it (`terminal/tool_view.py`): a `[tool] name arguments` line for every
tool call, a line for its result and, for `fs_edit` and `fs_write`, the diff of the file
(coloured on a colour terminal; the files are read from `workspace`), with `status_note`
(the context meter) after the indicator. Unstreamed outbounds are printed when they
arrive, errors as `error: ...` (red on a colour terminal). Every reply ends its line.

Lines run one turn at a time, in the order typed: a line typed while a turn runs waits for
it (`admit_message` answers `follow_up`) and gets a turn of its own. A line starting with
`>>` is steered into the running turn instead. Lines starting with `/` may be commands the
chat runs itself (`cli_input`: `/help`, `/quit`, and the `commands` it is configured with);
with piped input a command waits for the answers to the lines before it, and each piped
line is echoed after the prompt when its turn starts, so the output reads as a transcript.

End of input (Ctrl-D) or `/quit` waits for the answers to the lines already sent, then ends
the session by setting the stop event the channel was started with. Under a channel
manager, no typed line is lost silently (`cli_lines`): one dropped while the session goes
on is shown as `(not answered: ...)` at once, and when the channel stops it prints
`not answered: <line>` for each line still without an answer (`unanswered` lists them).

When both the input and the output are a terminal, lines are read with the line editor
(`line_editor.py`: editing, a history kept in the `history` file, Ctrl-R search, multi-line
messages, and a prompt that stays at the bottom while replies print above it), and each
model step's reply is rendered as Markdown once the step ends (`markdown_reply.py`;
`markdown=False` prints it as written); otherwise they are read plainly (`cli_reader`).
Text from the model, tools and plugins is shown with control characters escaped
(`terminal_text`): a reply cannot move the cursor, retitle the window or write the clipboard.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterable
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

from ...terminal.tool_notes import is_terminal, terminal_text, turn_note
from ...terminal.tool_view import ToolView, colour_allowed
from .input import STEER_PREFIX, ChatCommand, classify, help_lines, unknown_line
from .lines import Line, LineLedger, clipped
from .reader import NO_LINE, POLL_SECONDS, LineReader, can_edit
from .screen import DIM, RED, Screen

if TYPE_CHECKING:
    from .approvals import ChatAsker
    from .line_editor import LineEditor
    from .markdown_reply import MarkdownReply

__all__ = ["CliChannel"]

logger = logging.getLogger(__name__)

PROMPT = "you> "


@functools.cache
def _option_names() -> frozenset[str]:
    """The keyword options of `CliChannel`'s constructor, which `configure` accepts."""
    parameters = inspect.signature(CliChannel.__init__).parameters.values()
    return frozenset(p.name for p in parameters if p.kind is p.KEYWORD_ONLY)


class CliChannel(Screen, Interface):
    """The terminal as a channel (see the module docstring).

    `session_id` (None: the framework's default, `cli:default`), `chat_id` and `model`
    (None: the configured one) shape the envelopes; `input` and `output` default to the
    process's stdin and stdout, read when the channel starts. `interactive` (default: the
    output is a terminal) enables the transient indicators and colours. `editor` (default:
    both are the process's terminal) reads lines with the line editor, keeping them in the
    `history` file (None: for this session only). `workspace` (default: the current
    folder) is where the file tools' paths are read from for their diffs.
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
        commands: Iterable[ChatCommand] = (),
        observe: Callable[[str, StreamEvent], None] | None = None,
        workspace: str | None = None,
        markdown: bool = True,
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
        self.commands = list(commands)
        self.observe = observe
        self.workspace = workspace
        self.markdown = markdown
        self._reply: MarkdownReply | None = None
        self._view: ToolView | None = None
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
        self._echo = False
        self._input_ended = False
        self._began: set[str] = set()
        """Sessions whose running turn's model has begun: a steer joins it after its prompt."""
        self._turns = 0
        self._attached: tuple[str, list[Any]] = ("", [])
        self._asker: ChatAsker | None = None
        self.status_note = ""  # said after the status indicator: the context meter

    def configure(self, **options: Any) -> None:
        """Set any of the constructor's keyword options (the names are read from its
        signature, so an option added there can be configured too); `session_id` and
        `model` may change while the chat runs: they shape the lines typed next."""
        unknown = sorted(set(options) - _option_names())
        if unknown:
            raise TypeError(f"CliChannel.configure: unknown option(s) {', '.join(unknown)}")
        for key, value in options.items():
            setattr(self, key, list(value) if key == "commands" else value)

    def attach(self, text: str, media: list[Any]) -> None:
        """Add text (appended to the content) and media items to the next message sent."""
        before, items = self._attached
        self._attached = (before + text, [*items, *media])

    def envelope(self, text: str) -> dict[str, Any]:
        """The envelope for one line typed by the user (with what was attached to it)."""
        attached, media = self._attached
        self._attached = ("", [])
        message: dict[str, Any] = {"content": text + attached, "channel": self.name,
                                   "chat_id": self.chat_id}
        if media:
            message["media"] = media
        if self.session_id:
            message["session_id"] = self.session_id
        if self.model:
            message["context"] = {"model": self.model}
        return message

    # -- Channel -----------------------------------------------------------------------

    async def start(self, stop_event: StopEvent) -> None:
        """Read lines until end of input, `/quit`, or `stop_event`."""
        self._stop_event = stop_event
        self._closed = self._input_ended = False
        self.quit_requested = False
        self._ledger, self.unanswered = LineLedger(), []
        stream = self.input if self.input is not None else sys.stdin
        use_editor = self.editor if self.editor is not None else can_edit(stream, self._out())
        if use_editor:
            await self._read_with_editor()
            return
        reader = LineReader(stream)
        self._echo = not is_terminal(stream)
        self.show_prompt()
        while not self._stopped():
            if reader.fd is None:
                line = await anyio.to_thread.run_sync(reader.read, POLL_SECONDS,
                                                      abandon_on_cancel=True)
            else:
                line = await anyio.to_thread.run_sync(reader.read, POLL_SECONDS)
            if line is NO_LINE:
                continue
            if not self._echo:  # a terminal echoed the line and its newline
                self._prompt_shown, self._at_line_start = False, True
            if line is None or not await self._handle(line):  # end of input, /quit
                await self._leave()
                return

    async def _read_with_editor(self) -> None:
        from .line_editor import LineEditor

        self._editor = editor = LineEditor(prompt=PROMPT, history=self.history)
        if self.markdown:
            from .markdown_reply import MarkdownReply

            self._reply = MarkdownReply(editor.set_preview, lambda: editor.width)
        try:
            with editor.active():
                while not self._stopped():
                    line = await editor.read()
                    if line is None or not await self._handle(line):  # Ctrl-D, /quit
                        await self._leave()
                        return
        finally:
            if editor.partial:
                editor.write("\n")
            self._editor = self._reply = None

    async def _handle(self, line: str) -> bool:
        """Answer the waiting question, or send, steer or run one typed line; False when it
        asks to leave."""
        if self._asker is not None and self._asker.take(line):
            return True
        names = {command.name for command in self.commands} | {"help", "quit"}
        typed = classify(line, names)
        if typed.kind == "empty":
            if not self._streams:
                self.show_prompt()
            return True
        if typed.kind in ("message", "steer"):
            await self._submit(typed.text, line, steer=typed.kind == "steer")
            return True
        if self._echo:  # a script: its command runs after the answers to the lines before
            await self._wait_for_answers()
            if self._stopped():
                return False
            self._echo_line(line)
        if typed.name == "quit":
            return False
        if typed.kind == "unknown":
            self.say(unknown_line(typed.name))
        elif typed.name == "help":
            for text in help_lines(self.commands):
                self.say(text)
        else:
            command = next(command for command in self.commands if command.name == typed.name)
            try:
                await command.run(typed.text)
            except Exception as exc:  # a command's failure is one line; the chat goes on
                self.show_error(f"/{typed.name}: {exc}")
        if not self._streams:
            self.show_prompt()
        return True

    async def _leave(self) -> None:
        """End of input or `/quit`: wait for the answers to the lines already sent (Ctrl-C
        stops waiting), then end the session."""
        self._input_ended = True
        if self._ledger.waiting(self._turns > 0) and not self._echo:
            self.say(self._style("(leaving once the lines already sent are answered; "
                                 "Ctrl-C leaves now)", DIM))
        await self._wait_for_answers()
        if not self._at_line_start:
            self._write("\n")
        self.request_quit()

    async def _wait_for_answers(self) -> None:
        while self._ledger.waiting(self._turns > 0) and not self._stopped():
            await anyio.sleep(POLL_SECONDS / 4)

    async def _submit(self, text: str, line: str, *, steer: bool = False) -> None:
        message = self.envelope(text)
        typed = self._ledger.record(message, line, steer=steer)
        try:
            await self.message_handler(message)
        except Exception as exc:  # the manager handles its own errors; be safe anyway
            self.show_error(f"{type(exc).__name__}: {exc}")
            self._ledger.told(typed)
            return
        if self._managed and not self._ledger.taken(typed) and not self._ending():
            self._not_answered(typed, "it was not taken")
        elif not self._managed and self._echo:
            self._echo_line(line)
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
                self.say(f"not answered: {clipped(line.text)}")

    # -- what the manager tells the channel --------------------------------------------

    def manager_attached(self) -> None:
        """The manager reports what becomes of each line: the channel keeps count."""
        self._managed = True

    def message_admitted(self, message: Any, outcome: AdmitOutcome,
                         reason: str | None = None) -> None:
        dropped = self._ledger.admitted(message, outcome)
        if dropped is not None and not self._ending():
            self._not_answered(dropped, reason)
        line = self._ledger.line_of(message)
        if line is None or dropped is not None:
            return
        if outcome == "steer" and self._echo and not line.echoed:
            self._echo_line(line.text)
            line.echoed = True
        elif outcome in ("steer", "queued") and not (self._echo or self._ending()):
            note = ("(steered into the running turn)" if outcome == "steer" else
                    "(not steered: the running turn could not take it; queued)"
                    if line.steer else "(queued: it gets its turn after the running one)")
            self.say(self._style(note, DIM))

    def turn_started(self, message: Any) -> None:
        self._turns += 1
        queued = getattr(self._ledger.line_of(message), "state", None) == "queued"
        line = self._ledger.started(message)
        if line is not None and self._echo and not line.echoed:
            self._echo_line(line.text)  # piped input: shown when its turn starts
            line.echoed = True
        elif line is not None and queued:  # typed earlier, above other output: say which
            self.say(self._style(f"(answering: {clipped(line.text)})", DIM))

    def turn_finished(self, message: Any) -> None:
        self._turns -= 1
        self._ledger.finished(message)

    def _stopped(self) -> bool:
        return self._closed or (self._stop_event is not None and self._stop_event.is_set())

    def _ending(self) -> bool:
        """The session is ending (stopped, or leaving once the lines sent are answered):
        lines without an answer are reported by `stop`."""
        return self._input_ended or self._stopped()

    def _not_answered(self, line: Line, reason: str | None) -> None:
        self._ledger.told(line)
        why = f" ({terminal_text(reason, keep_newlines=False)})" if reason else ""
        self.say(self._style(f"(not answered{why}: {clipped(line.text)})", DIM))
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
        """Lines run one turn at a time, in the order typed (the `admit_message` scheduling rules):
        each waits for the session's running turn. A steered line (`>>`) joins the running turn once
        its model has begun (before, the turn would put it ahead of its own prompt)."""
        line = self._ledger.line_of(message)
        if line is not None and line.steer and turn.is_running and session_id in self._began:
            return AdmitDecision.steer(f"steered with {STEER_PREFIX}")
        return AdmitDecision.follow_up("chat lines run one turn at a time, in order")

    def approval_asker(self, message: Any) -> ChatAsker | None:
        """The chat asks about tool calls when a person types its lines (not piped input)."""
        if self._asker is None and not (self._echo or self._closed):
            from .approvals import ChatAsker

            self._asker = ChatAsker(self)
        return None if self._echo or self._closed else self._asker

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
                self._began.add(session_id)
                await self._show_event(session_id, event)
                if self.observe is not None:
                    try:
                        self.observe(session_id, event)
                    except Exception as exc:  # an observer never breaks the turn
                        logger.warning("cli.observe_failed error=%s: %s",
                                       type(exc).__name__, exc)
                yield event
        finally:
            # A cancelled turn was already let go by `turns_cancelled`; it may end after
            # the next turn started, whose output it must not touch.
            if self._streams.pop(token, None) is not None:
                self._began.discard(session_id)
                self._clear_indicator()
                self._finish_reply()

    async def _show_event(self, session_id: str, event: StreamEvent) -> None:
        if event.kind == "text":
            delta = terminal_text(str(event.data.get("delta", "")))
            if delta:
                self._begin_output()
                if self._reply is not None:
                    self._reply.add(delta)
                else:
                    self._write(delta)
                self._streamed[session_id] = self._streamed.get(session_id, "") + delta
        elif event.kind == "tool_call":
            calls = list(event.data.get("tool_calls") or [])
            self._finish_reply()
            self._show_lines(await self._tool_view().calls(calls))
            names = ", ".join(str(call.get("name")) for call in calls)
            self._show_indicator(f"running {names}" if names else "thinking")
        elif event.kind in ("retry", "compaction") and (note := turn_note(event.kind,
                                                                          event.data)):
            self._finish_reply()
            self._show_lines([self._style(note, DIM)])
        elif event.kind == "tool_result":
            records = list(event.data.get("tool_results") or [])
            colour = self._is_interactive() and colour_allowed()
            self._show_lines(await self._tool_view().results(records, colour))
            self._show_indicator("thinking")

    def _finish_reply(self) -> None:
        """The model's step ended: its streamed text, rendered (`markdown_reply.py`)."""
        if self._reply is not None and self._reply.text:
            self._write(self._reply.take())

    def _tool_view(self) -> ToolView:
        if self._view is None:
            self._view = ToolView(str(self.workspace or os.getcwd()))
        return self._view

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
            if content and self._reply is not None:
                self._reply.take()  # what streamed is not the reply: the reply is shown
                self._write(self._reply.take(content))
            elif content:
                self._write(content)
        if not self._at_line_start:  # a reply ends its line: the next output starts below
            self._write("\n")
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
        self._write(self._style(f"error: {text}", RED) + "\n")
        if not self._streams:
            self.show_prompt()

    def turns_cancelled(self, session_ids: Iterable[str]) -> None:
        """Tell the user the running turn was cancelled and give the prompt back."""
        cancelled = set(session_ids)
        if not self._ending():  # else `stop` names the cancelled lines among the unanswered
            self._ledger.cancelled(cancelled)
        for session_id in cancelled:
            self._streamed.pop(session_id, None)
            self._began.discard(session_id)
        for token, session_id in list(self._streams.items()):
            if session_id in cancelled:
                del self._streams[token]
        if self._editor is not None:
            self._editor.set_status(None)
        self._finish_reply()  # what streamed before the cancel, shown once, never carried on
        self.say(self._style("(turn cancelled)", DIM))
        if self._input_ended:  # Ctrl-C while leaving: leave now
            self.request_quit()
        self.show_prompt()

    def show_prompt(self) -> None:
        """Show the input prompt on a fresh line (once until the next input or output)."""
        if self._prompt_shown or self._ending() or self._editor is not None or self._echo:
            return  # piped input: `_echo_line` writes the prompt before each line
        self._clear_indicator()
        if not self._at_line_start:
            self._write("\n")
        self._write(PROMPT)
        self._prompt_shown = True

    def _echo_line(self, line: str) -> None:
        """Show a line read from piped input after the prompt, as if it had been typed."""
        if not self._prompt_shown:
            self._begin_output()
            if not self._at_line_start:
                self._write("\n")
            self._write(PROMPT)
        self._prompt_shown = False
        self._write(terminal_text(line) + "\n")
