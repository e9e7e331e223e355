"""`hookline chat` talks to its channel through `ChatChannel` (and leaves out the
`ListenerChannel`s, the gateway's): a plugin's own `cli` channel of that shape, which has
nothing of the builtin `CliChannel`, is configured with the chat's commands, says the
banner, and its unanswered lines set the exit status; Ctrl-C tells the channel whatever it
is, and a channel that is no chat channel is told without failing."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anyio
import pytest

from hookline.builtins.channels import ChatChannel
from hookline.cli.chat import _handle_interrupts, run_chat
from hookline.kernel import hookimpl
from hookline.kernel.channels import Channel, Interface, Lifecycle, MessageHandler, StopEvent
from hookline.kernel.envelope import get_field
from hookline.testing import FrameworkFactory

pytestmark = pytest.mark.anyio


class StandIn(Interface):
    """A chat channel of a plugin's own: sends one line, and stops once it is answered."""

    name = "cli"

    def __init__(self, handler: MessageHandler, unanswered: Iterable[str] = ()) -> None:
        self.handler = handler
        self.chat_id = "default"
        self.model: str | None = None
        self.status_note = ""
        self.unanswered = list(unanswered)
        self.options: dict[str, Any] = {}
        self.said: list[str] = []
        self.replies: list[Any] = []
        self.cancelled: list[list[str]] = []

    def configure(self, **options: Any) -> None:
        self.options.update(options)

    def say(self, text: str) -> None:
        self.said.append(text)

    def attach(self, text: str, media: list[Any]) -> None:
        raise AssertionError("nothing is attached here")

    def turns_cancelled(self, session_ids: Iterable[str]) -> None:
        self.cancelled.append(list(session_ids))

    async def start(self, stop_event: StopEvent) -> None:
        self._answered = anyio.Event()
        await self.handler({"content": "hello", "channel": self.name,
                            "chat_id": self.chat_id,
                            "session_id": self.options["session_id"]})
        with anyio.fail_after(10):
            await self._answered.wait()
        stop_event.set()  # type: ignore[attr-defined]

    async def stop(self) -> None:
        return None

    async def send(self, message: Any) -> None:
        self.replies.append(message)
        self._answered.set()


class Listening(Lifecycle):
    """A background channel that listens for the gateway's clients (`ListenerChannel`)."""

    name = "listening"

    def __init__(self) -> None:
        self.started = False

    def configure_listener(self, host: str | None, port: int | None,
                           allow_remote: bool | None) -> None:
        return None

    async def start(self, stop_event: StopEvent) -> None:
        self.started = True

    async def stop(self) -> None:
        return None


class Background(Listening):
    """A background channel like a scheduler: it runs beside the chat."""

    name = "background"
    configure_listener = None  # type: ignore[assignment]


class Provider:
    def __init__(self, unanswered: Iterable[str] = ()) -> None:
        self.unanswered = list(unanswered)
        self.channels: dict[str, Any] = {}

    @hookimpl
    def provide_channels(self, message_handler: MessageHandler) -> list[Channel]:
        self.channels = {"cli": StandIn(message_handler, self.unanswered),
                         "listening": Listening(), "background": Background()}
        return list(self.channels.values())


@pytest.mark.parametrize(("unanswered", "status"), [((), 0), (("lost line",), 1)])
async def test_a_plugin_s_chat_channel_is_talked_to_through_the_protocol(
        hookline_framework: FrameworkFactory, monkeypatch: pytest.MonkeyPatch,
        unanswered: tuple[str, ...], status: int) -> None:
    monkeypatch.setenv("HOOKLINE_MODEL", "offline")
    provider = Provider(unanswered)
    framework = hookline_framework(provider, settings={"model": "offline"})
    assert await run_chat(framework, "shape", None) == status
    chat = provider.channels["cli"]
    assert isinstance(chat, ChatChannel)
    assert chat.options["session_id"] == "shape"
    assert {"new", "model", "attach"} <= {command.name for command in chat.options["commands"]}
    assert chat.said[0].startswith("hookline chat - model offline - session ")
    [reply] = chat.replies
    assert str(get_field(reply, "content")).startswith('[offline model] You said: "hello"')
    assert provider.channels["background"].started
    assert not provider.channels["listening"].started  # the gateway's, never the chat's


class Signals:
    """Stands in for anyio's signal receiver: these signals, then none."""

    def __init__(self, *signums: int) -> None:
        self.signums = signums

    def __enter__(self) -> AsyncIterator[int]:
        return self._each()

    def __exit__(self, *exc: object) -> None:
        return None

    async def _each(self) -> AsyncIterator[int]:
        for signum in self.signums:
            yield signum


class BusyManager:
    def __init__(self) -> None:
        self.quit: list[str] = []
        self.framework = None  # what a forced exit asks for its background processes

    def unanswered_sessions(self) -> list[str]:
        return ["s1"]

    async def quit_session(self, session_id: str, reason: str = "", *,
                           keep_answered: bool = False) -> int:
        self.quit.append(session_id)
        return 1


async def test_ctrl_c_tells_a_chat_channel_and_spares_any_other(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(anyio, "open_signal_receiver",
                        lambda *signals: Signals(signal.SIGINT))
    chat = StandIn(lambda message: None)  # type: ignore[arg-type, return-value]
    plain = Background()
    for channel in (chat, plain):
        manager = BusyManager()
        await _handle_interrupts(manager, channel, anyio.Event(), [],  # type: ignore[arg-type]
                                 print)
        assert manager.quit == ["s1"]
    assert chat.cancelled == [["s1"]]
