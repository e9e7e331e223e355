"""What the channel manager tells channels about messages that will not run: once it is
stopping, every queued message is reported `drop` at once (the running turn still going),
and a message whose admission ends after that is not taken (no report at all, which a
channel reads as "not taken"); `quit_session` reports what it forgets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from test_channel_callbacks import SealedChannel, builtin_framework, kinds, message, until

from hookline.builtins.channels import ChannelManager
from hookline.kernel.channels import AdmitDecision, TurnSnapshot
from hookline.kernel.envelope import get_field


class SlowAdmission(SealedChannel):
    """Admission of the message `slow` waits until `admitting` is set."""

    def __init__(self) -> None:
        self.admitting = anyio.Event()  # before the channel seals itself
        super().__init__()

    async def admit_message(self, session_id: str, message: Any, turn: TurnSnapshot
                            ) -> AdmitDecision | None:
        if get_field(message, "content") == "slow":
            await self.admitting.wait()
        return await super().admit_message(session_id, message, turn)


@pytest.mark.anyio
async def test_stopping_reports_queued_messages_at_once_and_takes_none_after(
        tmp_path: Path) -> None:
    framework, gates = builtin_framework(tmp_path)
    channel = SlowAdmission()
    manager = ChannelManager(framework, {"sealed": channel})
    gates.gates["first"] = anyio.Event()
    stop = anyio.Event()
    async with framework.running(), anyio.create_task_group() as group:
        await group.start(manager.run, stop)
        await manager.receive(message("first"))
        await until(lambda: any(e[:2] == ("started", "first") for e in channel.events))
        await manager.receive(message("second"))
        group.start_soon(manager.receive, message("slow"))  # admission in flight
        stop.set()
        await until(lambda: ("admitted", "second", "drop", "the channels are stopping")
                    in kinds(channel.events, "second"))
        assert "first" not in gates.saved, "reported while the running turn still runs"
        await manager.receive(message("late"))  # refused: the manager stopped accepting
        channel.admitting.set()  # its admission ends after the stop: a follow-up not taken
        await until(lambda: manager.snapshot("s1").pending_count == 0)
        gates.gates["first"].set()
    assert kinds(channel.events, "first")[-1] == ("finished", "first")
    assert kinds(channel.events, "second") == [
        ("admitted", "second", "queued", "busy"),
        ("admitted", "second", "drop", "the channels are stopping")]
    assert kinds(channel.events, "slow") == [] and kinds(channel.events, "late") == []
    assert gates.saved == ["first"], "nothing else ran"


@pytest.mark.anyio
async def test_quit_session_reports_the_messages_it_forgets(tmp_path: Path) -> None:
    framework, gates = builtin_framework(tmp_path)
    channel = SealedChannel()
    manager = ChannelManager(framework, {"sealed": channel})
    gates.gates["first"] = anyio.Event()
    stop = anyio.Event()
    async with framework.running(), anyio.create_task_group() as group:
        await group.start(manager.run, stop)
        await manager.receive(message("first"))
        await until(lambda: any(e[:2] == ("started", "first") for e in channel.events))
        await manager.receive(message("second"))
        assert await manager.quit_session("s1") == 1
        assert kinds(channel.events, "second") == [
            ("admitted", "second", "queued", "busy"),
            ("admitted", "second", "drop", "the session was quit")]
        await until(lambda: ("finished", "first") in kinds(channel.events, "first"))
        stop.set()
    assert "second" not in gates.saved
