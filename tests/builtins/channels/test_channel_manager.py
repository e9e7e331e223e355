"""The channel manager (docs/channels.md): enabling, admission, scheduling,
steering, routing and shutdown, with fake channels, the builtin plugin and a model whose
replies wait on events so turns overlap; and the CLI channel on text streams."""

from __future__ import annotations

import io
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from channel_manager_support import FakeChannel, FakeInterface, FakeLifecycle, Setup, message, until

from hookline.builtins.channels import ChannelManager, CliChannel
from hookline.kernel import hookimpl
from hookline.kernel.channels import AdmitDecision, Channel, StopEvent, TurnSnapshot
from hookline.kernel.envelope import ChannelMessage, get_field
from hookline.kernel.framework.core import Framework
from hookline.kernel.messages import ToolCallSpec
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent

MANAGER_LOGGER = "hookline.builtins.channels.manager"


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


# -- enabling ----------------------------------------------------------------------------


def test_enabling_rules() -> None:
    channels = {
        "cli": FakeInterface("cli"),
        "web": FakeChannel("web"),
        "cron": FakeLifecycle("cron"),
        "off": FakeChannel("off", enabled=False),
        "beat": FakeLifecycle("beat"),
    }
    manager = ChannelManager(Framework(), channels)

    def names(selection: Any) -> list[str]:
        return list(manager.enabled(selection))

    assert names("all") == ["web", "cron", "beat"]  # no Interface, nothing disabled
    assert names("all,!cron") == ["web", "beat"]
    assert names("!web") == ["cron", "beat"]  # only exclusions: all minus them
    assert names("") == ["web", "cron", "beat"]
    assert names("cli") == ["cli", "cron", "beat"]  # a non-Lifecycle name adds Lifecycle
    assert names("cli,!cron") == ["cli", "beat"]
    assert names(["cli", "!cron", "!beat"]) == ["cli"]
    assert names("web") == ["web", "cron", "beat"]
    assert names("cron") == ["cron"]  # only Lifecycle names: nothing added
    assert names("all,cli") == ["web", "cron", "beat", "cli"]
    assert names("off,nope") == []  # disabled and unknown names never run


def test_channels_come_from_provide_channels(tmp_path: Path) -> None:
    framework = Framework(workspace=tmp_path)
    handlers: list[Any] = []

    class Provider:
        @hookimpl
        def provide_channels(self, message_handler: Any) -> list[Channel]:
            handlers.append(message_handler)
            return [FakeInterface("cli"), FakeChannel("web")]

    class Shadow:
        @hookimpl
        def provide_channels(self, message_handler: Any) -> list[Channel]:
            return [FakeChannel("web", log=["shadow"])]

    framework.registry.register(Provider(), name="provider")
    framework.registry.register(Shadow(), name="shadow")
    manager = ChannelManager(framework)
    assert handlers == [manager.receive]
    assert list(manager.channels) == ["web", "cli"]
    assert manager.channels["web"].log == ["shadow"]  # the first in priority order wins
    assert list(manager.enabled()) == ["web"]


# -- admission and scheduling ----------------------------------------------------------


@pytest.mark.anyio
async def test_process_runs_turns_of_a_session_concurrently(setup: Setup) -> None:
    fake = FakeChannel()
    model = setup.model
    async with setup.serving({"fake": fake}) as manager:
        await manager.receive(message("wait:a"))
        await manager.receive(message("wait:b"))
        with anyio.fail_after(10):
            await model.started("wait:a").wait()
            await model.started("wait:b").wait()
        assert manager.snapshot("s1").running_count == 2
        assert [turn.running_count for _, turn in setup.policy.admitted] == [0, 1]
        model.gate("wait:b").set()
        await until(lambda: len(fake.sent) == 1)
        model.gate("wait:a").set()
        await until(lambda: len(fake.sent) == 2)
    assert fake.replies() == ["reply to wait:b", "reply to wait:a"]


@pytest.mark.anyio
async def test_drop_discards_the_message_with_its_reason(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=MANAGER_LOGGER)
    setup.policy.decisions["spam"] = AdmitDecision.drop("looks like spam")
    fake = FakeChannel()
    async with setup.serving({"fake": fake}) as manager:
        await manager.receive(message("spam"))
        await manager.receive(message("ham"))
        await until(lambda: len(fake.sent) == 1)
    assert fake.replies() == ["reply to ham"]
    assert all("spam" not in users for users in setup.model.calls)
    assert "looks like spam" in caplog.text


@pytest.mark.anyio
async def test_follow_up_waits_for_the_running_turn_then_runs_in_order(setup: Setup) -> None:
    setup.policy.decisions.update({"b": AdmitDecision.follow_up(), "c": AdmitDecision.follow_up(),
                                   "now": AdmitDecision.follow_up()})
    fake = FakeChannel()
    model = setup.model
    async with setup.serving({"fake": fake}) as manager:
        await manager.receive(message("now", session="idle"))  # no running turn: runs now
        await until(lambda: fake.replies() == ["reply to now"])
        await manager.receive(message("wait:a"))
        with anyio.fail_after(10):
            await model.started("wait:a").wait()
        await manager.receive(message("b"))
        await manager.receive(message("c"))
        snapshot = manager.snapshot("s1")
        assert (snapshot.running_count, snapshot.pending_count) == (1, 2)
        await anyio.sleep(0.05)
        assert fake.replies() == ["reply to now"]  # b and c wait
        model.gate("wait:a").set()
        await until(lambda: len(fake.sent) == 4)
    assert fake.replies() == ["reply to now", "reply to wait:a", "reply to b", "reply to c"]
    admitted = [content for content, _ in setup.policy.admitted]
    assert admitted == ["now", "wait:a", "b", "c"]  # queued messages are not admitted again
    assert [turn.pending_count for _, turn in setup.policy.admitted] == [0, 0, 0, 1]


@pytest.mark.anyio
async def test_steer_joins_the_running_turn_at_its_next_step(setup: Setup) -> None:
    fake = FakeChannel(steer_when_running=True)  # the channel's opinion, via the builtin hook
    model = setup.model
    async with setup.serving({"fake": fake}) as manager:
        await manager.receive(message("wait:a"))
        with anyio.fail_after(10):
            await model.started("wait:a").wait()
        await manager.receive(message("also this"))
        snapshot = manager.snapshot("s1")
        assert (snapshot.running_count, snapshot.steering_count) == (1, 1)
        model.gate("wait:a").set()
        await until(lambda: len(fake.sent) == 1)
        await anyio.sleep(0.05)
    assert fake.replies() == ["reply to wait:a\n\nreply to also this"]  # one turn, two steps
    assert model.calls[-1][-2:] == ["wait:a", "also this"]
    assert len(fake.sent) == 1


@pytest.mark.anyio
async def test_steer_without_a_running_turn_is_processed(setup: Setup) -> None:
    setup.policy.decisions["x"] = AdmitDecision.steer()
    fake = FakeChannel()
    inbound = {"content": "x", "channel": "fake", "chat_id": "c"}
    async with setup.serving({"fake": fake}) as manager:
        await manager.receive(inbound)
        assert inbound["session_id"] == "fake:c"  # the resolved id is written onto it
        await until(lambda: len(fake.sent) == 1)
    assert fake.replies() == ["reply to x"]
    assert fake.sent[0].session_id == "fake:c"


@pytest.mark.anyio
async def test_steering_left_over_after_a_turn_becomes_a_follow_up(setup: Setup) -> None:
    gate = anyio.Event()
    setup.policy.save_gates["a"] = gate  # the turn is still running after its last step
    setup.policy.decisions["late"] = AdmitDecision.steer()
    fake = FakeChannel()
    async with setup.serving({"fake": fake}) as manager:
        await manager.receive(message("a"))
        await until(lambda: len(setup.model.calls) == 1)
        await manager.receive(message("late"))
        assert manager.snapshot("s1").steering_count == 1
        gate.set()
        await until(lambda: len(fake.sent) == 2)
    assert fake.replies() == ["reply to a", "reply to late"]
    assert len(setup.model.calls) == 2


@pytest.mark.anyio
@pytest.mark.parametrize("failure", [RuntimeError("policy broke"), "not a decision"])
async def test_a_failing_admit_hook_fails_open(setup: Setup, failure: Any) -> None:
    setup.policy.decisions["m"] = failure  # raised, or returned (the framework's TypeError)
    fake = FakeChannel()
    async with setup.serving({"fake": fake}) as manager:
        await manager.receive(message("m"))
        await until(lambda: len(fake.replies()) == 1)
    assert fake.replies() == ["reply to m"]
    stages = [(stage, get_field(msg, "content")) for stage, _, msg in setup.policy.errors]
    assert stages == [("admit_message", "m")]
    error = setup.policy.errors[0][1]
    assert isinstance(error, RuntimeError if not isinstance(failure, str) else TypeError)


@pytest.mark.anyio
async def test_an_unknown_action_is_processed_with_a_warning(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    odd = AdmitDecision.process()
    object.__setattr__(odd, "action", "later")
    setup.policy.decisions["m"] = odd
    fake = FakeChannel()
    async with setup.serving({"fake": fake}) as manager:
        await manager.receive(message("m"))
        await until(lambda: len(fake.sent) == 1)
    assert fake.replies() == ["reply to m"]
    assert "channel.unknown_admit_action action='later'" in caplog.text


@pytest.mark.anyio
async def test_a_resolve_session_failure_drops_the_message(setup: Setup) -> None:
    setup.policy.bad_sessions.add("lost")
    fake = FakeChannel()
    async with setup.serving({"fake": fake}) as manager:
        await manager.receive(message("lost"))
        await manager.receive(message("fine"))
        await until(lambda: len(fake.sent) == 2)
    assert [stage for stage, _, _ in setup.policy.errors] == ["resolve_session"]
    assert [content for content, _ in setup.policy.admitted] == ["fine"]
    assert fake.replies() == ["reply to fine"]
    error = next(m for m in fake.sent if get_field(m, "kind") == "error")
    assert "resolve_session" in error.content  # the builtin on_error told the channel
    assert setup.model.calls == [["fine"]]


@pytest.mark.anyio
async def test_an_over_long_session_or_chat_id_is_refused_at_admission(setup: Setup) -> None:
    fake = FakeChannel()
    async with setup.serving({"fake": fake}) as manager:
        await manager.receive(message("long chat", session=None, chat_id="c" * 257))
        await manager.receive(message("long session", session="s" * 300))
        await manager.receive(message("at the cap", session="s" * 256))
        await until(lambda: len(fake.sent) == 3)
    assert [stage for stage, _, _ in setup.policy.errors] == ["resolve_session"] * 2
    assert [error.message for _, error, _ in setup.policy.errors] == [
        "chat_id of a message on channel 'fake' is 257 characters long; at most 256 are "
        "accepted (MAX_SESSION_ID_LENGTH): send a shorter chat_id, for example a hash of "
        "the long one",
        "session_id of a message on channel 'fake' is 300 characters long; at most 256 are "
        "accepted (MAX_SESSION_ID_LENGTH): send a shorter session_id, for example a hash of "
        "the long one",
    ]
    assert [content for content, _ in setup.policy.admitted] == ["at the cap"]
    assert setup.model.calls == [["at the cap"]]
    errors = [m.content for m in fake.sent if get_field(m, "kind") == "error"]
    assert len(errors) == 2 and all("stage 'resolve_session'" in e for e in errors)


@pytest.mark.anyio
async def test_messages_from_unknown_channels_or_a_stopped_manager_are_dropped(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeChannel()
    manager = ChannelManager(setup.framework, {"fake": fake})
    await manager.receive(message("early"))
    async with setup.serving({"fake": fake}) as manager:
        await manager.receive(message("stray", channel="elsewhere"))
        await manager.receive(message("ok"))
        await until(lambda: len(fake.sent) == 1)
    assert fake.replies() == ["reply to ok"]
    assert "reason=not running" in caplog.text and "reason=unknown" in caplog.text


# -- routing and streams -----------------------------------------------------------------


@pytest.mark.anyio
async def test_outbound_goes_to_its_output_channel_and_streams_to_it(setup: Setup) -> None:
    a, b = FakeChannel("a"), FakeChannel("b")
    async with setup.serving({"a": a, "b": b}) as manager:
        assert setup.framework.router is manager
        await manager.receive(message("to b", channel="a", output_channel="b"))
        await until(lambda: len(b.sent) == 1)
        await manager.receive(message("to a", channel="a"))
        await until(lambda: len(a.sent) == 1)
        assert await manager.dispatch({"content": "x", "channel": "nowhere"}) is False
        assert await manager.dispatch({"content": "plain", "channel": "b"}) is True
    assert setup.framework.router is None
    assert a.replies() == ["reply to to a"]
    assert b.replies() == ["reply to to b", "plain"]
    sent = b.sent[0]
    assert isinstance(sent, ChannelMessage)
    assert (sent.session_id, sent.channel, sent.chat_id, sent.output_channel, sent.kind) == (
        "s1", "a", "c", "b", "normal")
    assert b.sent[1].session_id == "b:default"  # rebuilt with the router's defaults
    assert b.wrapped == ["to b"] and a.wrapped == ["to a"]  # the output channel's stream
    assert "text" in b.seen_events and "final" in b.seen_events


@pytest.mark.anyio
async def test_without_stream_output_channels_do_not_wrap(setup: Setup) -> None:
    fake = FakeChannel()
    async with setup.serving({"fake": fake}, stream_output=False) as manager:
        await manager.receive(message("quiet"))
        await until(lambda: len(fake.sent) == 1)
    assert fake.wrapped == []
    assert fake.replies() == ["reply to quiet"]


# -- running and shutdown ----------------------------------------------------------------


@pytest.mark.anyio
async def test_shutdown_lets_the_running_turn_finish_then_stops_channels_in_reverse(
    setup: Setup,
) -> None:
    log: list[Any] = []
    first, second = FakeChannel("first", log), FakeInterface("second", log)
    model = setup.model
    manager = ChannelManager(setup.framework, {"first": first, "second": second},
                             enabled_channels="first,second")
    stop = anyio.Event()
    async with setup.framework.running(), anyio.create_task_group() as task_group:
        await task_group.start(manager.run, stop)
        assert manager.accepting
        await manager.receive(message("wait:a", channel="first"))
        with anyio.fail_after(10):
            await model.started("wait:a").wait()
        stop.set()
        await until(lambda: not manager.accepting)
        await manager.receive(message("too late", channel="first"))
        await anyio.sleep(0.05)
        assert ("stop", "second") not in log  # still waiting for the turn
        model.gate("wait:a").set()
    # Channels start concurrently (in any order); they stop newest first, after the turn.
    assert sorted(log[:2]) == [("start", "first"), ("start", "second")]
    assert log[2:] == [("send", "first", "reply to wait:a"), ("stop", "second"), ("stop", "first")]
    assert setup.framework.router is None
    assert "too late" not in str(model.calls)


@pytest.mark.anyio
async def test_shutdown_cancels_turns_that_outlive_the_timeout(setup: Setup) -> None:
    log: list[Any] = []
    fake = FakeChannel("fake", log)
    with anyio.fail_after(10):
        async with setup.serving({"fake": fake}, shutdown_timeout=0.1) as manager:
            await manager.receive(message("wait:forever"))
            await setup.model.started("wait:forever").wait()
    assert fake.sent == []
    assert log == [("start", "fake"), ("stop", "fake")]
    assert manager.busy_sessions() == []


@pytest.mark.anyio
async def test_quit_session_cancels_its_turns_and_forgets_its_queue(setup: Setup) -> None:
    setup.policy.decisions["queued"] = AdmitDecision.follow_up()
    fake = FakeChannel(steer_when_running=True)
    async with setup.serving({"fake": fake}) as manager:
        await manager.receive(message("wait:a"))
        await setup.model.started("wait:a").wait()
        await manager.receive(message("queued"))
        await manager.receive(message("steered"))
        assert manager.busy_sessions() == ["s1"]
        assert manager.snapshot("s1").steering_count == 1
        assert await manager.quit_session("s1") == 1
        # The cancelled turn is still unwinding: it takes no more messages.
        assert manager.snapshot("s1") == TurnSnapshot("s1")
        assert manager.busy_sessions() == []
        await manager.receive(message("next"))
        await until(lambda: len(fake.sent) == 1)
    assert fake.replies() == ["reply to next"]
    assert "queued" not in str(setup.model.calls) and "steered" not in str(setup.model.calls)


@pytest.mark.parametrize("finishing_hook", ["save_state", "dispatch_outbound"])
@pytest.mark.anyio
async def test_a_turn_past_its_answer_is_not_unanswered_and_may_be_left_to_finish(
        setup: Setup, finishing_hook: str) -> None:
    """Once its model stream ended, a turn is only finishing (here a plugin's `save_state`,
    or its `dispatch_outbound` after the channel's): `unanswered_sessions` leaves it out
    until a follow-up queues, and `quit_session(keep_answered=True)` lets it finish."""
    setup.policy.decisions["queued"] = AdmitDecision.follow_up()
    finishing, release, finished = anyio.Event(), anyio.Event(), []

    async def finish(name: str) -> None:
        finishing.set()
        await release.wait()
        finished.append(name)

    class SlowSave:
        @hookimpl
        async def save_state(self) -> None:
            await finish("save_state")

    class SlowDispatch:
        @hookimpl(trylast=True)
        async def dispatch_outbound(self) -> bool:
            await finish("dispatch_outbound")
            return True

    slow = SlowSave() if finishing_hook == "save_state" else SlowDispatch()
    setup.framework.registry.register(slow, name="slow")
    fake = FakeChannel()
    async with setup.serving({"fake": fake}) as manager:
        await manager.receive(message("wait:a"))
        await setup.model.started("wait:a").wait()
        assert manager.unanswered_sessions() == ["s1"]  # its model is still running
        setup.model.gate("wait:a").set()
        await finishing.wait()
        assert manager.busy_sessions() == ["s1"] and manager.unanswered_sessions() == []
        await manager.receive(message("queued"))
        assert manager.unanswered_sessions() == ["s1"]  # the follow-up is not answered
        assert await manager.quit_session("s1", keep_answered=True) == 0
        assert manager.unanswered_sessions() == []
        release.set()
        await until(lambda: manager.busy_sessions() == [])
    assert finished == [finishing_hook] and fake.replies() == ["reply to wait:a"]
    assert "queued" not in str(setup.model.calls)


@pytest.mark.anyio
async def test_an_outbound_sent_from_outside_a_turn_answers_none(setup: Setup) -> None:
    """A message a plugin sends to the session from a task of its own (a reminder, say)
    while the turn's model still runs leaves the turn unanswered: Ctrl-C still cancels
    it. Its own reply answers it."""
    fake = FakeChannel()
    async with setup.serving({"fake": fake}) as manager:
        await manager.receive(message("wait:a"))
        await setup.model.started("wait:a").wait()
        assert await manager.dispatch(message("a reminder"))
        assert manager.unanswered_sessions() == ["s1"]
        setup.model.gate("wait:a").set()
        await until(lambda: manager.busy_sessions() == [])
    assert fake.replies() == ["a reminder", "reply to wait:a"]


@pytest.mark.anyio
async def test_a_failing_channel_stops_the_manager_with_a_clear_error(setup: Setup) -> None:
    log: list[Any] = []

    class Broken(FakeChannel):
        async def start(self, stop_event: StopEvent) -> None:
            raise OSError("address already in use")

    channels = {"good": FakeChannel("good", log), "bad": Broken("bad", log)}
    manager = ChannelManager(setup.framework, channels)
    async with setup.framework.running():
        with pytest.raises(RuntimeError, match="channel 'bad' failed: address already in use"):
            await manager.run(anyio.Event())
    assert log == [("start", "good"), ("stop", "bad"), ("stop", "good")]  # every started one
    assert setup.framework.router is None


# -- the cli channel -------------------------------------------------------------------


@pytest.mark.anyio
async def test_cli_channel_end_to_end_on_text_streams(setup: Setup) -> None:
    out = io.StringIO()
    manager = ChannelManager(setup.framework, enabled_channels="cli")
    cli = manager.channels["cli"]
    assert isinstance(cli, CliChannel)
    cli.configure(session_id="term", input=io.StringIO("hello\n\n/quit\n"), output=out)
    stop = anyio.Event()
    with anyio.fail_after(10):
        async with setup.framework.running():
            await manager.run(stop)  # /quit sets the stop event; the turn still finishes
    text = out.getvalue()
    assert stop.is_set() and cli.quit_requested
    assert text.startswith("you> hello\n")
    assert "reply to hello\n" in text
    assert "\x1b" not in text  # no indicators or colours when the output is not a terminal
    assert cli.session_ids == {"term"}


@pytest.mark.anyio
async def test_cli_channel_shows_progress_tools_and_errors() -> None:
    out = io.StringIO()
    cli = CliChannel(lambda message: None, output=out, interactive=True)
    cli.ending.closed = False
    call = ToolCallSpec("call-1", "shell", '{"command": "ls"}').to_dict()

    async def source() -> AsyncIterator[StreamEvent]:
        yield StreamEvent("text", {"delta": "Looking"})
        yield StreamEvent("tool_call", {"tool_calls": [call]})
        yield StreamEvent("tool_result", {"tool_results": []})
        yield StreamEvent("text", {"delta": "\n\nDone."})

    inbound = {"content": "list", "channel": "cli", "session_id": "s"}
    kinds = [event.kind async for event in cli.stream_events(inbound, AsyncStreamEvents(source()))]
    assert kinds == ["text", "tool_call", "tool_result", "text"]
    await cli.send({"content": "Looking\n\nDone.", "session_id": "s", "kind": "normal"})
    await cli.send({"content": "boom", "session_id": "s", "kind": "error"})
    text = out.getvalue()
    assert text.index("\x1b[2m…thinking") < text.index("\r\x1b[KLooking")  # cleared first
    assert "\x1b[36m[tool] shell {\"command\": \"ls\"}\x1b[0m\n" in text
    assert "…running shell" in text
    assert text.count("Done.") == 1  # streamed text is not printed again
    assert "\x1b[31merror: boom\x1b[0m\n" in text
    assert text.endswith("you> ")

    # A line that is not steered waits for the running turn; idle, follow_up runs it now.
    for snapshot in (TurnSnapshot("s", running_count=1), TurnSnapshot("s")):
        decision = await cli.admit_message("s", inbound, snapshot)
        assert decision is not None and decision.action == "follow_up"
