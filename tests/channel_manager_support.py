"""The doubles of the channel manager tests: fake channels, a model whose replies wait
on events (so turns overlap), a policy plugin, and a framework with the builtin plugin."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
from channel_support import serving

from hookline.builtins.agent.loop import Agent, AgentConfig
from hookline.builtins.channels import ChannelManager
from hookline.builtins.config import Settings
from hookline.builtins.models.base import Finished, TextDelta
from hookline.builtins.plugin import BuiltinPlugin
from hookline.kernel import hookimpl
from hookline.kernel.channels import (
    AdmitDecision,
    Channel,
    Interface,
    Lifecycle,
    StopEvent,
    TurnSnapshot,
)
from hookline.kernel.envelope import get_field
from hookline.kernel.framework.core import Framework
from hookline.kernel.messages import as_model_messages
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent


class GatedModel:
    """Answers `reply to <last user message>`; a message starting with `wait:` is answered
    only once its gate is opened. `calls` keeps the user messages of every call."""

    name = "gated"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self._gates: dict[str, anyio.Event] = {}
        self._started: dict[str, anyio.Event] = {}

    def gate(self, text: str) -> anyio.Event:
        return self._gates.setdefault(text, anyio.Event())

    def started(self, text: str) -> anyio.Event:
        return self._started.setdefault(text, anyio.Event())

    async def stream(self, messages: Any, tools: Any = (), *, max_tokens: Any = None
                     ) -> AsyncIterator[Any]:
        users = [m.text for m in as_model_messages(messages) if m.role == "user"]
        last = users[-1] if users else ""
        self.calls.append(users)
        self.started(last).set()
        if last.startswith("wait:"):
            await self.gate(last).wait()
        text = f"reply to {last}"
        yield TextDelta(text)
        yield Finished(text)


class FakeChannel(Channel):
    """Records start/stop in a shared log, sent messages and wrapped streams."""

    def __init__(self, name: str = "fake", log: list[Any] | None = None, *,
                 steer_when_running: bool = False, enabled: bool = True) -> None:
        self.name = name  # type: ignore[misc]
        self.log = log if log is not None else []
        self.steer_when_running = steer_when_running
        self.enabled = enabled
        self.sent: list[Any] = []
        self.wrapped: list[str] = []
        self.seen_events: list[str] = []

    async def start(self, stop_event: StopEvent) -> None:
        self.log.append(("start", self.name))

    async def stop(self) -> None:
        self.log.append(("stop", self.name))

    async def send(self, message: Any) -> None:
        self.log.append(("send", self.name, get_field(message, "content")))
        self.sent.append(message)

    def stream_events(self, message: Any, stream: AsyncStreamEvents) -> Any:
        self.wrapped.append(str(get_field(message, "content")))
        return self._watch(stream)

    async def _watch(self, stream: AsyncStreamEvents) -> AsyncIterator[StreamEvent]:
        async for event in stream:
            self.seen_events.append(event.kind)
            yield event

    async def admit_message(self, session_id: str, message: Any, turn: TurnSnapshot
                            ) -> AdmitDecision | None:
        if self.steer_when_running and turn.is_running:
            return AdmitDecision.steer("busy")
        return None

    def replies(self) -> list[str]:
        return [str(get_field(m, "content")) for m in self.sent
                if get_field(m, "kind") != "error"]


class FakeInterface(FakeChannel, Interface):
    pass


class FakeLifecycle(FakeChannel, Lifecycle):
    pass


class Policy:
    """A test plugin: admission answers by message content, errors recorded, optional
    gates in save_state and failing session resolution."""

    def __init__(self) -> None:
        self.decisions: dict[str, Any] = {}
        self.admitted: list[tuple[str, TurnSnapshot]] = []
        self.errors: list[tuple[str, Exception, Any]] = []
        self.save_gates: dict[str, anyio.Event] = {}
        self.bad_sessions: set[str] = set()

    @hookimpl
    def resolve_session(self, message: Any) -> str | None:
        if get_field(message, "content") in self.bad_sessions:
            raise LookupError("no session for this message")
        return None

    @hookimpl
    def admit_message(self, session_id: str, message: Any, turn: TurnSnapshot) -> Any:
        content = str(get_field(message, "content"))
        self.admitted.append((content, turn))
        answer = self.decisions.get(content)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    @hookimpl
    async def save_state(self, session_id: str, state: dict, message: Any,
                         model_output: str) -> None:
        gate = self.save_gates.get(str(get_field(message, "content")))
        if gate is not None:
            await gate.wait()

    @hookimpl
    def on_error(self, stage: str, error: Exception, message: Any) -> None:
        self.errors.append((stage, error, message))


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.framework = Framework(workspace=tmp_path)
        self.builtin = BuiltinPlugin(self.framework, settings=Settings(home=tmp_path / "home"))
        self.framework.registry.register(self.builtin, name="builtin")
        self.policy = Policy()
        self.framework.registry.register(self.policy, name="policy")
        self.model = GatedModel()
        self.builtin._agent = Agent(self.framework, AgentConfig(model="gated", max_steps=5),
                                    lambda spec: self.model, self.builtin.tape_for)

    def serving(self, channels: dict[str, Channel] | None = None, **options: Any
                ) -> AbstractAsyncContextManager[ChannelManager]:
        """A running manager inside `running()`; stops it (gracefully) at the end."""
        return serving(self.framework, channels, **options)



def message(content: str, channel: str = "fake", session: str = "s1", **fields: Any
            ) -> dict[str, Any]:
    return {"content": content, "channel": channel, "chat_id": "c", "session_id": session,
            **fields}


async def until(predicate: Callable[[], bool], timeout: float = 10) -> None:
    """Let the scheduled tasks run until `predicate()` holds."""
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.005)
