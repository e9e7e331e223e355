"""What an approval asks and what comes back: the `Question` a person sees, the `Answer`
they give, and the `Asker` that carries one to the other (the chat, `hookline run` on a
terminal, a streamed gateway request, or any plugin's own).

A turn's asker is the state's `APPROVAL_ASKER` value: the builtin `load_state` puts there
the one of the channel the message came from, when that channel can ask; any plugin may
put its own there (in `load_state` or an earlier `before_tool_call`) to ask in its own way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from hookline.kernel.turn import RUNTIME_PREFIX

from ..host.tools import UNSANDBOXED
from ..terminal import render_diff, terminal_text

__all__ = [
    "ANSWER_DECISIONS",
    "ANSWER_KEYS",
    "APPROVAL_ASKER",
    "APPROVAL_POLICY",
    "APPROVAL_RECORD",
    "Answer",
    "Asker",
    "Question",
    "parse_answer",
]

APPROVAL_ASKER = RUNTIME_PREFIX + "approval_asker"
"""State key of the turn's `Asker` (absent: nobody can answer, so a question is a denial)."""
APPROVAL_RECORD = RUNTIME_PREFIX + "approval"
"""State key of the last tool call's decision record (for the tool's telemetry span)."""
APPROVAL_POLICY = "approval_policy"
"""State key of the turn's own policy, over the `approval` setting: a plugin's `load_state`
sets it (docs/approvals.md); no request or channel does."""

AnswerDecision: TypeAlias = Literal["approve", "approve_session", "deny"]
ANSWER_DECISIONS: tuple[AnswerDecision, ...] = ("approve", "approve_session", "deny")


@dataclass(frozen=True)
class Question:
    """One tool call waiting for a person: `summary` is the exact command or the file and
    what happens to it, `diff` the change an edit or write would make (unified, may be
    empty), `reason` why hookline asks (the rule, the policy, or what the sandbox refuses
    for an escalation), `justification` the model's own words for an escalation."""

    id: str
    session_id: str
    tool: str
    arguments: dict[str, Any]
    summary: str
    reason: str
    justification: str = ""
    escalate: str | None = None
    diff: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        """The question as JSON data (the gateway's `approval` event)."""
        data: dict[str, Any] = {"id": self.id, "tool": self.tool, "arguments": self.arguments,
                                "summary": self.summary, "justification": self.justification,
                                "reason": self.reason, "approve_session": self.always_allowed}
        if self.escalate:
            data["escalate"] = self.escalate
        if self.diff:
            data["diff"] = "\n".join(self.diff)
        return data

    @property
    def always_allowed(self) -> bool:
        """Whether "always this session" may be answered: not for a command that leaves
        the sandbox, since what it runs (a script, a Makefile, a package's install
        scripts) may be changed by sandboxed commands after it, then run again unasked."""
        return self.escalate != UNSANDBOXED

    @property
    def answer_keys(self) -> str:
        """The answers this question takes, said in words (`e` for a command only: only
        a command can be edited)."""
        keys = ANSWER_KEYS if self.always_allowed else ONCE_KEYS
        return keys if self.edits else keys.removesuffix(EDIT_KEY)

    @property
    def edits(self) -> bool:
        """Whether the answer may be an edited command (the shell tool's question)."""
        return self.tool.replace(".", "_") == "shell"

    @property
    def prompt(self) -> str:
        """What a terminal prompts with while this question waits."""
        keys = "y/n/a" if self.always_allowed else "y/n"
        return f"approve? [{keys}{'/e' if self.edits else ''}] "

    def lines(self, colour: bool = False) -> list[str]:
        """The question for a terminal, with its diff (coloured with `colour`). What the
        model wrote (the command, its words, the reason that quotes them) has its control
        characters shown escaped, and its lines after the first marked `|`, and the diff
        is indented: no escape sequence may erase the command, and no line of the model's
        or of the file pass for one of these."""
        lines = _marked(f"approve {self.tool}? ", self.summary)
        if self.escalate:
            lines += _marked("  escalation: ", self.escalate)
        if self.arguments.get("background") is True:
            lines.append("  in the background: it keeps running after this call, until "
                         "shell.stop or the session's end")
        if self.justification:
            lines += _marked("  the model says: ", self.justification)
        lines += _marked("  why asked: ", self.reason)
        diff = _diff_in_view(self.diff)
        return lines + [f"    {line}" for line in render_diff(diff, colour, limit=len(diff))]


def _marked(head: str, text: str) -> list[str]:
    first, *more = _in_view(terminal_text(text, strict=True)).split("\n")
    return [head + first, *(f"    | {line}" for line in more)]


MAX_SHOWN = 4000
"""Characters of one part of a question shown whole; a longer one shows its start and
end, and says how much lies between."""

_BLANKS = re.compile(r"(?:[ \t]{40,}|\n(?:[ \t]*\n){3,})+")
"""Blanks no command needs: 40 in a row (past any indentation), or three empty lines."""


MAX_LINES = 20
"""Lines of one part of a question shown whole; more show the first and last ones."""

_HIDDEN = re.compile("[\t\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0]")
"""Characters that take room but show nothing a reader can count (a tab, Hangul and
braille fillers), shown by their code instead."""


def _in_view(text: str) -> str:
    """`text` kept in view: a run of blanks or of empty lines (which would push the rest
    of a command off the screen, or past its edge) is said by its length, characters that
    show nothing by their code, and a very long text, or one of many lines, shows its
    start and end with what was left out counted."""
    text = _BLANKS.sub(lambda run: f" [{len(run.group()):,} blank characters] ", text)
    text = _HIDDEN.sub(lambda char: "\\t" if char.group() == "\t"
                       else f"\\u{ord(char.group()):04x}", text)
    if len(text) > MAX_SHOWN:
        head, tail = MAX_SHOWN * 2 // 3, MAX_SHOWN // 3
        text = (f"{text[:head]} [... {len(text) - head - tail:,} characters not shown ...] "
                f"{text[-tail:]}")
    lines = text.split("\n")
    if len(lines) > MAX_LINES:
        head, tail = MAX_LINES * 2 // 3, MAX_LINES // 3
        lines = [*lines[:head], f"[... {len(lines) - head - tail:,} lines not shown ...]",
                 *lines[-tail:]]
    return "\n".join(lines)


MAX_DIFF_LINES = 200
"""Lines of a diff a question shows whole; a longer one shows its first and last lines,
and says how many lie between."""


def _diff_in_view(diff: tuple[str, ...]) -> list[str]:
    """A question's diff kept in view as a command is (`_in_view`), line by line, tabs as
    spaces first (a file's indentation): its end is shown too, never only its start."""
    lines = [_in_view(terminal_text(line.expandtabs(4), strict=True)) for line in diff]
    if len(lines) <= MAX_DIFF_LINES:
        return lines
    head, tail = MAX_DIFF_LINES * 2 // 3, MAX_DIFF_LINES // 3
    return [*lines[:head], f"[... {len(lines) - head - tail:,} lines not shown: deny a change "
                           f"you cannot read whole ...]", *lines[-tail:]]


@dataclass(frozen=True)
class Answer:
    """A person's decision; `message` reaches the model with a denial, `command` (shell
    only) is the command to run instead of the one asked, `by` who answered."""

    decision: AnswerDecision
    message: str = ""
    command: str | None = None
    by: str = "user"


@runtime_checkable
class Asker(Protocol):
    """Asks a person and returns their answer; may take as long as the person does (an
    asker that gives up answers `deny`, saying so in the message)."""

    async def ask(self, question: Question) -> Answer: ...


_KEYS: dict[str, AnswerDecision] = {
    "y": "approve", "yes": "approve", "a": "approve_session", "always": "approve_session",
    "n": "deny", "no": "deny",
}
EDIT_KEY = ", e = edit the command"
ANSWER_KEYS = ("y = yes, n = no (n <message> tells the model why), a = always this session"
               + EDIT_KEY)
ONCE_KEYS = ("y = yes (this once: a command that leaves the sandbox is asked each time), "
             "n = no (n <message> tells the model why)" + EDIT_KEY)


def parse_answer(line: str) -> Answer | Literal["edit"] | None:
    """A typed answer: `y`, `n`, `n <message>`, `a`, or `e` (edit the command first); None
    for any other line, which is not an answer."""
    text = line.strip()
    head, _space, rest = text.partition(" ")
    if head.lower() in ("e", "edit") and not rest:
        return "edit"
    decision = _KEYS.get(head.lower())
    if decision is None or (rest and decision != "deny"):
        return None
    return Answer(decision, rest.strip())
