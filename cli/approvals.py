"""`hookline run` asks on its terminal: the question on stderr, the answer read from stdin
(docs/approvals.md). Without a terminal on both, `run` has no asker and the approval
policy decides alone (a question becomes a denial)."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

if TYPE_CHECKING:
    from hookline.builtins.approval import Answer, Question

__all__ = ["DENIED_EXIT", "ApprovalOption", "TerminalAsker", "terminal_asker"]

def _use_policy(value: str | None) -> str | None:
    """`--approval` is the `approval` setting for this command: it goes where every
    setting's override goes, the environment, before the settings are read."""
    if value is not None:
        from hookline.builtins.config import APPROVAL_POLICIES, setting_env

        if value not in APPROVAL_POLICIES:
            raise typer.BadParameter(f"must be one of {', '.join(APPROVAL_POLICIES)}")
        os.environ[setting_env("approval")] = value
    return value


ApprovalOption = Annotated[
    str | None,
    typer.Option("--approval", metavar="POLICY", callback=_use_policy, show_default=False,
                 help="When tool calls wait for a person: ask, on-request (the default), "
                      "never or auto (setting approval; docs/approvals.md)."),
]

DENIED_EXIT = 3
"""`run`'s exit status when the turn ended with tool calls denied (by a rule, the policy or
the user): the reply is printed, but the work it asked for was not all done."""


def terminal_asker(status: Any, stdin: TextIO | None = None,
                   stderr: TextIO | None = None) -> TerminalAsker | None:
    """An asker when stdin and stderr are both a terminal, else None."""
    stdin = stdin or sys.stdin
    stderr = stderr or sys.stderr
    if not (_isatty(stdin) and _isatty(stderr)):
        return None
    return TerminalAsker(status, stdin, stderr)


class TerminalAsker:
    """Asks on the terminal of `run`; `status` is the status line, erased while asking."""

    def __init__(self, status: Any, stdin: TextIO, stderr: TextIO) -> None:
        self.status = status
        self.stdin = stdin
        self.stderr = stderr

    async def ask(self, question: Question) -> Answer:
        from hookline.builtins.approval import Answer, parse_answer
        from hookline.builtins.terminal import wants_colour

        enabled, self.status.enabled = self.status.enabled, False  # no redraw meanwhile
        try:
            self.status.clear()
            lines = question.lines(wants_colour(self.stderr))
            for line in lines:
                typer.echo(line, err=True, file=self.stderr)
            _discard_typed_ahead(self.stdin)
            while True:
                typer.echo(f"answer ({question.answer_keys}): ", err=True, file=self.stderr,
                           nl=False)
                line = await _typed_line(self.stdin)
                if not line:  # end of input: nobody is there to approve
                    return Answer("deny", "nobody answered (the input ended)", by="nobody")
                answer = parse_answer(line)
                if answer == "edit":
                    if not question.edits:
                        typer.echo("only a shell command can be edited", err=True,
                                   file=self.stderr)
                        continue
                    typer.echo("the command to run instead (Enter alone: back to the "
                               "question): ", err=True, file=self.stderr, nl=False)
                    edited = await _typed_line(self.stdin)
                    if edited.strip():
                        return Answer("approve", command=edited.rstrip("\n"))
                    continue
                if answer is not None:
                    return answer
        finally:
            self.status.enabled = enabled


def _discard_typed_ahead(stdin: TextIO) -> None:
    """Drop what was typed before the question appeared: only a line typed after it may
    answer it (a `y` typed early, for something else, must not approve this)."""
    import termios

    with contextlib.suppress(OSError, ValueError, termios.error):
        termios.tcflush(stdin.fileno(), termios.TCIFLUSH)


async def _typed_line(stdin: TextIO) -> str:
    """The next line typed on the terminal ("" at its end), waited for on the event loop: a
    thread blocked reading it would keep the process alive, after Ctrl-C or SIGTERM had
    cancelled the turn, until the next Enter (which it would swallow)."""
    import anyio

    fd, data = stdin.fileno(), b""
    while not data.endswith(b"\n"):
        await anyio.wait_readable(fd)
        chunk = os.read(fd, 4096)  # a terminal gives a line at a time
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace")


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
