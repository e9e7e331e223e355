"""Terminal output for turns: streamed text, tool activity, outbounds and errors."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar, NoReturn

import typer

from hookline.builtins.privacy import redact_credentials
from hookline.builtins.terminal import is_terminal, terminal_text
from hookline.kernel.envelope import get_field
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent

from .blame import AGENT_HOOK_LOG, innermost, names_the_builtin, plugin_failure_line


def plugin_prints_to_stderr() -> contextlib.AbstractContextManager[Any]:
    """While plugins run (their imports, factories, hooks), what they print goes to stderr:
    stdout holds hookline's own output alone (a reply, JSON lines), which its writers took
    before."""
    return contextlib.redirect_stdout(sys.stderr)


def fail(error: BaseException, status: int = 1) -> NoReturn:
    """One clear line on stderr and exit code `status` (with the error's notes, which name
    the plugin to blame where the kernel knows it). The text often quotes a provider or a
    file, so its control characters are shown escaped, as the printer and the chat show
    replies: an error cannot retitle or clear the terminal."""
    typer.echo(f"error: {terminal_text(error_text(error))}", err=True)
    raise typer.Exit(status)


def json_text(value: Any, stream: Any, **options: Any) -> str:
    """`value` as JSON for `stream`: characters as they are for a file or a pipe (but a
    lone surrogate, which UTF-8 cannot write, as its JSON escape), and on a terminal each
    one that is not printable as its JSON escape (`\u009b`, `\u202e`): the same JSON,
    which no control character or reordering mark in a tape can drive."""
    import json

    from hookline.builtins.store import LONE_SURROGATE

    text = json.dumps(value, ensure_ascii=False, **options)
    if text.isascii():
        return text  # json.dumps escapes every ASCII control character itself
    if not is_terminal(stream):
        return LONE_SURROGATE.sub(lambda found: json.dumps(found.group())[1:-1], text)
    return "".join(char if char.isprintable() or char == "\n" else json.dumps(char)[1:-1]
                   for char in text)


def error_text(error: BaseException) -> str:
    """What a failure says: its message and notes, credentials hidden."""
    from hookline.builtins.config import SettingsError
    from hookline.kernel.errors import ErrorKind, HooklineError

    error = innermost(error)
    # A settings error names the file, the key and the fix, and so does the builtin's
    # config error (a home it cannot use): which builtin function met it is no news.
    told = isinstance(error, HooklineError) and error.kind == ErrorKind.config
    notes = "" if isinstance(error, SettingsError) else "; ".join(
        note for note in getattr(error, "__notes__", ())
        if not (told and names_the_builtin(note)))
    text = (str(error) or type(error).__name__) + (f" ({notes})" if notes else "")
    return redact_credentials(text)


class TurnPrinter:
    """Bound as the framework's router for one command: it sees the model stream and the
    outbound messages, prints them, and remembers errors so the command can fail.

    On a terminal the reply's control characters are shown escaped (`terminal_text`), and
    with `markdown` a whole (not streamed) reply is rendered as Markdown; piped, the reply
    is written as it is, for scripts.

    What ran goes to stderr, streamed or not: a `[tool]` line per call, one per result,
    the first lines of its output or the diff of each file tool's change (coloured when
    stderr is a terminal), then,
    with `usage`, the turn's token counts. Stdout is the reply and nothing else, as with
    llm, so `hookline run ... > reply.txt` or a pipe gets the answer while the terminal
    still shows the work; `quiet` leaves out the tool lines, output, diffs and status line.
    With `usage`, the session's totals follow the turn's when `session_usage` is set.
    `workspace` is where the file tools' paths are read from for the diffs; with
    `verbose` a tool's whole output is shown, not its first lines.

    What it shows is `show`'s, for each event; a subclass shows them otherwise
    (`run_json.JsonPrinter`), while this class keeps what the command needs of them. The
    reply (`ReplyWriter`), what ran (`WorkLines`) and the token accounting (`TurnUsage`)
    are its parts; the printer sequences them and judges the turn's outcome."""

    def __init__(self, stream: bool, out: Any = None, status: StatusLine | None = None, *,
                 quiet: bool = False, usage: bool = False, workspace: Any = None,
                 err: Any = None, markdown: bool = False, verbose: bool = False) -> None:
        self.status = (status if status is not None and not quiet
                       else StatusLine(enabled=False))
        self.reply = ReplyWriter(stream, out, markdown)
        self.work = WorkLines(self.status, self.reply, err, quiet=quiet, verbose=verbose,
                              workspace=workspace)
        self.meter = TurnUsage(usage)
        self.errors: list[str] = []
        self.denied = 0
        """Tool calls of the turn that were denied (a rule, the policy or the user)."""
        self.asker: Any = None
        """Who asks about tool calls that need a person (None: the policy decides)."""
        self.warnings: list[str] = []
        """Lines said on stderr once the reply is out (a session grown long)."""
        self.model_done = False
        """The model stream ended: the turn is only finishing (its state saved, its reply
        handed to the plugins)."""
        self._step = 1

    @property
    def stream(self) -> bool:
        return self.reply.stream

    @property
    def out(self) -> Any:
        return self.reply.out

    def approval_asker(self, message: Any) -> Any:
        return self.asker

    def wrap_stream(self, message: Any, stream: AsyncStreamEvents) -> AsyncIterator[StreamEvent]:
        return self._watch(stream)

    async def _watch(self, stream: AsyncStreamEvents) -> AsyncIterator[StreamEvent]:
        self.status.show(f"step {self._step}: thinking")
        async for event in stream:
            self._keep(event)
            await self.show(event)
            yield event
        self.model_done = True

    def _keep(self, event: StreamEvent) -> None:
        """What the command needs of an event, shown or not: errors, denials, usage."""
        if event.kind == "error":
            self.errors.append(str(event.data.get("message") or event.data))
        elif event.kind == "tool_result":
            records = list(event.data.get("tool_results") or [])
            self.denied += sum(record.get("outcome") == "denied" for record in records)
        elif event.kind in ("usage", "final"):
            self.meter.take(event)

    async def show(self, event: StreamEvent) -> None:
        """An event on the terminal: streamed text on stdout, what ran on stderr, and the
        status line."""
        if event.kind == "text" and self.reply.stream:
            self.reply.write(str(event.data.get("delta", "")))
        elif event.kind == "text":
            self.status.show(f"step {self._step}: writing the reply", restart=False)
        elif event.kind == "tool_call":
            calls = list(event.data.get("tool_calls") or [])
            await self.work.calls(calls)
            names = ", ".join(str(call.get("name")) for call in calls)
            self.status.show(f"step {self._step}: running {names}")
        elif event.kind == "tool_result":
            await self.work.results(list(event.data.get("tool_results") or []))
            self._step += 1
            self.status.show(f"step {self._step}: thinking")
        elif event.kind in ("retry", "compaction"):
            from hookline.builtins.terminal import retry_status, turn_note

            self.work.note(turn_note(event.kind, event.data))
            self.status.show(f"step {self._step}: " + (
                retry_status(event.data) if event.kind == "retry" else "thinking"))

    async def dispatch(self, message: Any) -> bool:
        if get_field(message, "kind") == "error":
            self.errors.append(str(get_field(message, "content")))
        return True

    def finish(self, result: Any, check_errors: bool = True) -> None:
        """Print the outbound messages (unless already streamed), the usage line when
        asked for, and fail on errors."""
        self.status.clear()
        if not (self.errors and check_errors):  # a failed turn prints no partial reply
            self.print_reply(result)
            if not (self.reply.printed_text or replies(result)):
                self.warnings.append("the model's reply was empty: there is nothing to print")
        elif self.reply.stream and self.reply.printed_text:
            self.reply.out.write("\n")
        if self.meter.enabled:
            self.reply.out.flush()
            for line in self.meter.lines():
                self.work.echo(line)
        for line in self.warnings:  # they may quote a session id a tape gave
            self.work.echo(f"warning: {terminal_text(line)}")
        if self.errors and check_errors:
            self.fail(RuntimeError(self.errors[0]))
        if self.denied and check_errors:
            from .approvals import DENIED_EXIT

            self.work.echo(f"hookline: the turn ended with {self.denied} tool call(s) denied "
                           f"(docs/approvals.md)")
            raise typer.Exit(DENIED_EXIT)

    def print_reply(self, result: Any) -> None:
        """The reply on stdout: its outbound messages' text, or the end of its line when
        it was streamed."""
        self.reply.print_reply(result)

    def fail(self, error: BaseException, status: int = 1) -> NoReturn:
        """The command failed: its one `error:` line, and exit `status`. Text that
        streamed before stays on stdout, its line ended."""
        reply = self.reply
        if reply.midline or (reply.open_line and not reply.safe):  # piped: the file's line
            reply.out.write("\n")
            reply.out.flush()
        fail(error, status)


def replies(result: Any) -> list[str]:
    """The text of the turn's outbound messages that are replies (not errors, not empty)."""
    found = [get_field(outbound, "content") for outbound in result.outbounds
             if get_field(outbound, "kind") != "error"]
    return [str(content) for content in found if content]


class ReplyWriter:
    """The reply on stdout: streamed text as it comes, or the outbound messages once the
    turn is over (as Markdown on a terminal with `markdown`). Escaped on a terminal, so a
    reply cannot retitle or clear it; written as it is to a pipe, for scripts."""

    def __init__(self, stream: bool, out: Any, markdown: bool) -> None:
        self.stream = stream
        self.out = out or sys.stdout
        self.markdown = markdown
        self.safe = is_terminal(self.out)
        self.printed_text = False
        self.midline = False
        """Streamed text not yet ended by a newline: stderr's next line starts a new one."""
        self.open_line = False
        """stdout's last text did not end its line (whatever stderr did since)."""

    def write(self, delta: str) -> None:
        """A streamed piece of the reply, at once."""
        text = self.shown(delta)
        self.out.write(text)
        self.out.flush()
        self.printed_text = True
        self.midline = not text.endswith("\n") if text else self.midline
        self.open_line = not text.endswith("\n") if text else self.open_line

    def print_reply(self, result: Any) -> None:
        """The outbound messages' text, or the end of the line when it was streamed."""
        if self.stream:
            if self.printed_text:
                self.out.write("\n")
            return
        for content in replies(result):
            if self.markdown and self.safe:
                from hookline.builtins.terminal import render_markdown

                render_markdown(content, self.out)
            else:  # not typer.echo: piped, it would drop the reply's colour sequences
                self.out.write(self.shown(content) + "\n")
                self.out.flush()

    def shown(self, text: str) -> str:
        return terminal_text(text) if self.safe else text


class WorkLines:
    """What ran, on stderr: a line per tool call and per result with the first lines of
    its output (all of it with `verbose`) or its diff, and the turn's notes; nothing of
    that with `quiet`. Each line goes after the status line is erased and on a line of
    its own, so it never runs on from streamed text."""

    def __init__(self, status: StatusLine, reply: ReplyWriter, err: Any = None, *,
                 quiet: bool = False, verbose: bool = False, workspace: Any = None) -> None:
        self.status = status
        self.reply = reply
        self.err = err
        self.quiet = quiet
        self.verbose = verbose
        self.workspace = str(workspace) if workspace is not None else os.getcwd()
        """Where the file tools' paths are read from, for the diffs."""
        self._view: Any = None

    async def calls(self, calls: list[dict[str, Any]]) -> None:
        if self.quiet:
            return
        if self._view is None:
            from hookline.builtins.terminal import OUTPUT_LINES, ToolView

            self._view = ToolView(self.workspace, output_lines=None if self.verbose else
                                  OUTPUT_LINES, stream=self._err())
        self.say(await self._view.calls(calls))

    async def results(self, records: list[dict[str, Any]]) -> None:
        if self.quiet or self._view is None:
            return
        from hookline.builtins.terminal import wants_colour

        self.say(await self._view.results(records, wants_colour(self._err())))

    def note(self, note: str | None) -> None:
        """A retry or compaction note, unless `quiet`."""
        if note and not self.quiet:
            self.say([note])

    def say(self, lines: list[str]) -> None:
        """Lines on stderr, after the status line is erased and on a line of their own."""
        if not lines:
            return
        self.status.clear()
        if self.reply.midline:
            self.echo("")
            self.reply.midline = False
        for line in lines:
            self.echo(line)

    def echo(self, line: str) -> None:
        """One line on stderr as it is: the usage, warning and denial lines of the end."""
        typer.echo(line, err=True, file=self.err)

    def _err(self) -> Any:
        return self.err or sys.stderr


class TurnUsage:
    """The turn's token accounting: the input of its last model call (the context meter's,
    and the long-session warning's), and with `enabled` (`--usage`) its token counts, the
    session's totals and the meter line that follow the reply on stderr."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.last_input: tuple[str | None, int] | None = None
        self.session_usage: Any = None
        self.window_of: Any = None
        self._totals: Any = None

    def take(self, event: StreamEvent) -> None:
        """Count a `usage` or `final` event."""
        if event.kind == "usage":
            from hookline.builtins.agent import token_counts

            counts = token_counts(event.data.get("usage"))
            if counts is not None and not event.data.get("summary"):  # how full it is
                self.last_input = (event.data.get("model"), counts["input_tokens"])
        if self.enabled:
            totals = self.totals()
            if event.kind == "usage":
                totals.add(event.data.get("usage"), event.data.get("model"),
                           bool(event.data.get("summary")))
            else:
                totals.calls += 1

    def totals(self) -> Any:
        """The turn's `UsageTotals`, priced with the configured prices."""
        if self._totals is None:
            from hookline.builtins.terminal import UsageTotals

            from .usage import configured_prices

            self._totals = UsageTotals(configured_prices())
        return self._totals

    def lines(self) -> Iterator[str]:
        """The turn's usage line, the session's (when it reported any) and the context
        meter's (when the window is known), each made as it is printed."""
        yield self.totals().line()
        if self.session_usage is not None and self.session_usage.reported:
            yield self.session_usage.line("session")
        last = self.last_input
        if last is not None and self.window_of is not None:
            from hookline.builtins.terminal import meter_line

            yield meter_line(last[1], self.window_of(last[0]))


class StatusLine:
    """A one-line status on stderr while `run` works without `--stream`: the step, the
    tool running and the time it has taken, redrawn in place and erased before anything
    else prints. Only on a terminal (and not with `TERM=dumb`): piped stderr gets nothing,
    so `run` stays scriptable. A log line printed while it shows erases it first and
    draws it again after (`drawn`), so the two never share a line."""

    drawn: ClassVar[StatusLine | None] = None
    """The status line on the screen now, if any."""

    def __init__(self, out: Any = None, *, enabled: bool | None = None) -> None:
        self.out = out or sys.stderr
        self.enabled = (is_terminal(self.out) and os.environ.get("TERM") != "dumb"
                        if enabled is None else enabled)
        self.text = ""
        self._since = time.monotonic()
        self._shown = False

    def show(self, text: str, *, restart: bool = True) -> None:
        """Say `text` from now on (its clock restarts unless `restart` is False); drawn
        at once when it changed, else by the next tick."""
        if text == self.text:
            return
        self.text = text
        if restart:
            self._since = time.monotonic()
        self.redraw()

    def redraw(self) -> None:
        if not self.enabled or not self.text:
            return
        elapsed = int(time.monotonic() - self._since)
        dim, reset = ("", "") if os.environ.get("NO_COLOR") else ("\x1b[2m", "\x1b[0m")
        self._write(f"\r\x1b[K{dim}…{terminal_text(self.text, keep_newlines=False)} "
                    f"{elapsed}s{reset}")
        self._shown = True
        StatusLine.drawn = self

    def clear(self) -> None:
        self.text = ""
        self.erase()

    def erase(self) -> None:
        """Take the line off the screen, keeping its text for the next `redraw`."""
        if self._shown:
            self._write("\r\x1b[K")
            self._shown = False
        if StatusLine.drawn is self:
            StatusLine.drawn = None

    async def tick(self, every: float = 0.5) -> None:
        """Redraw every `every` seconds (the clock) until cancelled."""
        import anyio

        while True:
            await anyio.sleep(every)
            self.redraw()

    def _write(self, text: str) -> None:
        try:
            self.out.write(text)
            self.out.flush()
        except (OSError, ValueError):  # a closed terminal: no status, the turn goes on
            self.enabled = False



ALWAYS_WARN = ("hookline.builtins.privacy.files", "hookline.builtins.host.instructions",
               "hookline.builtins.host.sandbox", "hookline.builtins.host.protection",
               "hookline.builtins.host.hardlinks",
               "hookline.builtins.models.offline", "hookline.builtins.mcp.connection",
               "hookline.builtins.mcp.manager", "hookline.builtins.mcp.tools",
               "hookline.builtins.telemetry.setup", "hookline.builtins.agent.loop",
               AGENT_HOOK_LOG)
"""Loggers whose warnings are shown whatever ``level``: a file made private, an
``AGENTS.md`` kept from the model, a weakened sandbox, a repository commands made, the
offline model answering, an MCP server that failed or a tool of it not offered, tools past
what a request may offer,
telemetry a collector did not take, a plugin's agent hook failing (rare lines the user
must see)."""


def show_logs(level: int = logging.INFO, *, turn_failures: bool = True,
              verbose: bool = False) -> None:
    """hookline's log on stderr, one line per record from ``level`` up (and the warnings
    of ``ALWAYS_WARN``), unless the host configured logging already. Without it, Python's
    last-resort handler would print raw warnings and whole tracebacks next to the
    command's own one-line errors. ``verbose`` adds the traceback of a plugin's failure.

    ``turn_failures=False`` leaves out the pipeline's ``turn.failed`` record, for commands
    that print the failure themselves (one failure, one line)."""
    root = logging.getLogger()
    log = logging.getLogger("hookline")
    if root.handlers or log.handlers:
        return
    handler = _StderrHandler()
    handler.setFormatter(_OneLine(verbose))
    handler.setLevel(min(level, logging.WARNING))
    handler.addFilter(lambda record: record.levelno >= level or record.name in ALWAYS_WARN)
    if not turn_failures:
        handler.addFilter(lambda record: not str(record.msg).startswith("turn.failed"))
    log.addHandler(handler)
    # Other libraries' warnings (the MCP SDK's, httpx's) quote what a server sent: one
    # line each too, named, its control characters escaped, never Python's raw handler.
    others = _StderrHandler()
    others.setFormatter(_OneLine(verbose, named=True))
    others.setLevel(logging.WARNING)
    others.addFilter(lambda record: not _is_hooklines(record.name))
    root.addHandler(others)
    if log.level == logging.NOTSET:
        log.setLevel(level)
    for name in ALWAYS_WARN:
        if logging.getLogger(name).level == logging.NOTSET:
            logging.getLogger(name).setLevel(min(level, logging.WARNING))


class _StderrHandler(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is when a record comes, not as it was when the
    handler was made: the chat's line editor swaps it for a writer that prints above the
    prompt, and a line written past it would land inside the line being typed."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass  # always the current sys.stderr

    def emit(self, record: logging.LogRecord) -> None:
        status = StatusLine.drawn
        if status is not None:
            status.erase()
        super().emit(record)
        if status is not None:
            status.redraw()


def _is_hooklines(name: str) -> bool:
    return name == "hookline" or name.startswith("hookline.")


class _OneLine(logging.Formatter):
    """One line a record, credentials hidden and control characters escaped; `named`
    puts the logger's name first (another library's record)."""

    def __init__(self, verbose: bool = False, named: bool = False) -> None:
        super().__init__()
        self.verbose = verbose
        self.named = named

    def format(self, record: logging.LogRecord) -> str:
        failure = plugin_failure_line(record, verbose=self.verbose)
        if failure is not None:
            return terminal_text(redact_credentials(f"warning: {failure}"))
        text = record.getMessage()
        if self.named:
            text = f"{record.name}: {text}"
        if record.levelno >= logging.WARNING:
            text = f"{record.levelname.lower()}: {text}"
        error = record.exc_info[1] if record.exc_info else None
        if error is not None:  # one line; the command reports the failure itself
            text = f"{text} ({type(error).__name__}: {error})"
        text = redact_credentials(text)
        # Lines a record indents below its first (a server's stderr) stay lines.
        indented = all(line.startswith("    ") for line in text.split("\n")[1:])
        return terminal_text(text, keep_newlines=indented)
