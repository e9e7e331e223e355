"""Prompt content conversion with real republic media."""

from __future__ import annotations

import base64
import builtins
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
import republic

from hookline.kernel.errors import ErrorKind, HooklineError
from hookline.kernel.prompt import is_media, prompt_text, to_content, to_legacy_prompt

PNG = b"\x89PNG\r\n\x1a\n\x00binary"


def image() -> republic.Image:
    return republic.image(PNG, media_type="image/png")


def test_string_and_text_only_lists() -> None:
    assert to_content("hello") == ["hello"]
    assert to_content([]) == []
    assert to_legacy_prompt([]) == ""
    assert to_legacy_prompt(["a", "b"]) == "a\nb"
    assert to_content([{"type": "text", "text": "a"}, "b"]) == ["a", "b"]
    # Text-only content collapses into one string on the way out.
    assert to_content(to_legacy_prompt(["a", "b"])) == ["a\nb"]


def test_round_trip_with_inline_and_remote_media() -> None:
    audio = republic.audio("https://example.com/clip.mp3")
    video = republic.video(b"\x00\x01", media_type="video/mp4")
    content = ["look", image(), audio, "and", video]
    legacy = to_legacy_prompt(content)
    assert legacy == [
        {"type": "text", "text": "look"},
        {
            "type": "image",
            "media_type": "image/png",
            "url": "data:image/png;base64," + base64.b64encode(PNG).decode("ascii"),
        },
        {"type": "audio", "media_type": "audio/mpeg", "url": "https://example.com/clip.mp3"},
        {"type": "text", "text": "and"},
        {"type": "video", "media_type": "video/mp4", "url": "data:video/mp4;base64,AAE="},
    ]
    back = to_content(legacy)
    assert back == content
    assert isinstance(back[1], republic.Image) and back[1].data == PNG and back[1].url is None
    assert isinstance(back[2], republic.Audio) and back[2].data is None
    assert isinstance(back[4], republic.Video)
    assert to_legacy_prompt(back) == legacy


def test_republic_dict_form_with_base64_data() -> None:
    message = republic.user("caption", image())
    blocks = message.to_dict()["content"]
    assert to_content(blocks) == ["caption", image()]


def test_media_objects_pass_through_unchanged() -> None:
    media = image()
    content = to_content(["x", media])
    assert content[1] is media


def test_prompt_text_keeps_only_strings() -> None:
    assert prompt_text(["a", image(), "b"]) == "a\nb"
    assert prompt_text([image()]) == ""
    assert prompt_text("plain") == "plain"


def test_non_base64_data_url() -> None:
    block = {
        "type": "image",
        "url": "data:image/svg+xml,%3Csvg%2F%3E",
        "media_type": "image/svg+xml",
    }
    (media,) = to_content([block])
    assert media.data == b"<svg/>"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (42, "Expected user content, text, or a list of content blocks."),
        (None, "Expected user content, text, or a list of content blocks."),
        (("tuple",), "Expected user content, text, or a list of content blocks."),
        (["ok", 3.5], "Unsupported prompt content: float"),
        ([{"type": "image_url", "image_url": {"url": "x"}}], "image_url"),
        ([{"type": "reasoning", "text": "hmm"}], "reasoning"),
        ([{"type": "provider_data", "api_format": "x", "payload": {}}], "provider_data"),
        ([{"text": "no type"}], "None"),
        ([{"type": "image", "media_type": "image/png"}], "url"),
        ([{"type": "audio", "url": "https://example.com/a.mp3"}], "media_type"),
        (
            [{"type": "image", "media_type": "image/png", "url": "data:image/png;base64,@@"}],
            "base64",
        ),
        ([{"type": "text", "text": 5}], "text"),
    ],
)
def test_invalid_content_raises_invalid_input(value: Any, message: str) -> None:
    with pytest.raises(HooklineError) as caught:
        to_content(value)
    assert caught.value.kind is ErrorKind.invalid_input
    assert message in caught.value.message


def test_legacy_conversion_rejects_unknown_items() -> None:
    with pytest.raises(HooklineError) as caught:
        to_legacy_prompt(["a", {"type": "text", "text": "b"}])  # type: ignore[list-item]
    assert caught.value.kind is ErrorKind.invalid_input
    assert caught.value.message == "Unsupported prompt content: dict"


@dataclass(frozen=True)
class FakeImage:
    """Shaped like republic media without being republic."""

    kind: ClassVar[str] = "image"
    media_type: str
    data: bytes | None = None
    url: str | None = None

    @property
    def data_url(self) -> str:
        if self.url is None:
            raise ValueError("no url")
        return self.url


def test_media_detected_by_shape() -> None:
    fake = FakeImage("image/gif", url="https://example.com/x.gif")
    assert is_media(fake)
    assert is_media(FakeImage("image/gif"))  # reading data_url would raise; not needed
    assert not is_media("image")
    assert not is_media({"kind": "image", "media_type": "x", "data_url": "y"})
    assert to_content([fake]) == [fake]
    assert to_legacy_prompt([fake]) == [
        {"type": "image", "media_type": "image/gif", "url": "https://example.com/x.gif"}
    ]


def test_media_block_without_republic_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def refuse_republic(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "republic" or name.startswith("republic."):
            raise ImportError("No module named 'republic'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "republic")
    monkeypatch.setattr(builtins, "__import__", refuse_republic)
    assert to_content(["text only", {"type": "text", "text": "fine"}]) == ["text only", "fine"]
    block = {"type": "image", "media_type": "image/png", "url": "https://example.com/a.png"}
    with pytest.raises(HooklineError) as caught:
        to_content([block])
    assert caught.value.kind is ErrorKind.config
    assert "republic" in caught.value.message
