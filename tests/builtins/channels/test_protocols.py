"""The protocols the command line asks of channels (`builtins/channels/protocols.py`): the
builtin channels have their shapes (mypy checks the same beside each class), and
`CliChannel.configure` takes exactly its constructor's keyword options."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from hookline.builtins.channels import ChatChannel, CliChannel, HttpChannel, ListenerChannel
from hookline.builtins.channels.cli.options import option_names


async def nowhere(message: Any) -> None:
    return None


def test_the_cli_channel_is_what_hookline_chat_talks_through() -> None:
    channel: ChatChannel = CliChannel(nowhere, chat_id="room", model="offline")
    assert isinstance(channel, ChatChannel)
    assert not isinstance(channel, ListenerChannel)
    assert (channel.name, channel.chat_id, channel.model, list(channel.unanswered)) == (
        "cli", "room", "offline", [])
    channel.status_note = "context 3% of 100,000"
    channel.configure(model="other")
    assert channel.model == "other"


def test_the_http_channel_listens_for_the_gateway_and_is_no_chat_channel() -> None:
    channel: ListenerChannel = HttpChannel(nowhere, host="127.0.0.1", port=0)
    assert isinstance(channel, ListenerChannel)
    assert not isinstance(channel, ChatChannel)
    channel.configure_listener("::1", None, True)
    assert isinstance(channel, HttpChannel)
    listener = channel.listener
    assert (listener.host, listener.port, listener.allow_remote) == ("::1", 0, True)


def test_configure_takes_exactly_the_constructor_s_keyword_options() -> None:
    parameters = inspect.signature(CliChannel.__init__).parameters.values()
    keywords = {p.name for p in parameters if p.kind is p.KEYWORD_ONLY}
    assert keywords == option_names()
    with pytest.raises(TypeError, match=r"unknown option\(s\) colour"):
        CliChannel(nowhere).configure(colour=True)
