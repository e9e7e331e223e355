"""Debouncing of inbound messages (docs/channels.md, "Debouncing"): channels whose `needs_debounce`
is true get a per-session buffer before admission; commands pass at once, inactive
messages need recent activity, bursts become one merged message, shutdown flushes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import pytest
from channel_support import serving

from hookline.builtins.agent.loop import Agent, AgentConfig
from hookline.builtins.channels import ChannelManager
from hookline.builtins.channels.debounce import DebounceBuffer, merge_messages
from hookline.builtins.config import Settings
from hookline.builtins.models.base import Finished, TextDelta
from hookline.builtins.plugin import BuiltinPlugin
from hookline.kernel import hookimpl
from hookline.kernel.channels import Channel, StopEvent, TurnSnapshot
from hookline.kernel.envelope import ChannelMessage, MediaItem, get_field
from hookline.kernel.framework.core import Framework
from hookline.kernel.messages import as_model_messages

WINDOW = 0.05


class EchoModel:
    """Answers `reply to <last user message>` and records the user messages of each call."""

    name = "echo"

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def stream(self, messages: Any, tools: Any = (), *, max_tokens: Any = None
                     ) -> AsyncIterator[Any]:
        users = [m.text for m in as_model_messages(messages) if m.role == "user"]
        last = users[-1] if users else ""
        self.calls.append(last)
        yield TextDelta(f"reply to {last}")
        yield Finished(f"reply to {last}")


class FakeChannel(Channel):
    def __init__(self, name: str, *, debounce: bool) -> None:
        self.name = name  # type: ignore[misc]
        self.needs_debounce = debounce  # type: ignore[misc]
        self.sent: list[Any] = []
        self.outcomes: list[tuple[str, str]] = []

    async def start(self, stop_event: StopEvent) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def send(self, message: Any) -> None:
        self.sent.append(message)

    def message_admitted(self, message: Any, outcome: str, reason: str | None) -> None:
        self.outcomes.append((str(get_field(message, "content")), outcome))


class Recorder:
    """Records every message admission sees (content, session id)."""

    def __init__(self) -> None:
        self.admitted: list[tuple[str, str]] = []
        self.messages: list[Any] = []

    @hookimpl
    def admit_message(self, session_id: str, message: Any, turn: TurnSnapshot) -> Any:
        self.admitted.append((str(get_field(message, "content")), session_id))
        self.messages.append(message)
        return None


class Setup:
    def __init__(self, tmp_path: Path) -> None:
        self.framework = Framework(workspace=tmp_path)
        builtin = BuiltinPlugin(self.framework, settings=Settings(home=tmp_path / "home"))
        self.framework.registry.register(builtin, name="builtin")
        self.recorder = Recorder()
        self.framework.registry.register(self.recorder, name="recorder")
        self.model = EchoModel()
        builtin._agent = Agent(self.framework, AgentConfig(model="echo", max_steps=5),
                               lambda spec: self.model, builtin.tape_for)
        self.chat = FakeChannel("chat", debounce=True)
        self.plain = FakeChannel("plain", debounce=False)

    def serving(self, **options: Any) -> AbstractAsyncContextManager[ChannelManager]:
        options.setdefault("debounce_seconds", WINDOW)
        return serving(self.framework, {"chat": self.chat, "plain": self.plain}, **options)


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def message(content: str, session: str = "s1", *, channel: str = "chat", active: bool = True,
            **fields: Any) -> dict[str, Any]:
    return {"content": content, "channel": channel, "chat_id": "c", "session_id": session,
            "is_active": active, **fields}


async def until(predicate: Callable[[], bool], timeout: float = 10) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.005)


def pending(manager: ChannelManager, session: str | None = None) -> int:
    assert manager._debounce is not None
    return manager._debounce.pending(session)


@pytest.mark.anyio
async def test_a_burst_becomes_one_turn_with_the_joined_content(setup: Setup) -> None:
    async with setup.serving() as manager:
        for content in ("first", "second", "third"):
            await manager.receive(message(content))
        assert setup.recorder.admitted == []  # still collecting
        assert pending(manager, "s1") == 3
        await until(lambda: len(setup.chat.sent) == 1)
    assert setup.recorder.admitted == [("first\nsecond\nthird", "s1")]
    assert setup.model.calls == ["first\nsecond\nthird"]
    assert get_field(setup.chat.sent[0], "content") == "reply to first\nsecond\nthird"


@pytest.mark.anyio
async def test_a_command_passes_at_once_and_leaves_the_batch_alone(setup: Setup) -> None:
    async with setup.serving(debounce_seconds=60) as manager:
        await manager.receive(message("draft"))
        await manager.receive(message("/status", kind="command", active=False))
        assert setup.recorder.admitted == [("/status", "s1")]  # admitted in receive itself
        assert pending(manager, "s1") == 1
        await until(lambda: len(setup.chat.sent) == 1)
    assert setup.model.calls[0] == "/status"
    assert setup.recorder.admitted[1:] == [("draft", "s1")]  # flushed at shutdown


@pytest.mark.anyio
async def test_an_inactive_message_needs_recent_activity(setup: Setup) -> None:
    async with setup.serving() as manager:
        await manager.receive(message("chatter", active=False))
        assert pending(manager) == 0
        assert setup.chat.outcomes == [("chatter", "drop")]
        await manager.receive(message("hey bot"))
        await manager.receive(message("and more", active=False))
        assert pending(manager, "s1") == 2
        await until(lambda: len(setup.chat.sent) == 1)
        await manager.receive(message("later", session="s2", active=False))
        assert pending(manager, "s2") == 0  # the activity of s1 does not count for s2
    assert setup.recorder.admitted == [("hey bot\nand more", "s1")]
    assert setup.model.calls == ["hey bot\nand more"]


@pytest.mark.anyio
async def test_the_active_window_expires() -> None:
    delivered: list[Any] = []
    got = anyio.Event()

    async def handler(msg: Any) -> None:
        delivered.append(get_field(msg, "content"))
        got.set()

    async with anyio.create_task_group() as task_group:
        buffer = DebounceBuffer(handler, task_group, debounce_seconds=0.01,
                                active_window_seconds=WINDOW)
        assert await buffer.submit(message("hi")) == "buffered"
        assert await buffer.submit(message("soon after", active=False)) == "buffered"
        with anyio.fail_after(10):
            await got.wait()
        await anyio.sleep(WINDOW * 2)
        assert await buffer.submit(message("too late", active=False)) == "ignored"
        assert buffer.pending() == 0
    assert delivered == ["hi\nsoon after"]


@pytest.mark.anyio
async def test_sessions_buffer_independently(setup: Setup) -> None:
    async with setup.serving() as manager:
        await manager.receive(message("a1"))
        await manager.receive(message("b1", session="s2"))
        await manager.receive(message("a2"))
        await manager.receive(message("b2", session="s2"))
        assert (pending(manager, "s1"), pending(manager, "s2")) == (2, 2)
        await until(lambda: len(setup.chat.sent) == 2)
    assert sorted(setup.recorder.admitted) == [("a1\na2", "s1"), ("b1\nb2", "s2")]
    assert sorted(setup.model.calls) == ["a1\na2", "b1\nb2"]


@pytest.mark.anyio
async def test_channels_without_debounce_are_unaffected(setup: Setup) -> None:
    async with setup.serving(debounce_seconds=60) as manager:
        await manager.receive(message("one", channel="plain", active=False))
        await manager.receive(message("two", channel="plain", active=False))
        assert setup.recorder.admitted == [("one", "s1"), ("two", "s1")]
        assert pending(manager) == 0
        await until(lambda: len(setup.plain.sent) == 2)
    assert sorted(setup.model.calls) == ["one", "two"]


@pytest.mark.anyio
async def test_shutdown_flushes_a_pending_buffer(setup: Setup) -> None:
    with anyio.fail_after(10):
        async with setup.serving(debounce_seconds=60) as manager:
            await manager.receive(message("almost"))
            await manager.receive(message("done"))
            assert setup.recorder.admitted == []
    assert setup.recorder.admitted == [("almost\ndone", "s1")]
    assert setup.model.calls == ["almost\ndone"]
    assert [get_field(m, "content") for m in setup.chat.sent] == ["reply to almost\ndone"]


def test_merge_uses_the_last_message_as_template() -> None:
    png = MediaItem("image", "image/png", url="https://example.test/a.png")
    pdf = MediaItem("document", "application/pdf", url="https://example.test/b.pdf")
    first = ChannelMessage("s", "chat", "look", media=[png], context={"n": 1})
    last = ChannelMessage("s", "chat", "and this", media=[pdf], context={"n": 2},
                          is_active=True)
    merged = merge_messages([first, ChannelMessage("s", "chat", "hm"), last])
    assert isinstance(merged, ChannelMessage) and merged is not last
    assert merged.content == "look\nhm\nand this"
    assert merged.media == [png, pdf]
    assert merged.context["n"] == 2 and merged.is_active
    assert last.content == "and this" and last.media == [pdf]  # the originals are untouched

    dicts = [{"content": "a", "channel": "x", "media": [png]}, {"content": "b", "channel": "x",
                                                                "extra": True}]
    assert merge_messages(dicts) == {"content": "a\nb", "channel": "x", "extra": True,
                                     "media": [png]}
    assert merge_messages([{"content": "a"}, {"content": "b"}]) == {"content": "a\nb"}
    single = {"content": "only"}
    assert merge_messages([single]) is single
