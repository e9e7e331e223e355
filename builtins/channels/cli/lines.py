"""Which lines typed into `hookline chat` were answered, so that none is lost silently.

The `cli` channel records each line it hands to the channel manager (a private context key,
`_cli_line`, names it; keys starting with `_` stay out of the prompt) and follows what the
manager reports. A line is answered once the turn that ran it sent an outbound message (a
reply or an error), or, for a line steered into a running turn, once that turn did (a
steered line the turn did not take is reported again: it gets a turn of its own, or is
dropped when the session ends). A line is settled otherwise when the user was told about
it already: its turn was cancelled with Ctrl-C, or it was dropped while the session went on.
What is neither when the session ends (a turn cancelled by SIGTERM or by the end of the
drain, a line still queued or steered, one the stopping manager did not take) is
`unanswered`: the channel prints one line for each.

`waiting` says whether a line still expects its answer, so that leaving the chat (end of
input, `/quit`) can wait for the answers to the lines already sent. A line whose turn ended
without sending anything no longer waits (it is reported `unanswered` when the session ends).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import anyio

from hookline.kernel.envelope import get_field

from ...terminal.tool_notes import terminal_text

__all__ = ["LINE_KEY", "ChatLines", "Line", "LineLedger", "clipped"]

LINE_KEY = "_cli_line"
"""Context key of a cli envelope holding the number of the line it carries."""

_OPEN = frozenset({"sent", "queued", "running", "steered"})
_WAITING = frozenset({"sent", "queued", "running"})


@dataclass(eq=False)
class Line:
    """One line typed and handed over, and what became of it."""

    number: int
    text: str
    session_id: str = ""
    state: str = "sent"
    """`sent`, `queued`, `running`, `steered`, `dropped`, `unreplied` (its turn ended
    without an outbound); settled: `answered`, `told`."""
    steer: bool = False
    """The user asked for it to join the running turn."""
    echoed: bool = False
    """Shown after the prompt already (piped input is echoed when its turn starts)."""


class LineLedger:
    """The lines of one chat session (see the module docstring)."""

    def __init__(self) -> None:
        self._lines: dict[int, Line] = {}
        self._tasks: dict[int, Line] = {}

    def record(self, message: dict[str, Any], text: str, *, steer: bool = False,
               echoed: bool = False) -> Line:
        """Number a line about to be handed over and mark its envelope with it."""
        line = Line(len(self._lines) + 1, text, str(message.get("session_id") or ""),
                    steer=steer, echoed=echoed)
        self._lines[line.number] = line
        message["context"] = {**(message.get("context") or {}), LINE_KEY: line.number}
        return line

    def line_of(self, message: Any) -> Line | None:
        context = get_field(message, "context")
        number = context.get(LINE_KEY) if isinstance(context, dict) else None
        return self._lines.get(number) if isinstance(number, int) else None

    def admitted(self, message: Any, outcome: str) -> Line | None:
        """Record an admission outcome; returns the line when it was dropped."""
        line = self.line_of(message)
        if line is None or line.state not in _OPEN:
            return None
        line.session_id = str(get_field(message, "session_id") or line.session_id)
        line.state = {"process": "running", "queued": "queued", "steer": "steered"}.get(
            outcome, "dropped")
        return line if line.state == "dropped" else None

    def started(self, message: Any) -> Line | None:
        """Its turn starts, in the task that will send the turn's outbounds."""
        line = self.line_of(message)
        if line is not None and line.state in _OPEN | {"answered"}:
            line.state = "running"
            self._tasks[anyio.get_current_task().id] = line
        return line

    def replied(self) -> None:
        """An outbound was sent by the current task: its turn's line (and the lines
        steered into that turn) are answered."""
        line = self._tasks.get(anyio.get_current_task().id)
        if line is None or line.state != "running":
            return
        line.state = "answered"
        for other in self._lines.values():
            if other.state == "steered" and other.session_id == line.session_id:
                other.state = "answered"

    def finished(self, message: Any) -> None:
        ended = self.line_of(message)
        for task, line in list(self._tasks.items()):
            if line is ended:
                del self._tasks[task]
        if ended is not None and ended.state == "running":
            ended.state = "unreplied"

    def waiting(self, turns_running: bool) -> bool:
        """Whether a line still expects its answer: one handed over, queued or running,
        or one steered into a turn that still runs (module docstring)."""
        return any(line.state in _WAITING or (line.state == "steered" and turns_running)
                   for line in self._lines.values())

    def told(self, line: Line) -> None:
        """The user was told about this line: it is settled."""
        line.state = "told"

    def cancelled(self, session_ids: Iterable[str]) -> list[Line]:
        """The running turns of these sessions were cancelled on the user's request. The
        lines steered into them that no other report will name (their turn had taken
        them in already), for the caller to name."""
        sessions = set(session_ids)
        steered = []
        for line in self._lines.values():
            if line.session_id not in sessions:
                continue
            if line.state == "running":
                line.state = "told"
            elif line.state == "steered":
                steered.append(line)
        return steered

    def unanswered(self) -> list[Line]:
        """The lines neither answered nor told about, oldest first; they become told."""
        lines = [line for line in self._lines.values() if line.state not in ("answered", "told")]
        for line in lines:
            line.state = "told"
        return lines

    def taken(self, line: Line) -> bool:
        """Whether the manager reported anything about the line (else it was not taken)."""
        return line.state != "sent"


class ChatLines:
    """What one `CliChannel` knows of the lines it handed over: their ledger (new for each
    session the channel runs), the turns running, whether a manager reports on them, and
    the lines it reported unanswered when it stopped."""

    def __init__(self) -> None:
        self.ledger = LineLedger()
        self.turns = 0
        """Turns of this channel's lines running now."""
        self.managed = False
        """A channel manager reports what becomes of each line."""
        self.unanswered: list[str] = []

    def restart(self) -> None:
        """A new session: no line handed over yet, none reported."""
        self.ledger, self.unanswered = LineLedger(), []

    def waiting(self) -> bool:
        """Whether a line handed over still expects its answer (`LineLedger.waiting`)."""
        return self.ledger.waiting(self.turns > 0)


def clipped(text: str, limit: int = 120) -> str:
    """A typed line on one line of the terminal, control characters escaped."""
    text = terminal_text(" ".join(text.split()), keep_newlines=False)
    return text if len(text) <= limit else text[:limit - 3] + "..."
