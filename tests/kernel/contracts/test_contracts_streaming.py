"""AsyncStreamEvents closing semantics, StreamEvent/StreamState and HooklineError."""

from __future__ import annotations

import pickle
from collections.abc import AsyncIterator

import anyio
import pytest

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent, StreamState


class Source:
    """An async iterator that records its aclose calls into a shared log."""

    def __init__(
        self, events: list[StreamEvent], log: list[str], fail: BaseException | None = None
    ):
        self._events = list(events)
        self._log = log
        self._fail = fail

    def __aiter__(self) -> Source:
        return self

    async def __anext__(self) -> StreamEvent:
        if self._events:
            return self._events.pop(0)
        if self._fail is not None:
            raise self._fail
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._log.append("source.aclose")


def make_stream(
    count: int = 2, fail: BaseException | None = None
) -> tuple[AsyncStreamEvents, list[str]]:
    log: list[str] = []
    events = [StreamEvent("text", {"delta": str(i)}) for i in range(count)]

    async def on_close() -> None:
        log.append("on_close")

    return AsyncStreamEvents(Source(events, log, fail), on_close=on_close), log


class Boom(BaseException):
    pass


@pytest.mark.anyio
async def test_exhaustion_closes_source_then_on_close_once() -> None:
    stream, log = make_stream(2)
    deltas = [event.data["delta"] async for event in stream]
    assert deltas == ["0", "1"]
    assert log == ["source.aclose", "on_close"]
    assert stream.closed
    await stream.aclose()
    await stream.aclose()
    assert log == ["source.aclose", "on_close"]


@pytest.mark.anyio
async def test_aclose_before_first_iteration() -> None:
    stream, log = make_stream(3)
    await stream.aclose()
    assert log == ["source.aclose", "on_close"]
    assert [event async for event in stream] == []
    await stream.aclose()
    assert log == ["source.aclose", "on_close"]


@pytest.mark.anyio
async def test_early_close_stops_iteration_and_finalises_generator() -> None:
    finalised: list[bool] = []

    async def generate() -> AsyncIterator[StreamEvent]:
        try:
            for i in range(10):
                yield StreamEvent("text", {"delta": str(i)})
        finally:
            finalised.append(True)

    closes: list[str] = []

    async def on_close() -> None:
        closes.append("closed")

    stream = AsyncStreamEvents(generate(), on_close=on_close)
    first = await anext(stream)
    assert first.data == {"delta": "0"}
    await stream.aclose()
    assert finalised == [True]
    assert closes == ["closed"]
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


@pytest.mark.anyio
async def test_exception_in_source_closes_and_propagates() -> None:
    stream, log = make_stream(1, fail=RuntimeError("provider down"))
    seen: list[StreamEvent] = []
    with pytest.raises(RuntimeError, match="provider down"):
        async for event in stream:
            seen.append(event)
    assert len(seen) == 1
    assert log == ["source.aclose", "on_close"]
    assert [event async for event in stream] == []


@pytest.mark.anyio
async def test_base_exception_in_source_closes() -> None:
    stream, log = make_stream(0, fail=Boom())
    with pytest.raises(Boom):
        await anext(stream)
    assert log == ["source.aclose", "on_close"]


@pytest.mark.anyio
async def test_cancellation_closes_stream() -> None:
    closes: list[str] = []

    async def never_ends() -> AsyncIterator[StreamEvent]:
        yield StreamEvent("text", {"delta": "a"})
        await anyio.sleep_forever()
        yield StreamEvent("text", {"delta": "unreachable"})

    async def on_close() -> None:
        closes.append("closed")

    stream = AsyncStreamEvents(never_ends(), on_close=on_close)
    received: list[StreamEvent] = []
    with anyio.move_on_after(0.05):
        async for event in stream:
            received.append(event)
    assert [event.data["delta"] for event in received] == ["a"]
    assert stream.closed
    assert closes == ["closed"]


@pytest.mark.anyio
async def test_source_without_aclose_and_on_close_still_runs() -> None:
    class Plain:
        def __init__(self) -> None:
            self.items = [StreamEvent("final", {"ok": True, "text": "hi"})]

        def __aiter__(self) -> Plain:
            return self

        async def __anext__(self) -> StreamEvent:
            if not self.items:
                raise StopAsyncIteration
            return self.items.pop()

    closes: list[str] = []

    async def on_close() -> None:
        closes.append("closed")

    stream = AsyncStreamEvents(Plain(), on_close=on_close)
    assert [event.kind async for event in stream] == ["final"]
    assert closes == ["closed"]


@pytest.mark.anyio
async def test_on_close_runs_even_if_source_aclose_fails() -> None:
    class Failing(Source):
        async def aclose(self) -> None:
            raise RuntimeError("cannot close")

    closes: list[str] = []

    async def on_close() -> None:
        closes.append("closed")

    stream = AsyncStreamEvents(Failing([], []), on_close=on_close)
    with pytest.raises(RuntimeError, match="cannot close"):
        await stream.aclose()
    assert closes == ["closed"]
    await stream.aclose()
    assert closes == ["closed"]


@pytest.mark.anyio
async def test_async_with_closes_on_exit() -> None:
    stream, log = make_stream(5)
    async with stream as entered:
        assert entered is stream
        await anext(stream)
    assert log == ["source.aclose", "on_close"]
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


@pytest.mark.anyio
async def test_state_properties_and_fresh_default_state() -> None:
    state = StreamState()
    stream, _ = make_stream(0)
    other, _ = make_stream(0)
    assert stream.state is not other.state
    assert stream.error is None and stream.usage is None

    shared = AsyncStreamEvents(Source([], []), state)
    error = HooklineError(ErrorKind.provider, "rate limited")
    state.error = error
    state.usage = {"total_tokens": 12}
    assert shared.error is error
    assert shared.usage == {"total_tokens": 12}
    await stream.aclose()
    await other.aclose()
    await shared.aclose()


def test_stream_event_is_frozen() -> None:
    event = StreamEvent("usage", {"usage": None})
    with pytest.raises(AttributeError):
        event.kind = "text"  # type: ignore[misc]
    assert StreamEvent("text").data == {}


def test_hookline_error_text_dict_and_pickle() -> None:
    error = HooklineError(ErrorKind.not_found, "Anchor 'x' was not found.")
    assert str(error) == "[not_found] Anchor 'x' was not found."
    assert error.as_dict() == {"kind": "not_found", "message": "Anchor 'x' was not found."}
    detailed = HooklineError("invalid_input", "bad", {"field": "path"})  # type: ignore[arg-type]
    assert detailed.kind is ErrorKind.invalid_input
    assert detailed.as_dict() == {
        "kind": "invalid_input",
        "message": "bad",
        "details": {"field": "path"},
    }
    copy = pickle.loads(pickle.dumps(detailed))
    assert copy.as_dict() == detailed.as_dict()
    with pytest.raises(ValueError):
        HooklineError("nonsense", "x")  # type: ignore[arg-type]
    assert {kind.value for kind in ErrorKind} == {
        "invalid_input",
        "config",
        "provider",
        "tool",
        "temporary",
        "not_found",
        "unknown",
    }
