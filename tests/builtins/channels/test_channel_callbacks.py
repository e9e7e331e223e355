"""Channels and the channel manager talk through declared members only: the callbacks
`Channel` declares (no method looked up by a string name, no attribute set on a channel
from outside), and the `ChannelRouter` protocol of `Framework.router`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from hookline.builtins.channels import ChannelManager
from hookline.builtins.channels.http.channel import HttpChannel
from hookline.builtins.config import Settings
from hookline.builtins.plugin import BuiltinPlugin
from hookline.cli.output import TurnPrinter
from hookline.kernel import hookimpl
from hookline.kernel.channels import (
    AdmitDecision,
    AdmitOutcome,
    ChannelRouter,
    Lifecycle,
    StopEvent,
    TurnSnapshot,
)
from hookline.kernel.envelope import get_field
from hookline.kernel.framework.core import Framework
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent

ROOT = Path(__file__).resolve().parents[3]

# -- the source: no look-up by name, no attribute written on someone else's object -------

_NAME_LOOKUPS = frozenset({"getattr", "setattr", "hasattr", "delattr", "vars", "methodcaller",
                           "attrgetter", "__getattribute__", "__setattr__"})
_ALLOWED_WRITES = frozenset({
    "self.framework.router",  # binding the router is what `run` is documented to do
    "turn.task_id",  # the manager's own `_Turn` record
    "turn.ending",
    "turn.answered",
    "session.steered",  # the manager's own `_Session` record
    "session.steering",
})


def name_lookups(source: str) -> list[str]:
    """Calls that reach a member through a string (getattr and kin), by line."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else (
            func.attr if isinstance(func, ast.Attribute) else None)
        if name in _NAME_LOOKUPS:
            found.append((node.lineno, ast.unparse(node)))
    return [f"line {line}: {text}" for line, text in sorted(found)]


def foreign_writes(source: str) -> list[str]:
    """Attribute assignments (and deletions) on anything but `self` itself, except the
    declared ones, and any use of `__dict__`, by line."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            found.append((node.lineno, ast.unparse(node)))
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        while targets:
            target = targets.pop()
            if isinstance(target, ast.Tuple | ast.List):
                targets.extend(target.elts)
            elif isinstance(target, ast.Attribute):
                owner = target.value
                dotted = ast.unparse(target)
                if not (isinstance(owner, ast.Name) and owner.id == "self") \
                        and dotted not in _ALLOWED_WRITES:
                    found.append((node.lineno, dotted))
    return [f"line {line}: {text}" for line, text in sorted(found)]


OLD_MANAGER_CODE = '''class ChannelManager:
    def __init__(self, channels):
        for channel in channels.values():
            if callable(getattr(channel, "message_admitted", None)):
                channel.manager_notifies = True

    def _notify(self, message, hook, *args):
        channel = self.channels.get(message["channel"])
        method = getattr(channel, hook, None)
        if callable(method):
            method(message, *args)
'''


def test_the_source_checks_catch_look_ups_by_name_and_flags_set_on_channels() -> None:
    """The checks below can fail: the manager's former code trips both."""
    assert name_lookups(OLD_MANAGER_CODE) == [
        "line 4: getattr(channel, 'message_admitted', None)",
        "line 9: getattr(channel, hook, None)",
    ]
    assert foreign_writes(OLD_MANAGER_CODE) == ["line 5: channel.manager_notifies"]
    other = "self.channels['x'].flag = 1\nvars(c)\nc.__dict__['k'] = 2\n"
    assert name_lookups(other) == ["line 2: vars(c)"]
    assert foreign_writes(other) == ["line 1: self.channels['x'].flag", "line 3: c.__dict__"]


@pytest.mark.parametrize("module", ["manager.py", "envelopes.py"])
def test_the_manager_calls_channels_only_through_declared_members(module: str) -> None:
    source = (ROOT / "builtins" / "channels" / module).read_text()
    assert name_lookups(source) == []
    assert foreign_writes(source) == []


def test_hookline_chat_reaches_the_manager_and_channel_by_declared_members() -> None:
    assert name_lookups((ROOT / "cli" / "chat.py").read_text()) == []


# -- a channel that is only what `Channel` declares --------------------------------------


class SealedChannel(Lifecycle):
    """Implements only members `Channel` declares and refuses any attribute set on it
    after construction (recording the attempt, in case a caller swallows the error)."""

    name = "sealed"

    def __init__(self, decisions: dict[str, AdmitDecision] | None = None) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.refused: list[str] = []
        self.decisions = decisions or {}
        self.sealed = True

    def __setattr__(self, key: str, value: Any) -> None:
        if getattr(self, "sealed", False):
            self.refused.append(key)
            raise AttributeError(f"{key} set on a sealed channel")
        super().__setattr__(key, value)

    def _record(self, *event: Any) -> None:
        self.events.append(event)

    async def start(self, stop_event: StopEvent) -> None:
        self._record("start")

    async def stop(self) -> None:
        self._record("stop")

    async def send(self, message: Any) -> None:
        self._record("send", get_field(message, "content").split('"')[1],
                     anyio.get_current_task().id)

    def stream_events(self, message: Any, stream: AsyncStreamEvents) -> Any:
        return stream

    async def admit_message(self, session_id: str, message: Any, turn: TurnSnapshot
                            ) -> AdmitDecision | None:
        decision = self.decisions.get(str(get_field(message, "content")))
        return decision if decision is not None or not turn.is_running else \
            AdmitDecision.follow_up("busy")

    def manager_attached(self) -> None:
        self._record("attached")

    def message_admitted(self, message: Any, outcome: AdmitOutcome,
                         reason: str | None = None) -> None:
        self._record("admitted", get_field(message, "content"), outcome, reason)

    def turn_started(self, message: Any) -> None:
        self._record("started", get_field(message, "content"), anyio.get_current_task().id)

    def turn_finished(self, message: Any) -> None:
        self._record("finished", get_field(message, "content"), anyio.get_current_task().id)


class Bare(Lifecycle):
    """A channel with nothing but `start` and `stop`: every callback keeps its default."""

    name = "bare"

    async def start(self, stop_event: StopEvent) -> None:
        pass

    async def stop(self) -> None:
        pass


class Gates:
    """Holds a turn in save_state until its message's gate opens; records saved turns."""

    def __init__(self) -> None:
        self.gates: dict[str, anyio.Event] = {}
        self.saved: list[str] = []

    @hookimpl
    async def save_state(self, session_id: str, state: dict, message: Any,
                         model_output: str) -> None:
        gate = self.gates.get(str(get_field(message, "content")))
        if gate is not None:
            await gate.wait()
        self.saved.append(str(get_field(message, "content")))


def builtin_framework(tmp_path: Path) -> tuple[Framework, Gates]:
    """A framework with the builtin plugin (offline model) and the `Gates` plugin."""
    framework = Framework(workspace=tmp_path)
    framework.registry.register(
        BuiltinPlugin(framework, settings=Settings(home=tmp_path / "home")), name="builtin")
    gates = Gates()
    framework.registry.register(gates, name="gates")
    return framework, gates


def message(content: str, channel: str = "sealed") -> dict[str, Any]:
    return {"content": content, "channel": channel, "chat_id": "c", "session_id": "s1"}


async def until(predicate: Callable[[], bool], timeout: float = 10) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.005)


def kinds(events: list[tuple[Any, ...]], content: str) -> list[Any]:
    """The events about one message, without task ids."""
    return [event[:2] + tuple(e for e in event[2:] if not isinstance(e, int))
            for event in events if len(event) > 1 and event[1] == content]


@pytest.mark.anyio
async def test_a_channel_of_declared_members_only_hears_every_callback(tmp_path: Path) -> None:
    framework, gates = builtin_framework(tmp_path)
    sealed = SealedChannel({"spam": AdmitDecision.drop("spam")})
    bare = Bare()
    manager = ChannelManager(framework, {"sealed": sealed, "bare": bare})
    assert sealed.events == [("attached",)]
    gates.gates["first"] = anyio.Event()
    stop = anyio.Event()
    async with framework.running(), anyio.create_task_group() as group:
        await group.start(manager.run, stop)
        await manager.receive(message("first"))
        # Admission is reported before the handler returns.
        assert sealed.events[-1] == ("admitted", "first", "process", None)
        await until(lambda: any(e[0] == "started" for e in sealed.events))
        await manager.receive(message("second"))  # the session is busy: queued
        await manager.receive(message("spam"))
        await manager.receive(message("bare", channel="bare"))
        await until(lambda: "bare" in gates.saved)
        gates.gates["first"].set()
        await until(lambda: ("finished", "second") in kinds(sealed.events, "second"))
        gates.gates["third"] = anyio.Event()
        await manager.receive(message("third"))
        await until(lambda: any(e[:2] == ("started", "third") for e in sealed.events))
        await manager.receive(message("fourth"))  # queued, then dropped by the shutdown
        stop.set()
        await until(lambda: not manager.accepting)  # pending messages will not start now
        gates.gates["third"].set()
    assert sealed.refused == []
    assert kinds(sealed.events, "first") == [
        ("admitted", "first", "process", None), ("started", "first"), ("send", "first"),
        ("finished", "first")]
    assert kinds(sealed.events, "second") == [
        ("admitted", "second", "queued", "busy"), ("started", "second"), ("send", "second"),
        ("finished", "second")]
    assert kinds(sealed.events, "spam") == [("admitted", "spam", "drop", "spam")]
    assert kinds(sealed.events, "fourth") == [
        ("admitted", "fourth", "queued", "busy"),
        ("admitted", "fourth", "drop", "the channels are stopping")]
    # turn_started, the turn's outbounds and turn_finished come from the turn's own task.
    for content in ("first", "second", "third"):
        tasks = {event[-1] for event in sealed.events
                 if event[0] in ("started", "send", "finished") and event[1] == content}
        assert len(tasks) == 1, (content, sealed.events)
    assert ("stop",) in sealed.events and gates.saved.count("bare") == 1


def test_the_http_channel_learns_of_its_manager_through_manager_attached(
        tmp_path: Path) -> None:
    async def handler(message: Any) -> None:
        return None

    channel = HttpChannel(handler)
    assert channel.manager_notifies is False
    with pytest.raises(AttributeError):
        channel.manager_notifies = True  # type: ignore[misc]
    ChannelManager(Framework(tmp_path), {"http": channel})
    assert channel.manager_notifies is True


# -- the router protocols ---------------------------------------------------------------


class DispatchOnly:
    async def dispatch(self, message: Any) -> bool:
        return True


class Opinionated:
    """A router of its own that also answers admission."""

    def wrap_stream(self, message: Any, stream: AsyncStreamEvents) -> AsyncStreamEvents:
        return stream

    async def dispatch(self, message: Any) -> bool:
        return True

    async def admit_message(self, session_id: str, message: Any, turn: TurnSnapshot
                            ) -> AdmitDecision | None:
        return AdmitDecision.drop("router says no")


def test_the_manager_and_the_printer_are_channel_routers(tmp_path: Path) -> None:
    framework = Framework(tmp_path)
    manager = ChannelManager(framework, {})
    printer = TurnPrinter(stream=False)
    # Checked by a type checker (structural), and at run time (runtime_checkable).
    routers: list[ChannelRouter] = [manager, printer, Opinionated()]
    assert all(isinstance(router, ChannelRouter) for router in routers)
    assert not isinstance(DispatchOnly(), ChannelRouter)
    framework.router = printer
    assert framework.router is printer


@pytest.mark.anyio
async def test_the_builtin_plugin_has_no_admission_opinion_of_its_own(
        tmp_path: Path) -> None:
    """Admission is decided where messages arrive: the channel manager asks the message's
    channel itself when no plugin decided, so the hook never goes back to the router."""
    framework, _ = builtin_framework(tmp_path)
    turn = TurnSnapshot("s1", running_count=1)
    assert await framework.admit_message("s1", message("x"), turn) is None  # no router
    framework.router = Opinionated()
    assert await framework.admit_message("s1", message("x"), turn) is None


@pytest.mark.anyio
async def test_the_pipeline_reads_the_stream_through_the_bound_router(tmp_path: Path) -> None:
    framework, _ = builtin_framework(tmp_path)
    seen: list[str] = []

    class Watching(Opinionated):
        def wrap_stream(self, message: Any, stream: AsyncStreamEvents) -> Any:
            return self._watch(stream)

        async def _watch(self, stream: AsyncStreamEvents) -> Any:
            event: StreamEvent
            async for event in stream:
                seen.append(event.kind)
                yield event

    framework.router = Watching()
    async with framework.running():
        result = await framework.process_inbound(message("hello"), stream_output=True)
    assert "hello" in result.model_output and "text" in seen
