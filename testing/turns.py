"""`run_turn`: one turn through a framework, with everything a test wants to look at.

The turn runs through `process_inbound` exactly as a channel would run it (stream path by
default), inside `running()` when no scope is open, with a router bound that records the
stream events and the delivered envelopes and passes them on to the router that was bound
before (if any).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hookline.kernel import Framework, StreamEvent, TapeEntry, TapeQuery, TurnResult
from hookline.kernel.channels import ChannelRouter
from hookline.kernel.tape import is_async_store

from .trace import ErrorReport, HookTrace, capture_errors, trace_hooks

__all__ = ["Turn", "run_turn", "run_turn_sync"]


@dataclass
class Turn:
    """What one turn did: its result (or the exception), events, envelopes and tapes."""

    message: Any
    """The inbound envelope the turn was run for."""
    result: TurnResult | None
    """`process_inbound`'s result; None when the turn raised (see `error`)."""
    error: Exception | None = None
    """The exception the turn raised, when run with `check=False`."""
    events: list[StreamEvent] = field(default_factory=list)
    """The model stream's events, as the bound router saw them (stream path only)."""
    delivered: list[Any] = field(default_factory=list)
    """Every envelope delivered through the router (`dispatch`): the replies the builtin
    `dispatch_outbound` sends, and the error notices of its `on_error`."""
    entries: list[TapeEntry] = field(default_factory=list)
    """The entries the turn appended to its session's tape."""
    tapes: dict[str, list[TapeEntry]] = field(default_factory=dict)
    """The entries the turn appended, for every tape it changed (sidecars included)."""
    errors: list[ErrorReport] = field(default_factory=list)
    """What `on_error` was told during the turn."""
    trace: HookTrace = field(default_factory=HookTrace)
    """The hook calls of the turn (see `HookTrace`)."""

    def _result(self) -> TurnResult:
        if self.result is None:
            raise AssertionError(f"the turn raised {self.error!r}, so it has no result")
        return self.result

    @property
    def reply(self) -> str:
        """The model stage's output (`result.model_output`)."""
        return self._result().model_output

    @property
    def outbounds(self) -> list[Any]:
        """The envelopes the turn rendered and dispatched (`result.outbounds`)."""
        return self._result().outbounds

    @property
    def session_id(self) -> str:
        return self._result().session_id

    @property
    def state(self) -> dict[str, Any]:
        return self._result().state

    @property
    def text(self) -> str:
        """The text deltas of the stream, joined."""
        return "".join(str(event.data.get("delta", "")) for event in self.events
                       if event.kind == "text")

    def event_kinds(self) -> list[str]:
        return [event.kind for event in self.events]

    def tool_calls(self) -> list[dict[str, Any]]:
        """Every tool call the model made (`id`, `name`, `arguments`), from the stream."""
        return [call for event in self.events if event.kind == "tool_call"
                for call in event.data.get("tool_calls", [])]

    def tool_results(self) -> list[dict[str, Any]]:
        """Every tool result (`name`, `output`, `is_error`, `outcome`, ...), from the
        stream: `outcome` is `denied` when a `before_tool_call` refused the call."""
        return [result for event in self.events if event.kind == "tool_result"
                for result in event.data.get("tool_results", [])]

    def entry_kinds(self) -> list[str]:
        return [entry.kind for entry in self.entries]


class _Events:
    """The router's view of one stream: records each event and hands it on."""

    def __init__(self, source: Any, seen: list[StreamEvent]) -> None:
        self._source = source.__aiter__()
        self._seen = seen

    def __aiter__(self) -> _Events:
        return self

    async def __anext__(self) -> StreamEvent:
        event: StreamEvent = await self._source.__anext__()
        self._seen.append(event)
        return event


class _RecordingRouter:
    """A `ChannelRouter` that records, then defers to the router bound before it."""

    def __init__(self, inner: ChannelRouter | None) -> None:
        self.inner = inner
        self.events: list[StreamEvent] = []
        self.delivered: list[Any] = []

    def wrap_stream(self, message: Any, stream: Any) -> Any:
        source = stream if self.inner is None else self.inner.wrap_stream(message, stream)
        return _Events(source, self.events)

    async def dispatch(self, message: Any) -> bool:
        self.delivered.append(message)
        return True if self.inner is None else bool(await self.inner.dispatch(message))

    def __getattr__(self, name: str) -> Any:
        # admit_message and anything else the bound router offers stay reachable.
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)


def _inbound(message: Any, session_id: str | None, channel: str, chat_id: str) -> Any:
    if isinstance(message, str):
        inbound: dict[str, Any] = {"content": message, "channel": channel, "chat_id": chat_id}
        if session_id is not None:
            inbound["session_id"] = session_id
        return inbound
    if session_id is not None:
        raise ValueError("session_id= applies to a text message; put the session_id into "
                         "the envelope instead")
    return message


async def _store_call(store: Any, method: str, *args: Any) -> Any:
    if is_async_store(store):
        return await getattr(store, method)(*args)
    import anyio.to_thread  # a sync store does disk I/O: never on the event loop thread

    return await anyio.to_thread.run_sync(functools.partial(getattr(store, method), *args))


async def _tape_contents(store: Any) -> dict[str, list[TapeEntry]]:
    if store is None:
        return {}
    contents: dict[str, list[TapeEntry]] = {}
    for tape in await _store_call(store, "list_tapes"):
        contents[tape] = list(await _store_call(store, "fetch_all", TapeQuery(tape)))
    return contents


def _appended(before: Mapping[str, list[TapeEntry]],
              after: Mapping[str, list[TapeEntry]]) -> dict[str, list[TapeEntry]]:
    changed: dict[str, list[TapeEntry]] = {}
    for tape, entries in after.items():
        last = max((entry.id for entry in before.get(tape, ())), default=0)
        new = [entry for entry in entries if entry.id > last]
        if new:
            changed[tape] = new
    return changed


def _session_entries(framework: Framework, turn: Turn) -> list[TapeEntry]:
    if turn.result is None:
        candidates = list(turn.tapes.values())
        return candidates[0] if len(candidates) == 1 else []
    try:
        from hookline.builtins.tape import session_tape_name
    except ImportError:  # pragma: no cover - a kernel without the builtins beside it
        return []
    name = session_tape_name(turn.result.session_id, framework.workspace)
    if name in turn.tapes:
        return turn.tapes[name]
    candidates = list(turn.tapes.values())
    return candidates[0] if len(candidates) == 1 else []


async def _run(framework: Framework, inbound: Any, stream: bool, check: bool) -> Turn:
    router = _RecordingRouter(framework.router)
    turn = Turn(message=inbound, result=None)
    store = framework.get_tape_store()
    before = await _tape_contents(store)
    framework.router = router
    try:
        with capture_errors(framework) as errors, trace_hooks(framework) as trace:
            try:
                turn.result = await framework.process_inbound(inbound, stream_output=stream)
            except Exception as exc:
                if check:
                    raise
                turn.error = exc
    finally:
        framework.router = router.inner
    turn.events, turn.delivered = router.events, router.delivered
    turn.errors, turn.trace = list(errors), trace
    turn.tapes = _appended(before, await _tape_contents(store))
    turn.entries = _session_entries(framework, turn)
    return turn


async def run_turn(
    framework: Framework,
    message: Any,
    *,
    session_id: str | None = None,
    channel: str = "test",
    chat_id: str = "default",
    stream: bool = True,
    check: bool = True,
) -> Turn:
    """Run one turn and return what it did.

    `message` is the text of a message (sent as `{"content", "channel", "chat_id"}`, with
    `session_id` when given) or a whole envelope. `stream=False` takes the text path (no
    stream events). An exception of the turn is raised, or with `check=False` kept in
    `Turn.error`. Outside `running()` the turn gets a scope of its own; inside one it
    uses that scope's store. Run one turn at a time per framework.
    """
    inbound = _inbound(message, session_id, channel, chat_id)
    if framework.in_scope:
        return await _run(framework, inbound, stream, check)
    async with framework.running():
        return await _run(framework, inbound, stream, check)


def run_turn_sync(framework: Framework, message: Any, *, backend: str = "asyncio",
                  **options: Any) -> Turn:
    """`run_turn` from synchronous code, on its own event loop (`backend`: asyncio or
    trio); not from inside a running loop."""
    import anyio

    return anyio.run(functools.partial(run_turn, framework, message, **options),
                     backend=backend)
