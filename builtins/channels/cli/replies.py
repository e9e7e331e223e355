"""How the `cli` channel shows a turn: its model stream as it comes (the reply's text, a
line per tool call and result, retry and compaction notes, the transient indicator) and
its outbounds, unless their text already streamed. With the line editor and `markdown`,
each step's text is rendered once the step ends (`markdown_reply.py`)."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING

from hookline.kernel.envelope import get_field
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent

from ...terminal.tool_notes import retry_status, terminal_text, turn_note
from ...terminal.tool_view import ToolView, colour_allowed
from .options import ChatOptions
from .screen import DIM, Screen

if TYPE_CHECKING:
    from .markdown_reply import MarkdownReply

__all__ = ["ReplyView"]

logger = logging.getLogger("hookline.builtins.channels.cli.channel")


class ReplyView:
    """The model streams being shown on one `CliChannel`'s screen, and what they showed."""

    def __init__(self, screen: Screen, options: ChatOptions) -> None:
        self.screen = screen
        self.options = options
        self.markdown: MarkdownReply | None = None
        """The step's text kept for rendering (with the line editor and `markdown`)."""
        self._tools: ToolView | None = None
        self.streams: dict[object, str] = {}
        """The model streams being shown: a token per stream, with its session id."""
        self.streamed: dict[str, str] = {}
        """The text each session's running turn streamed so far."""
        self.began: set[str] = set()
        """Sessions whose running turn's model has begun: a steer joins it after its prompt."""

    @property
    def busy(self) -> bool:
        """A model stream is being shown (the prompt waits until it ends)."""
        return bool(self.streams)

    async def show(self, message: object, stream: AsyncStreamEvents
                   ) -> AsyncIterator[StreamEvent]:
        """`stream`, shown as it passes through."""
        session_id = str(get_field(message, "session_id") or "")
        token = object()
        self.streams[token] = session_id
        self.streamed[session_id] = ""
        self.screen.begin_output()
        self.screen.show_indicator("thinking")
        try:
            async for event in stream:
                self.began.add(session_id)
                await self._show_event(session_id, event)
                observe = self.options.observe
                if observe is not None:
                    try:
                        observe(session_id, event)
                    except Exception as exc:  # an observer never breaks the turn
                        logger.warning("cli.observe_failed error=%s: %s",
                                       type(exc).__name__, exc)
                yield event
        finally:
            # A cancelled turn was already let go by `cancelled`; it may end after the
            # next turn started, whose output it must not touch.
            if self.streams.pop(token, None) is not None:
                self.began.discard(session_id)
                self.screen.clear_indicator()
                self.finish_step()

    async def _show_event(self, session_id: str, event: StreamEvent) -> None:
        screen = self.screen
        if event.kind == "text":
            delta = terminal_text(str(event.data.get("delta", "")))
            if delta:
                screen.begin_output()
                if self.markdown is not None:
                    self.markdown.add(delta)
                else:
                    screen.write(delta)
                self.streamed[session_id] = self.streamed.get(session_id, "") + delta
        elif event.kind == "tool_call":
            calls = list(event.data.get("tool_calls") or [])
            self.finish_step()
            screen.show_lines(await self._tool_view().calls(calls))
            names = ", ".join(str(call.get("name")) for call in calls)
            screen.show_indicator(f"running {names}" if names else "thinking")
        elif event.kind in ("retry", "compaction") and (note := turn_note(event.kind,
                                                                          event.data)):
            self.finish_step()
            screen.show_lines([screen.style(note, DIM)])
            if event.kind == "retry":  # the status line's clock counts the wait
                screen.show_indicator(retry_status(event.data))
        elif event.kind == "tool_result":
            records = list(event.data.get("tool_results") or [])
            colour = screen.is_interactive() and colour_allowed()
            screen.show_lines(await self._tool_view().results(records, colour))
            screen.show_indicator("thinking")

    def finish_step(self) -> None:
        """The model's step ended: its streamed text, rendered (`markdown_reply.py`)."""
        if self.markdown is not None and self.markdown.text:
            self.screen.write(self.markdown.take())

    def _tool_view(self) -> ToolView:
        if self._tools is None:
            self._tools = ToolView(str(self.options.workspace or os.getcwd()))
        return self._tools

    def show_reply(self, content: str, streamed: str | None) -> None:
        """An outbound's text (escaped), unless it is what streamed; its line ended."""
        screen = self.screen
        screen.begin_output()
        if streamed is None or streamed.strip() != content.strip():
            screen.end_line()
            if content and self.markdown is not None:
                self.markdown.take()  # what streamed is not the reply: the reply is shown
                screen.write(self.markdown.take(content))
            elif content:
                screen.write(content)
        screen.end_line()  # a reply ends its line: the next output starts below

    def cancelled(self, session_ids: Iterable[str]) -> None:
        """These sessions' turns were cancelled: their streams are let go, and what
        streamed before the cancel is shown once, never carried on."""
        cancelled = set(session_ids)
        for session_id in cancelled:
            self.streamed.pop(session_id, None)
            self.began.discard(session_id)
        for token, session_id in list(self.streams.items()):
            if session_id in cancelled:
                del self.streams[token]
        if self.screen.editor is not None:
            self.screen.editor.set_status(None)
        self.finish_step()
