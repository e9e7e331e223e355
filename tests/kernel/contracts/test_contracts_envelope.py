"""Envelope helpers on mappings and attribute objects, MediaItem and ChannelMessage."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from types import MappingProxyType, SimpleNamespace

import pytest

from hookline.kernel.envelope import (
    ChannelMessage,
    MediaItem,
    context_str,
    default_session_id,
    envelope_content,
    get_field,
    set_field,
)


@dataclass(frozen=True)
class FrozenEnvelope:
    content: str = "hi"


class SlotsEnvelope:
    __slots__ = ("content",)

    def __init__(self) -> None:
        self.content = "x"


def test_get_field_reads_mappings_and_attributes() -> None:
    assert get_field({"channel": "cli"}, "channel") == "cli"
    assert get_field({"channel": "cli"}, "chat_id", "default") == "default"
    assert get_field(MappingProxyType({"a": 1}), "a") == 1
    obj = SimpleNamespace(channel="tg")
    assert get_field(obj, "channel") == "tg"
    assert get_field(obj, "missing") is None
    assert get_field(obj, "missing", 5) == 5
    # A mapping's attributes are not its fields.
    assert get_field({}, "items") is None


def test_set_field_writes_or_reports_refusal() -> None:
    data: dict[str, object] = {}
    assert set_field(data, "session_id", "s") is True
    assert data == {"session_id": "s"}
    obj = SimpleNamespace()
    assert set_field(obj, "context", {"a": 1}) is True
    assert obj.context == {"a": 1}
    assert set_field(FrozenEnvelope(), "content", "new") is False
    assert set_field(MappingProxyType({}), "content", "new") is False
    assert set_field(SlotsEnvelope(), "context", {}) is False
    assert set_field("a string", "content", "x") is False


def test_envelope_content() -> None:
    assert envelope_content({"content": "hello"}) == "hello"
    assert envelope_content({"content": None}) == ""
    assert envelope_content({}) == ""
    assert envelope_content(SimpleNamespace(content=42)) == "42"
    assert envelope_content(object()) == ""


@pytest.mark.parametrize(
    ("envelope", "expected"),
    [
        ({"session_id": "abc", "channel": "cli"}, "abc"),
        ({"session_id": 7}, "7"),
        ({"channel": "telegram", "chat_id": 42}, "telegram:42"),
        ({"channel": "cli"}, "cli:default"),
        ({"chat_id": "c1"}, "default:c1"),
        ({}, "default:default"),
        ({"session_id": None, "channel": "x", "chat_id": None}, "x:default"),
        # A blank id would merge unrelated conversations: fall back instead (contract 6).
        ({"session_id": "", "channel": "cli", "chat_id": "1"}, "cli:1"),
        ({"session_id": "   "}, "default:default"),
        (SimpleNamespace(channel="slack", chat_id="C9"), "slack:C9"),
        (object(), "default:default"),
    ],
)
def test_default_session_id(envelope: object, expected: str) -> None:
    assert default_session_id(envelope) == expected


def test_context_str_skips_private_keys() -> None:
    assert context_str({"channel": "$cli", "_secret": 1, "model": "a:b"}) == (
        "channel=$cli|model=a:b"
    )
    assert context_str({}) == ""


def test_media_item_data_url() -> None:
    remote = MediaItem("image", "image/png", url="https://example.com/a.png", data=b"x")
    assert remote.data_url() == "https://example.com/a.png"
    inline = MediaItem("document", "application/pdf", filename="a.pdf", data=b"%PDF")
    assert inline.data_url() == "data:application/pdf;base64," + base64.b64encode(b"%PDF").decode(
        "ascii"
    )
    assert MediaItem("audio", "audio/ogg").data_url() is None
    with pytest.raises(ValueError, match=r"MediaItem\.type"):
        MediaItem("sticker", "image/webp")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        inline.url = "x"  # type: ignore[misc]


def test_channel_message_defaults_and_context() -> None:
    caller_context = {"thread_id": "t1", "_private": True}
    message = ChannelMessage("s1", "telegram", "hello", chat_id="42", context=caller_context)
    assert message.output_channel == "telegram"
    assert message.is_active is False
    assert message.kind == "normal"
    assert message.media == []
    assert message.lifespan is None
    assert message.context == {
        "channel": "$telegram",
        "chat_id": "42",
        "thread_id": "t1",
        "_private": True,
    }
    assert caller_context == {"thread_id": "t1", "_private": True}
    assert message.context_str == "channel=$telegram|chat_id=42|thread_id=t1"
    assert default_session_id(message) == "s1"
    assert envelope_content(message) == "hello"
    message.session_id = "changed"
    assert set_field(message, "context", {}) is True


def test_channel_message_explicit_values_win() -> None:
    message = ChannelMessage("s", "cli", "hi", output_channel="web", context={"channel": "$custom"})
    assert message.output_channel == "web"
    assert message.context["channel"] == "$custom"
    assert message.context["chat_id"] == "default"
    other = ChannelMessage("s", "cli", "hi")
    assert other.context is not message.context
