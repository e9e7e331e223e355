"""The builtin plugin's defaults of the turn hooks: session state and prompt, outbound and
error messages, history in the home store, and envelope media (see test_builtin_plugin.py)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from builtin_plugin_support import SESSION, build, builtin_of, entries_of, texts
from builtin_support import model_of
from builtin_support import write_script as write_turns

from hookline.builtins.agent.compaction import OPENING_NOTE
from hookline.builtins.config import Settings
from hookline.builtins.config.limits import CONTEXT_WINDOW
from hookline.builtins.plugin import BuiltinPlugin
from hookline.builtins.store import SQLiteTapeStore
from hookline.builtins.tape.naming import session_tape_name
from hookline.builtins.tape.tape import Tape
from hookline.kernel import Framework, hookimpl
from hookline.kernel.envelope import ChannelMessage, MediaItem
from hookline.kernel.prompt import is_media, to_content
from hookline.kernel.tape import LAST_ANCHOR, TapeContext

PNG = b"\x89PNG\r\n\x1a\n-not-really-a-png"


PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode("ascii")


def write_script(path: Path, *texts: str) -> str:
    return write_turns(path, [{"text": text} for text in texts])


# -- defaults of the turn hooks -------------------------------------------------------------


@pytest.mark.anyio
async def test_session_state_and_prompt_defaults(workspace: Path) -> None:
    framework, _ = build(workspace)
    envelope = {"session_id": "  ", "channel": "cli", "chat_id": "c1", "content": "hi",
                "context": {"model": "offline", "thread_id": "t-9", "user": "ann",
                            "_secret": "x"}}
    session_id = await framework.resolve_session(envelope)
    assert session_id == "cli:c1", "a blank session_id is ignored"
    state = await framework.build_state(envelope, session_id)
    assert state["session_id"] == "cli:c1"
    assert state["context"] == "user=ann", "the turn's settings are not message words"
    assert state["model"] == "offline"
    assert state["_runtime_thread_id"] == "t-9"
    assert state["_runtime_workspace"] == str(workspace.resolve())
    prompt = await framework.build_prompt(envelope, session_id, state)
    assert prompt == ["[user=ann] hi"]


@pytest.mark.anyio
async def test_render_outbound_shape(workspace: Path) -> None:
    framework, _ = build(workspace, replies=("answer",))
    message = ChannelMessage(session_id=SESSION, channel="telegram", content="hi",
                             chat_id="42", output_channel="relay", kind="command")
    async with framework.running():
        result = await framework.process_inbound(message)
    assert result.outbounds == [{
        "session_id": SESSION, "channel": "telegram", "chat_id": "42", "content": "answer",
        "output_channel": "relay", "kind": "command",
    }]


@pytest.mark.anyio
async def test_dispatch_outbound_forwards_to_the_bound_router(workspace: Path) -> None:
    framework, _ = build(workspace, replies=("answer",))
    sent: list[Any] = []

    class Router:
        async def dispatch(self, message: Any) -> bool:
            sent.append(message)
            return True

        def wrap_stream(self, inbound: Any, stream: Any) -> Any:
            return stream

    framework.router = Router()
    async with framework.running():
        result = await framework.process_inbound({"content": "hi", "session_id": SESSION})
    assert sent == result.outbounds


@pytest.mark.anyio
async def test_on_error_sends_an_error_message_through_the_router(workspace: Path) -> None:
    framework, _ = build(workspace)
    sent: list[Any] = []

    class Router:
        async def dispatch(self, message: Any) -> bool:
            sent.append(message)
            return True

    framework.router = Router()
    envelope = {"content": "hi", "channel": "cli", "chat_id": "c1"}
    await framework.notify_error("turn", RuntimeError("boom"), envelope)
    await framework.notify_error("turn", RuntimeError("no message"), None)
    assert sent == [{
        "session_id": "cli:c1", "channel": "cli", "chat_id": "c1", "output_channel": "cli",
        "kind": "error", "content": "An error occurred at stage 'turn': boom",
    }]


class OutboundLog:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    @hookimpl
    def dispatch_outbound(self, message: Any) -> bool:
        self.sent.append(message)
        return True


@pytest.mark.anyio
async def test_on_error_dispatches_the_error_message_to_every_dispatch_outbound(
    workspace: Path,
) -> None:
    """The builtin on_error dispatches an error envelope through
    dispatch_outbound whenever a message is given; a plugin delivering outbounds itself
    (no channel router bound) must receive it too."""
    log = OutboundLog()
    framework, _ = build(workspace, log)
    envelope = {"content": "hi", "channel": "webhook", "chat_id": "c1"}
    await framework.notify_error("turn", RuntimeError("boom"), envelope)
    assert [(m["kind"], m["content"]) for m in log.sent] == [
        ("error", "An error occurred at stage 'turn': boom")
    ]


@pytest.mark.anyio
async def test_the_terminal_s_error_names_the_endpoint_a_remote_channel_s_does_not(
        workspace: Path) -> None:
    """The endpoint (`api_base`) is the operator's: hidden from a remote channel's user,
    shown in the terminal of the person who set it."""
    log = OutboundLog()
    framework, _ = build(workspace, log, api_base="http://10.0.0.7:8000/v1")
    failure = RuntimeError("connection failed talking to http://10.0.0.7:8000/v1")
    for channel in ("cli", "webhook"):
        await framework.notify_error("run_model", failure, {"content": "hi",
                                                            "channel": channel})
    assert [m["content"].rsplit(": ", 1)[1] for m in log.sent] == [
        "connection failed talking to http://10.0.0.7:8000/v1",
        "connection failed talking to <api_base>"]


@pytest.mark.anyio
@pytest.mark.parametrize(("api_base", "said"), [
    ("http://admin:pw@10.0.0.7:8000/v1", "http://***@10.0.0.7:8000/v1"),
    ("http://10.0.0.7:8000/v1?api-key=QUERYSECRET", "http://10.0.0.7:8000/v1?api-key=***")])
async def test_an_endpoint_with_credentials_is_hidden_in_its_masked_form_too(
        workspace: Path, api_base: str, said: str) -> None:
    """The provider's error already masked the password or token of the address: that
    form is the operator's address all the same."""
    log = OutboundLog()
    framework, _ = build(workspace, log, api_base=api_base)
    for text in (api_base, said):
        await framework.notify_error("run_model", RuntimeError(f"failed talking to {text}"),
                                     {"content": "hi", "channel": "webhook"})
    assert [m["content"].rsplit(": ", 1)[1] for m in log.sent] == [
        "failed talking to <api_base>"] * 2


# -- the durable store and history -----------------------------------------------------------


@pytest.mark.anyio
async def test_history_survives_scopes_and_restarts_in_the_home_store(
    workspace: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = write_script(workspace.parent / "turns.json", "first answer", "second answer")
    monkeypatch.setenv("HOOKLINE_MODEL", spec)

    first = Framework(workspace)
    first.load_hooks()
    async with first.running():
        await first.process_inbound({"content": "my name is Ada", "session_id": SESSION})
    async with first.running():  # a second scope on the same framework
        await first.process_inbound({"content": "what is my name?", "session_id": SESSION})
    calls = model_of(builtin_of(first)).calls
    assert texts(calls[1].messages, "user") == ["my name is Ada", "what is my name?"]
    assert texts(calls[1].messages, "assistant") == ["first answer"]

    restarted = Framework(workspace)  # a new process, in effect: same home, same workspace
    restarted.load_hooks()
    async with restarted.running():
        await restarted.process_inbound({"content": "still there?", "session_id": SESSION})
    (call,) = model_of(builtin_of(restarted)).calls
    assert texts(call.messages, "user") == ["my name is Ada", "what is my name?",
                                            "still there?"]
    assert texts(call.messages, "assistant") == ["first answer", "second answer"]
    assert sorted(path.name for path in home.iterdir() if path.suffix == ".db") == ["tapes.db"]
    with SQLiteTapeStore(home / "tapes.db") as store:
        assert store.list_tapes() == [session_tape_name(SESSION, workspace)]


@pytest.mark.anyio
async def test_the_default_context_starts_after_the_last_anchor(workspace: Path) -> None:
    framework, builtin = build(workspace, replies=("one", "two"))
    async with framework.running():
        await framework.process_inbound({"content": "old topic", "session_id": SESSION})
        tape = Tape(framework.get_tape_store(), session_tape_name(SESSION, workspace))
        await tape.handoff("phase-2", {"summary": "we covered the old topic"})
        await framework.process_inbound({"content": "new topic", "session_id": SESSION})
    assert builtin_of(framework).build_tape_context() == TapeContext(
        anchor=LAST_ANCHOR, window=2 * CONTEXT_WINDOW)
    second = model_of(builtin).calls[1].messages
    assert "old topic" not in texts(second, "user")
    # The handoff's note opens what is left, after a user message (Anthropic's rule).
    assert texts(second, "user") == [OPENING_NOTE, "new topic"]
    assert any("we covered the old topic" in text for text in texts(second, "assistant"))


# -- media --------------------------------------------------------------------------------------


MEDIA_ENVELOPES = {
    "dict": lambda: {
        "session_id": SESSION, "channel": "telegram", "chat_id": "7", "content": "what is this?",
        "media": [
            {"type": "image", "mime_type": "image/png", "url": PNG_URL},
            {"type": "document", "mime_type": "application/pdf", "url": "https://x/y.pdf"},
        ],
    },
    "channel_message": lambda: ChannelMessage(
        session_id=SESSION, channel="telegram", chat_id="7", content="what is this?",
        media=[MediaItem("image", "image/png", data=PNG),
               MediaItem("document", "application/pdf", url="https://x/y.pdf")],
    ),
}


@pytest.mark.anyio
@pytest.mark.parametrize("shape", sorted(MEDIA_ENVELOPES))
async def test_envelope_media_becomes_republic_media_in_the_prompt(
    workspace: Path, shape: str
) -> None:
    framework, _ = build(workspace)
    envelope = MEDIA_ENVELOPES[shape]()
    state = await framework.build_state(envelope, SESSION)
    prompt = await framework.build_prompt(envelope, SESSION, state)
    text, image = prompt  # the document is skipped
    assert text.endswith("what is this?")
    assert is_media(image) and image.kind == "image"
    assert (image.media_type, image.data) == ("image/png", PNG)


@pytest.mark.anyio
@pytest.mark.parametrize("shape", sorted(MEDIA_ENVELOPES))
async def test_envelope_media_reaches_the_model_request_as_an_image_part(
    workspace: Path, shape: str
) -> None:
    framework, builtin = build(workspace, replies=("A small picture.",))
    async with framework.running():
        result = await framework.process_inbound(MEDIA_ENVELOPES[shape](), stream_output=True)
        entries = await entries_of(framework)
    assert result.model_output == "A small picture."
    (call,) = model_of(builtin).calls
    user = call.messages[-1]
    assert user.role == "user"
    # Media items may be republic media or legacy blocks; to_content reads both.
    content = [user.content] if isinstance(user.content, str) else to_content(user.content)
    images = [item for item in content if is_media(item)]
    assert [(image.kind, image.media_type, image.data_url) for image in images] == [
        ("image", "image/png", PNG_URL)
    ], f"the model was sent {user.content!r}"
    # Runs do not persist media on the tape (fork redaction): only the text is recorded.
    (recorded,) = [e for e in entries if e.kind == "message" and e.payload["role"] == "user"]
    assert "base64" not in json.dumps(recorded.payload)


def test_media_without_a_remote_or_inline_url_is_not_sent(tmp_path: Path) -> None:
    """A plain path used to be read by republic as a local file, outside workspace rules."""
    plugin = BuiltinPlugin(Framework(tmp_path), settings=Settings(home=tmp_path))
    message = {"content": "look", "media": [{"type": "image", "url": "/etc/passwd"},
                                            {"type": "image", "url": None}]}
    assert plugin.build_prompt(message, "s", {}) == "look"


@pytest.mark.anyio
async def test_temp_sessions_leave_nothing_in_the_store(tmp_path: Path) -> None:
    """The bootstrap anchor used to be written to the store before the fork."""
    framework = Framework(tmp_path)
    plugin = BuiltinPlugin(framework, settings=Settings(home=tmp_path / "home"))
    framework.registry.register(plugin, name="builtin")
    async with framework.running():
        await framework.process_inbound({"content": "hi", "session_id": "temp/x"})
        store: Any = framework.get_tape_store()
        assert store.list_tapes() == []
