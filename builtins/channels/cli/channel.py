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

from ...terminal.tool_notes import is_terminal, terminal_text
from .ending import Ending
from .input import STEER_PREFIX, ChatCommand, classify, help_lines, unknown_line
from .lines import ChatLines, Line, clipped
from .options import ChatOptions, option_names
from .reader import NO_LINE, POLL_SECONDS, LineReader, can_edit
from .replies import ReplyView
from .screen import DIM, RED, Screen

if TYPE_CHECKING:
    from .approvals import ChatAsker

__all__ = ["CliChannel"]

PROMPT = "you> "


class CliChannel(Interface):
    """The terminal as a channel (see the module docstring).

    `session_id` (None: the framework's default, `cli:default`), `chat_id` and `model`
    (None: the configured one) shape the envelopes; `input` and `output` default to the
    process's stdin and stdout, read when the channel starts. `interactive` (default: the
    output is a terminal) enables the transient indicators and colours. `editor` (default:
    both are the process's terminal) reads lines with the line editor, keeping them in the
    `history` file (None: for this session only). `workspace` (default: the current
    folder) is where the file tools' paths are read from for their diffs.

    Its state is kept by concern: `options` (`ChatOptions`), the `screen` (`Screen`),
    the lines handed over (`ChatLines`), the ending (`Ending`) and the turns being shown
    (`ReplyView`).
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
        self.options = ChatOptions(
            session_id=session_id, chat_id=chat_id, model=model, input=input, output=output,
            interactive=interactive, editor=editor, history=history, commands=list(commands),
            observe=observe, workspace=workspace, markdown=markdown)
        self.screen = Screen(self.options)
        self.replies = ReplyView(self.screen, self.options)
        self.lines = ChatLines()
        self.ending = Ending()
        self.session_ids: set[str] = set()
        """Resolved ids of the sessions this channel's messages went to."""
        self._echo = False
        """The lines come from piped input: each is echoed after the prompt."""
        self._attached: tuple[str, list[Any]] = ("", [])
        self._asker: ChatAsker | None = None

    def configure(self, **options: Any) -> None:
        """Set any of the constructor's keyword options (`ChatOptions`); `session_id` and
        `model` may change while the chat runs: they shape the lines typed next."""
        unknown = sorted(set(options) - option_names())
        if unknown:
            raise TypeError(f"CliChannel.configure: unknown option(s) {', '.join(unknown)}")
        for key, value in options.items():
            setattr(self.options, key, list(value) if key == "commands" else value)

    @property
    def chat_id(self) -> str:
        return self.options.chat_id

    @property
    def model(self) -> str | None:
        """The model the lines typed next ask for (None: the configured one)."""
        return self.options.model

    @property
    def status_note(self) -> str:
        """Said after the status indicator (the chat's context meter)."""
        return self.screen.status_note

    @status_note.setter
    def status_note(self, note: str) -> None:
        self.screen.status_note = note

    @property
    def unanswered(self) -> list[str]:
        """The lines the channel reported unanswered when it stopped."""
        return self.lines.unanswered

    @property
    def quit_requested(self) -> bool:
        """`/quit` or the end of input ended the session (`request_quit`)."""
        return self.ending.quit_requested

    def attach(self, text: str, media: list[Any]) -> None:
        """Add text (appended to the content) and media items to the next message sent."""
        before, items = self._attached
        self._attached = (before + text, [*items, *media])

    def envelope(self, text: str) -> dict[str, Any]:
        """The envelope for one line typed by the user (with what was attached to it)."""
        attached, media = self._attached
        self._attached = ("", [])
        options = self.options
        message: dict[str, Any] = {"content": text + attached, "channel": self.name,
                                   "chat_id": options.chat_id}
        if media:
            message["media"] = media
        if options.session_id:
            message["session_id"] = options.session_id
        if options.model:
            message["context"] = {"model": options.model}
        return message

    # -- Channel -----------------------------------------------------------------------

    async def start(self, stop_event: StopEvent) -> None:
        """Read lines until end of input, `/quit`, or `stop_event`."""
        self.ending.begin(stop_event)
        self.lines.restart()
        options, screen = self.options, self.screen
        stream = options.input if options.input is not None else sys.stdin
        use_editor = options.editor if options.editor is not None else can_edit(
            stream, screen.out())
        if use_editor:
            await self._read_with_editor()
            return
        reader = LineReader(stream)
        self._echo = not is_terminal(stream)
        self.show_prompt()
        while not self.ending.stopped():
            if reader.fd is None:
                line = await anyio.to_thread.run_sync(reader.read, POLL_SECONDS,
                                                      abandon_on_cancel=True)
            else:
                line = await anyio.to_thread.run_sync(reader.read, POLL_SECONDS)
            if line is NO_LINE:
                continue
            if not self._echo:  # a terminal echoed the line and its newline
                screen.prompt_shown, screen.at_line_start = False, True
            if line is None or not await self._handle(line):  # end of input, /quit
                if line is not None and reader.fd is not None and reader.read(0) not in (
                        None, NO_LINE):  # what a script sent after its /quit
                    self.say("(the input after /quit is not read)")
                await self._leave()
                return

    async def _read_with_editor(self) -> None:
        from .line_editor import LineEditor

        self.screen.editor = editor = LineEditor(prompt=PROMPT, history=self.options.history)
        if self.options.markdown:
            from .markdown_reply import MarkdownReply

            self.replies.markdown = MarkdownReply(editor.set_preview, lambda: editor.width)
        try:
            with editor.active():
                while not self.ending.stopped():
                    line = await editor.read()
                    if line is None or not await self._handle(line):  # Ctrl-D, /quit
                        await self._leave()
                        return
        finally:
            if editor.partial:
                editor.write("\n")
            self.screen.editor = self.replies.markdown = None

    async def _handle(self, line: str) -> bool:
        """Answer the waiting question, or send, steer or run one typed line; False when it
        asks to leave."""
        names = {command.name for command in self.options.commands} | {"help", "quit"}
        typed = classify(line, names)
        if typed.name != "quit" and self._asker is not None and self._asker.take(
                line, chat_command=typed.kind in ("command", "unknown")):
            return True
        if typed.kind == "empty":
            if not self.replies.busy:
                self.show_prompt()
            return True
        if typed.kind in ("message", "steer"):
            await self._submit(typed.text, line, steer=typed.kind == "steer")
            return True
        if self._echo:  # a script: its command runs after the answers to the lines before
            await self._wait_for_answers()
            if self.ending.stopped():
                return False
            self._echo_line(line)
        if typed.name in ("quit", "help") and typed.text:  # as every command without any
            self.show_error(f"/{typed.name}: /{typed.name} takes no arguments "
                            f"(got {typed.text!r})")
            return True
        if typed.name == "quit":
            return False
        if typed.kind == "unknown":
            self.say(unknown_line(typed.name))
        elif typed.name == "help":
            for text in help_lines(self.options.commands):
                self.say(text)
        else:
            command = next(command for command in self.options.commands
                           if command.name == typed.name)
            try:
                await command.run(typed.text)
            except Exception as exc:  # a command's failure is one line; the chat goes on
                self.show_error(f"/{typed.name}: {exc}")
        if not self.replies.busy:
            self.show_prompt()
        return True

    async def _leave(self) -> None:
        """End of input or `/quit`: wait for the answers to the lines already sent (Ctrl-C
        stops waiting), then end the session."""
        self.ending.input_ended = True
        if self._asker is not None:  # nobody is left to answer a question
            self._asker.abandon()
        if self.lines.waiting() and not self._echo:
            self.say(self.screen.style("(leaving once the lines already sent are answered; "
                                       "Ctrl-C leaves now)", DIM))
        await self._wait_for_answers()
        self.screen.end_line()
        self.request_quit()

    async def _wait_for_answers(self) -> None:
        while self.lines.waiting() and not self.ending.stopped():
            await anyio.sleep(POLL_SECONDS / 4)

    async def _submit(self, text: str, line: str, *, steer: bool = False) -> None:
        message = self.envelope(text)
        ledger = self.lines.ledger
        typed = ledger.record(message, line, steer=steer)
        try:
            await self.message_handler(message)
        except Exception as exc:  # the manager handles its own errors; be safe anyway
            self.show_error(f"{type(exc).__name__}: {exc}")
            ledger.told(typed)
            return
        if self.lines.managed and not ledger.taken(typed) and not self.ending.ending():
            self._not_answered(typed, "it was not taken")
        elif not self.lines.managed and self._echo:
            self._echo_line(line)
        session_id = get_field(message, "session_id")
        if session_id:
            self.session_ids.add(str(session_id))

    async def stop(self) -> None:
        """Stop reading; say which typed lines have no answer; leave the terminal on a
        fresh line."""
        self.ending.closed = True
        self.screen.clear_indicator()
        self.screen.end_line()
        if self.lines.managed:
            for line in self.lines.ledger.unanswered():
                self.lines.unanswered.append(line.text)
                self.say(f"not answered: {clipped(line.text)}")

    # -- what the manager tells the channel --------------------------------------------

    def manager_attached(self) -> None:
        """The manager reports what becomes of each line: the channel keeps count."""
        self.lines.managed = True

    def message_admitted(self, message: Any, outcome: AdmitOutcome,
                         reason: str | None = None) -> None:
        ledger = self.lines.ledger
        dropped = ledger.admitted(message, outcome)
        if dropped is not None and not self.ending.ending():
            self._not_answered(dropped, reason)
        line = ledger.line_of(message)
        if line is None or dropped is not None:
            return
        if outcome == "steer" and self._echo and not line.echoed:
            self._echo_line(line.text)
            line.echoed = True
        elif outcome in ("steer", "queued") and not (self._echo or self.ending.ending()):
            note = ("(steered into the running turn)" if outcome == "steer" else
                    "(not steered: the running turn could not take it; queued)"
                    if line.steer else "(queued: it gets its turn after the running one)")
            self.say(self.screen.style(note, DIM))

    def turn_started(self, message: Any) -> None:
        self.lines.turns += 1
        ledger = self.lines.ledger
        queued = getattr(ledger.line_of(message), "state", None) == "queued"
        line = ledger.started(message)
        if line is not None and self._echo and not line.echoed:
            self._echo_line(line.text)  # piped input: shown when its turn starts
            line.echoed = True
        elif line is not None and queued:  # typed earlier, above other output: say which
            self.say(self.screen.style(f"(answering: {clipped(line.text)})", DIM))

    def turn_finished(self, message: Any) -> None:
        self.lines.turns -= 1
        self.lines.ledger.finished(message)

    def _not_answered(self, line: Line, reason: str | None) -> None:
        self.lines.ledger.told(line)
        why = f" ({terminal_text(reason, keep_newlines=False)})" if reason else ""
        self.say(self.screen.style(f"(not answered{why}: {clipped(line.text)})", DIM))
        if not self.replies.busy:
            self.show_prompt()

    def request_quit(self) -> None:
        """End the session: set the stop event the channel was started with."""
        self.ending.quit()

    async def admit_message(
        self, session_id: str, message: Any, turn: TurnSnapshot
    ) -> AdmitDecision | None:
        """Lines run one turn at a time, in the order typed (the `admit_message` scheduling rules):
        each waits for the session's running turn. A steered line (`>>`) joins the running turn once
        its model has begun (before, the turn would put it ahead of its own prompt)."""
        line = self.lines.ledger.line_of(message)
        if (line is not None and line.steer and turn.is_running
                and session_id in self.replies.began):
            return AdmitDecision.steer(f"steered with {STEER_PREFIX}")
        return AdmitDecision.follow_up("chat lines run one turn at a time, in order")

    def approval_asker(self, message: Any) -> ChatAsker | None:
        """The chat asks about tool calls when a person types its lines (not piped input)."""
        closed = self.ending.closed or self.ending.input_ended  # nobody left to answer
        if self._asker is None and not (self._echo or closed):
            from .approvals import ChatAsker

            self._asker = ChatAsker(self.screen)
        return None if self._echo or closed else self._asker

    def stream_events(self, message: Any, stream: AsyncStreamEvents) -> AsyncIterator[StreamEvent]:
        return self.replies.show(message, stream)

    async def send(self, message: Any) -> None:
        """Print an outbound message unless its text was already streamed; then prompt."""
        self.lines.ledger.replied()
        kind = get_field(message, "kind") or "normal"
        content = terminal_text(str(get_field(message, "content") or ""))
        if kind == "error":  # a cut stream's partial reply may follow: what streamed stays
            self.replies.finish_step()  # and shows now, above the error, not in the next turn
            self.show_error(content)
            return
        streamed = self.replies.streamed.pop(str(get_field(message, "session_id") or ""), None)
        self.replies.show_reply(content, streamed)
        if not self.replies.busy:
            self.show_prompt()

    # -- terminal ----------------------------------------------------------------------

    def say(self, text: str) -> None:
        """Print a line of the channel's own (banner, notices)."""
        self.screen.say(text)

    def show_error(self, text: str) -> None:
        """Print an error line, distinguishable from replies, then the prompt."""
        screen = self.screen
        screen.begin_output()
        screen.end_line()
        screen.write(screen.style(f"error: {text}", RED) + "\n")
        if not self.replies.busy:
            self.show_prompt()

    def turns_cancelled(self, session_ids: Iterable[str]) -> None:
        """Tell the user the running turn was cancelled and give the prompt back."""
        cancelled = set(session_ids)
        if not self.ending.ending():  # else `stop` names the cancelled lines among the unanswered
            for line in self.lines.ledger.cancelled(cancelled):
                self._not_answered(line, "cancelled with Ctrl-C")
        self.replies.cancelled(cancelled)
        self.say(self.screen.style("(turn cancelled)", DIM))
        if self.ending.input_ended:  # Ctrl-C while leaving: leave now
            self.request_quit()
        self.show_prompt()

    def show_prompt(self) -> None:
        """Show the input prompt on a fresh line (once until the next input or output)."""
        screen = self.screen
        if screen.prompt_shown or self.ending.ending() or screen.editor is not None or self._echo:
            return  # piped input: `_echo_line` writes the prompt before each line
        screen.clear_indicator()
        screen.end_line()
        screen.write(PROMPT)
        screen.prompt_shown = True

    def _echo_line(self, line: str) -> None:
        """Show a line read from piped input after the prompt, as if it had been typed."""
        screen = self.screen
        if not screen.prompt_shown:
            screen.begin_output()
            screen.end_line()
            screen.write(PROMPT)
        screen.prompt_shown = False
        screen.write(terminal_text(line) + "\n")


if TYPE_CHECKING:
    from ..protocols import ChatChannel

    def _chat_channel(channel: CliChannel) -> ChatChannel:
        """Never called: mypy checks here that the channel has the shape `hookline chat`
        talks through."""
        return channel
