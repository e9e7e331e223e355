"""Approvals over HTTP: a streamed request that sent `"approvals": true` receives each
question as an SSE event named `approval` and answers it with
`POST /v1/approvals/{id}` (the same token), `{"decision": "approve" | "approve_session" |
"deny", "message": "..."}`. A question not answered within `http_approval_timeout`
seconds is a denial, and so is one whose stream has ended. A request without
`approvals` has no asker: its questions are denials (docs/approvals.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import anyio

from ...approval.question import ANSWER_DECISIONS, Answer, Question
from .guard import HttpError
from .reply import Reply

__all__ = ["APPROVALS_PATH", "HttpApprovals", "HttpAsker"]

logger = logging.getLogger("hookline.builtins.channels.http.channel")

APPROVALS_PATH = "/v1/approvals/"
"""The answer endpoint's prefix: the question's id follows."""
MAX_MESSAGE = 2000
"""Characters of an answer's message passed on to the model."""


@dataclass
class _Waiting:
    reply: Reply
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: Answer | None = None


class HttpApprovals:
    """The questions of this channel waiting for an answer, by id."""

    def __init__(self) -> None:
        self._waiting: dict[str, _Waiting] = {}

    def asker(self, reply: Reply, timeout: float) -> HttpAsker:
        return HttpAsker(self, reply, timeout)

    def answer(self, question_id: str, body: Any) -> dict[str, Any]:
        """Answer a waiting question (404 when none has this id, 400 for a bad body)."""
        waiting = self._waiting.get(question_id)
        if waiting is None or waiting.done.is_set():
            raise HttpError(404, f"no question {question_id!r} is waiting (answered, timed "
                                 f"out, or never asked)")
        if not isinstance(body, dict) or body.get("decision") not in ANSWER_DECISIONS:
            raise HttpError(400, f"the body must be a JSON object whose decision is one of "
                                 f"{', '.join(ANSWER_DECISIONS)}")
        message = body.get("message", "")
        if not isinstance(message, str):
            raise HttpError(400, "message must be a string")
        waiting.answer = Answer(body["decision"], message[:MAX_MESSAGE], by="http")
        waiting.done.set()
        return {"id": question_id, "decision": body["decision"]}

    async def ask(self, reply: Reply, question: Question, timeout: float) -> Answer:
        waiting = self._waiting[question.id] = _Waiting(reply)
        try:
            reply.emit("approval", {**question.as_dict(), "timeout": timeout})
            with anyio.move_on_after(timeout):
                while not waiting.done.is_set():
                    if reply.finished.is_set() or reply.events is None:  # the client left
                        return Answer("deny", "nobody answered: the request's stream ended",
                                      by="nobody")
                    with anyio.move_on_after(1.0):
                        await waiting.done.wait()
        finally:
            self._waiting.pop(question.id, None)
        if waiting.answer is None:
            logger.warning("http.approval_timeout session=%s seconds=%g", reply.session_id,
                           timeout)
            return Answer("deny", f"nobody answered within {timeout:g} s", by="nobody")
        return waiting.answer


@dataclass(frozen=True)
class HttpAsker:
    """The `Asker` of one streamed request."""

    approvals: HttpApprovals
    reply: Reply
    timeout: float

    async def ask(self, question: Question) -> Answer:
        return await self.approvals.ask(self.reply, question, self.timeout)
