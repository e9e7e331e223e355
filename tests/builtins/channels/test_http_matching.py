"""The `http` channel finds the request an outbound answers by the request id the outbound
carries back (the builtin `render_outbound` and `on_error` copy the inbound's private
context keys), never by the task that sends it.

The in-process tests run the real framework, channel manager and http channel on
loopback; a relay bound as the framework's router hands every outbound to a worker task
of its own, so no outbound reaches the channel from the turn's task.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterable, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup
from builtin_support import build_builtin
from gateway_support import TEST_TOKEN, post

from hookline.builtins.channels import ChannelManager
from hookline.builtins.channels.envelopes import channel_message
from hookline.builtins.channels.http.channel import HttpChannel
from hookline.builtins.channels.http.match import REQUEST_ID_KEY
from hookline.kernel import Framework
from hookline.kernel.channels import TurnSnapshot
from hookline.kernel.envelope import ChannelMessage
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent

Deliver = Callable[[HttpChannel, ChannelMessage], Awaitable[None]]


async def as_it_is(channel: HttpChannel, message: ChannelMessage) -> None:
    await channel.send(message)


class RelayRouter:
    """Delivers each outbound from its own worker task (through `deliver`), and waits
    until it is delivered, so that the turn ends only once its reply has arrived."""

    def __init__(self, manager: ChannelManager, deliver: Deliver = as_it_is) -> None:
        self.manager = manager
        self.deliver = deliver
        self.send, self.receive = anyio.create_memory_object_stream[
            tuple[Any, anyio.Event]](16)
        self.turn_tasks: list[int] = []
        self.delivery_tasks: list[int] = []

    def wrap_stream(self, message: Any, stream: AsyncStreamEvents
                    ) -> AsyncIterable[StreamEvent]:
        return self.manager.wrap_stream(message, stream)

    async def admit_message(self, session_id: str, message: Any,
                            turn: TurnSnapshot) -> Any:
        return await self.manager.admit_message(session_id, message, turn)

    async def dispatch(self, message: Any) -> bool:
        self.turn_tasks.append(anyio.get_current_task().id)
        delivered = anyio.Event()
        await self.send.send((message, delivered))
        await delivered.wait()
        return True

    async def work(self) -> None:
        async for message, delivered in self.receive:
            self.delivery_tasks.append(anyio.get_current_task().id)
            channel = self.manager.active["http"]
            assert isinstance(channel, HttpChannel)
            await self.deliver(channel, channel_message("http", message))
            delivered.set()


@pytest.fixture
def framework(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Framework:
    for key in [k for k in os.environ if k.startswith("HOOKLINE_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOOKLINE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOOKLINE_HTTP_TOKEN", TEST_TOKEN)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    framework = Framework(workspace)
    framework.load_hooks()
    return framework


async def serve_through_relay(framework: Framework, group: TaskGroup, stop: anyio.Event,
                              deliver: Deliver = as_it_is) -> tuple[str, RelayRouter]:
    manager = ChannelManager(framework, enabled_channels="http")
    channel = manager.channels["http"]
    assert isinstance(channel, HttpChannel)
    channel.configure_listener(None, 0, None)
    await group.start(manager.run, stop)
    relay = RelayRouter(manager, deliver)
    framework.router = relay  # after `run` bound the manager: every outbound goes through it
    group.start_soon(relay.work)
    with anyio.fail_after(30):
        while channel.url is None:
            await anyio.sleep(0.01)
    return channel.url, relay


def ask_in_threads(url: str, payloads: list[dict[str, Any]]) -> list[Any]:
    with ThreadPoolExecutor(len(payloads)) as pool:
        return list(pool.map(lambda payload: post(url, payload), payloads))


@pytest.mark.anyio
async def test_replies_sent_from_another_task_reach_their_own_requests(
        framework: Framework) -> None:
    stop = anyio.Event()
    async with framework.running(), anyio.create_task_group() as group:
        url, relay = await serve_through_relay(framework, group, stop)
        replies = await anyio.to_thread.run_sync(ask_in_threads, url, [
            {"content": "question one", "session_id": "one"},
            {"content": "question two", "session_id": "two"},
        ])
        stop.set()
        relay.send.close()
    assert [reply.status for reply in replies] == [200, 200]
    assert "question one" in replies[0].json()["content"]
    assert "question two" in replies[1].json()["content"]
    assert [r.json()["session_id"] for r in replies] == ["one", "two"]
    assert len(relay.delivery_tasks) == 2 and len(set(relay.delivery_tasks)) == 1
    assert not set(relay.delivery_tasks) & set(relay.turn_tasks), \
        "no outbound reached the channel from the task of a turn"


@pytest.mark.anyio
async def test_an_outbound_without_the_request_id_goes_to_its_sessions_running_turn(
        framework: Framework) -> None:
    """A plugin's own `render_outbound` may drop the context: the session decides."""

    async def forget_context(channel: HttpChannel, message: ChannelMessage) -> None:
        assert REQUEST_ID_KEY in message.context
        await channel.send(ChannelMessage(
            session_id=message.session_id, channel=message.channel, content=message.content,
            chat_id=message.chat_id, kind=message.kind, output_channel=message.output_channel))

    stop = anyio.Event()
    async with framework.running(), anyio.create_task_group() as group:
        url, relay = await serve_through_relay(framework, group, stop, forget_context)
        replies = await anyio.to_thread.run_sync(ask_in_threads, url, [
            {"content": "first session", "session_id": "s1"},
            {"content": "second session", "session_id": "s2"},
        ])
        stop.set()
        relay.send.close()
    assert [reply.status for reply in replies] == [200, 200]
    assert "first session" in replies[0].json()["content"]
    assert "second session" in replies[1].json()["content"]


@pytest.mark.anyio
async def test_an_outbound_naming_an_answered_request_is_not_given_to_another(
        framework: Framework) -> None:
    """A late outbound for a request already answered is dropped, not handed to the next
    request of the same session."""
    seen: list[ChannelMessage] = []

    async def replay_the_first(channel: HttpChannel, message: ChannelMessage) -> None:
        if seen:  # the second request's reply: the first one's comes again before it
            await channel.send(seen[0])
        seen.append(message)
        await channel.send(message)

    stop = anyio.Event()
    async with framework.running(), anyio.create_task_group() as group:
        url, relay = await serve_through_relay(framework, group, stop, replay_the_first)
        first, second = [await anyio.to_thread.run_sync(ask_in_threads, url, [
            {"content": question, "session_id": "same"}]) for question in ("early", "later")]
        stop.set()
        relay.send.close()
    assert len(seen) == 2
    assert [reply.status for reply in (*first, *second)] == [200, 200]
    assert "early" in first[0].json()["content"]
    assert "later" in second[0].json()["content"]
    assert "early" not in second[0].json()["content"]
    assert len(second[0].json()["outbounds"]) == 1


@pytest.mark.anyio
async def test_the_builtin_outbounds_carry_the_private_context_keys_only(
        tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    framework, _ = build_builtin(workspace, [{"text": "answer"}, {"text": "again"}])
    sent: list[Any] = []

    class Router:
        def wrap_stream(self, message: Any, stream: AsyncStreamEvents
                        ) -> AsyncIterable[StreamEvent]:
            return stream

        async def dispatch(self, message: Any) -> bool:
            sent.append(message)
            return True

    message = {"content": "hi", "channel": "http", "session_id": "p",
               "context": {"_mark": "m1", "shown": "to the model"}}
    async with framework.running():
        framework.router = Router()
        result = await framework.process_inbound(message)
        await framework.notify_error("turn", RuntimeError("boom"), message)
    assert [outbound["context"] for outbound in result.outbounds] == [{"_mark": "m1"}]
    assert [(m["kind"], m.get("context")) for m in sent] == [
        ("normal", {"_mark": "m1"}), ("error", {"_mark": "m1"})]
    assert "context" not in (await framework.process_inbound(
        {"content": "plain", "channel": "cli", "session_id": "p"})).outbounds[0]
