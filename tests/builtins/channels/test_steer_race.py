"""A steered message that arrives just as its turn ends: it is never lost nor queued behind
the follow-ups that came after it; it becomes the session's next turn (the turns' ends and
the steering inbox's calls are held on anyio events, so each race is played the same way
every time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from channel_manager_support import FakeChannel, Setup, message, until

from hookline.kernel.channels import AdmitDecision
from hookline.kernel.envelope import get_field


@pytest.fixture
def decisions(tmp_path: Path) -> Setup:
    setup = Setup(tmp_path)
    setup.policy.decisions.update({"b": AdmitDecision.follow_up(),
                                   "c": AdmitDecision.follow_up(),
                                   "late": AdmitDecision.steer("joins the running turn")})
    return setup


@pytest.mark.anyio
async def test_a_steer_left_in_the_inbox_runs_before_later_follow_ups(decisions: Setup) -> None:
    setup = decisions
    end = anyio.Event()
    setup.policy.save_gates["a"] = end  # the turn's model is done; the turn has not ended
    fake = FakeChannel()
    async with setup.serving({"fake": fake}) as manager:
        await manager.receive(message("a"))
        await until(lambda: len(setup.model.calls) == 1)
        await manager.receive(message("b"))
        await manager.receive(message("late"))  # into the inbox: the agent will not read it
        await manager.receive(message("c"))
        snapshot = manager.snapshot("s1")
        assert (snapshot.pending_count, snapshot.steering_count) == (2, 1)
        end.set()
        await until(lambda: len(fake.sent) == 4)
    assert fake.replies() == ["reply to a", "reply to late", "reply to b", "reply to c"]


@pytest.mark.anyio
async def test_a_steer_still_being_queued_when_its_turn_ends_is_the_next_turn(
        decisions: Setup) -> None:
    """The steer was admitted while the turn ran, and the inbox is still taking it (its
    `enqueue_message` is held) when the turn ends: the follow-up that came before it waits,
    and the steer is the next turn."""
    setup = decisions
    end, queuing, release = anyio.Event(), anyio.Event(), anyio.Event()
    setup.policy.save_gates["a"] = end
    fake = FakeChannel()
    async with setup.serving({"fake": fake}) as manager, anyio.create_task_group() as group:
        inbox = setup.framework.get_steering_inbox()
        assert inbox is not None
        plain_enqueue = inbox.enqueue_message

        async def held_enqueue(message: Any, state: dict[str, Any]) -> None:
            if get_field(message, "content") == "late":
                queuing.set()
                await release.wait()
            await plain_enqueue(message, state)

        inbox.enqueue_message = held_enqueue  # type: ignore[method-assign]
        await manager.receive(message("a"))
        await until(lambda: len(setup.model.calls) == 1)
        await manager.receive(message("b"))
        group.start_soon(manager.receive, message("late"))
        with anyio.fail_after(10):
            await queuing.wait()  # admitted as a steer, not yet in the inbox
        end.set()
        await until(lambda: fake.replies() == ["reply to a"])
        await anyio.sleep(0.05)
        assert len(setup.model.calls) == 1, "b started ahead of the steer"
        release.set()
        await until(lambda: len(fake.sent) == 3)
    assert fake.replies() == ["reply to a", "reply to late", "reply to b"]
    assert [call[-1] for call in setup.model.calls] == ["a", "late", "b"]


@pytest.mark.anyio
async def test_a_steer_into_an_ending_turn_is_queued_as_the_next_turn(decisions: Setup) -> None:
    """The turn has returned and is moving its inbox leftovers (the inbox's drain is held):
    a steer arriving then cannot join it, and runs next, before the follow-ups."""
    setup = decisions
    draining, release = anyio.Event(), anyio.Event()
    fake = FakeChannel()

    async def held_drain(state: dict[str, Any]) -> list[Any]:
        if fake.sent and not draining.is_set():  # the manager's drain, after the reply
            draining.set()
            await release.wait()
        return await plain_drain(state)

    async with setup.serving({"fake": fake}) as manager:
        inbox = setup.framework.get_steering_inbox()
        assert inbox is not None
        plain_drain = inbox.drain_messages
        inbox.drain_messages = held_drain  # type: ignore[method-assign]
        await manager.receive(message("b-first"))
        with anyio.fail_after(10):
            await draining.wait()  # "b-first"'s turn returned; its leftovers are moving
        await manager.receive(message("c"))
        await manager.receive(message("late"))
        release.set()
        await until(lambda: len(fake.sent) == 3)
    assert fake.replies() == ["reply to b-first", "reply to late", "reply to c"]
