"""The chat's approval questions: a tool call waiting for the user is shown inline (the
exact command, or the diff of the edit), the prompt becomes the question's, and the next
line typed that is an answer (`y`, `n`, `n <message>`, `a`, `e`) answers it.

Lines typed before the question appeared were handled before it existed, so none of them
can answer it; a line typed while it waits that is not an answer is a chat line like any
other (queued behind the running turn), and the user is told the question still waits.
Nothing streams meanwhile: the turn is held inside the tool call being asked about.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from ...approval.question import Answer, Question, parse_answer
from ...terminal.tool_view import colour_allowed

if TYPE_CHECKING:
    from .screen import Screen

__all__ = ["ChatAsker"]

EDIT_PROMPT = "command> "

_LEFT = Answer("deny", "the user left the chat without answering", by="nobody")
"""The answer to a question of a chat that is leaving (`/quit`, Ctrl-D)."""


@dataclass
class _Pending:
    question: Question
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: Answer | None = None
    editing: bool = False


class ChatAsker:
    """The `Asker` of one chat channel (one question at a time: a turn asks about its
    calls one after another, and the chat runs one turn at a time). It drives the
    channel's terminal (its lines, prompt and indicator) as a part of the channel."""

    def __init__(self, screen: Screen) -> None:
        self.screen = screen
        """The screen of the `CliChannel` that owns it."""
        self._pending: _Pending | None = None
        self._abandoned = False
        """The chat is leaving: every question now, and later in the turn, is a denial."""

    @property
    def waiting(self) -> bool:
        return self._pending is not None

    async def ask(self, question: Question) -> Answer:
        if self._abandoned:  # the turn that held this asker goes on asking: nobody answers
            return _LEFT
        screen = self.screen
        pending = self._pending = _Pending(question)
        prompt = screen.editor.prompt if screen.editor is not None else None
        colour = screen.is_interactive() and colour_allowed()
        lines = [*question.lines(colour), f"  answer: {question.answer_keys}"]
        if screen.editor is not None:  # the question is the prompt: drawn with it, kept
            await screen.editor.settle()
            self._set_prompt("\n".join(lines) + "\n" + question.prompt)
        else:
            screen.show_lines(lines)
            self._set_prompt(question.prompt)
        try:
            await pending.done.wait()
        finally:
            self._pending = None
            if prompt is not None:
                self._set_prompt(prompt)
        screen.show_indicator("running")  # answered: the turn goes on (not when cancelled)
        assert pending.answer is not None
        return pending.answer

    def take(self, line: str, chat_command: bool = False) -> bool:
        """Whether `line` answered the waiting question (False: it is a chat line, or with
        `chat_command` one of the chat's commands)."""
        pending = self._pending
        if pending is None:
            return False
        if pending.editing:
            if not line.strip():
                return True  # an empty command: still editing
            self._answer(pending, Answer("approve", command=line))
            return True
        answer = parse_answer(line)
        if answer is None:
            sent = "" if chat_command else "sent as a message, after this turn; "
            self.screen.say(f"({sent}the question still waits: "
                            f"{pending.question.answer_keys})")
            return False
        if answer == "edit":
            command = pending.question.arguments.get("command")
            if not pending.question.edits or not isinstance(command, str):
                self.screen.say("(only a shell command can be edited: y, n or a)")
                return True
            pending.editing = True
            self._set_prompt(EDIT_PROMPT, command)
            return True
        self._answer(pending, answer)
        return True

    def abandon(self) -> None:
        """The chat is leaving (`/quit`, Ctrl-D): nobody will answer the waiting question,
        which is a denial, as anywhere nobody can answer."""
        self._abandoned = True
        pending = self._pending
        if pending is not None:
            self._answer(pending, _LEFT)

    def _set_prompt(self, prompt: str, text: str | None = None) -> None:
        """The line editor's prompt (and the line to edit); on a plain terminal, the
        question's prompt written once."""
        screen = self.screen
        screen.clear_indicator()
        if screen.editor is not None:
            screen.editor.set_prompt(prompt, text)
        else:
            screen.write(prompt)
            screen.prompt_shown = True

    @staticmethod
    def _answer(pending: _Pending, answer: Any) -> None:
        pending.answer = answer
        pending.done.set()
