"""Stream events and the closable event stream.

The model stage may produce a stream instead of text. The types here are what such a
stream carries and how it is closed, so that channels, the pipeline and the agent loop all
agree on when resources behind a stream are released.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from .errors import HooklineError

__all__ = [
    "AsyncStreamEvents",
    "StreamEvent",
    "StreamState",
    "TextAnswerStream",
]


@dataclass(frozen=True)
class StreamEvent:
    """One event of a model stream (`text`, `tool_call`, `usage`, `error`, `final`, ...)."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class StreamState:
    """What the producer of a stream learned while streaming (error, token usage)."""

    error: HooklineError | None = None
    usage: dict[str, Any] | None = None


class AsyncStreamEvents:
    """An async iterator of StreamEvent that always releases its source exactly once.

    The stream closes itself when the source ends or fails (with any exception,
    cancellation included), or when `aclose()` is called, whichever comes first.
    Closing calls the source's `aclose` (if it has one) and then `on_close`.
    """

    def __init__(
        self,
        source: AsyncIterable[StreamEvent],
        state: StreamState | None = None,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._source: AsyncIterator[StreamEvent] = aiter(source)
        self.state: StreamState = state if state is not None else StreamState()
        self._on_close = on_close
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once closing has started; iteration then ends immediately."""
        return self._closed

    @property
    def error(self) -> HooklineError | None:
        return self.state.error

    @property
    def usage(self) -> dict[str, Any] | None:
        return self.state.usage

    def __aiter__(self) -> AsyncStreamEvents:
        return self

    async def __anext__(self) -> StreamEvent:
        if self._closed:
            raise StopAsyncIteration
        try:
            return await anext(self._source)
        except BaseException:
            # Exhausted (StopAsyncIteration), failed or cancelled: release resources now,
            # then let the original outcome propagate.
            await self.aclose()
            raise

    async def aclose(self) -> None:
        """Close the source and run `on_close`; later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            source_close = getattr(self._source, "aclose", None)
            if source_close is not None:
                result = source_close()
                if inspect.isawaitable(result):
                    await result
        finally:
            if self._on_close is not None:
                result = self._on_close()
                if inspect.isawaitable(result):
                    await result

    async def __aenter__(self) -> AsyncStreamEvents:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class TextAnswerStream(AsyncStreamEvents):
    """A ``run_model`` answer offered as a stream: one ``text`` event with the whole text.

    The answer is awaited when the stream is first iterated, so a host that never reads
    the stream never runs the model. ``answered`` says whether a text arrived (a None
    answer gives an empty stream).
    """

    def __init__(self, answer: Callable[[], Awaitable[str | None]]) -> None:
        self.answered = False
        super().__init__(self._events(answer))

    async def _events(
        self, answer: Callable[[], Awaitable[str | None]]
    ) -> AsyncIterator[StreamEvent]:
        text = await answer()
        if text is not None:
            self.answered = True
            yield StreamEvent("text", {"delta": text})
