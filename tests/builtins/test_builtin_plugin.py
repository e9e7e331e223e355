"""The builtin plugin: a default for every hook that has one, each replaceable by a plugin.

Turns run through `Framework.process_inbound` inside `running()`. Where a test needs to see
what the model was shown it configures a scripted model (`scripted:<file>`) and reads the
calls it recorded; HOOKLINE_HOME is a temporary directory in every test.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builtin_support import build_builtin, model_of
from builtin_support import write_script as write_turns

from hookline.builtins.agent.steering import InMemorySteeringInbox
from hookline.builtins.config import Settings, SettingsError
from hookline.builtins.host.background import SWEEP_SECONDS, BackgroundProcesses
from hookline.builtins.host.environment import LocalEnvironment
from hookline.builtins.models import ModelMessage
from hookline.builtins.models.offline import OFFLINE_LABEL
from hookline.builtins.plugin import CONTEXT_WINDOW, DEFAULT_SYSTEM_PROMPT, BuiltinPlugin
from hookline.builtins.store import InMemoryTapeStore, SQLiteTapeStore
from hookline.builtins.tape.tape import Tape, session_tape_name
from hookline.kernel import Framework, hookimpl
from hookline.kernel.envelope import ChannelMessage, MediaItem
from hookline.kernel.models import ModelChoice, ModelOptions
from hookline.kernel.prompt import is_media, to_content
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent
from hookline.kernel.tape import LAST_ANCHOR, TapeContext, TapeEntry
from hookline.kernel.tools import Tool

SESSION = "test:chat"
PNG = b"\x89PNG\r\n\x1a\n-not-really-a-png"
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode("ascii")

DEFAULT_HOOKS = (
    "resolve_session",
    "load_state",
    "build_prompt",
    "run_model_stream",
    "render_outbound",
    "dispatch_outbound",
    "onboard_config",
    "provide_model_options",
    "provide_environment",
    "system_prompt",
    "provide_tape_store",
    "provide_lifespan",
    "build_tape_context",
    "provide_tools",
    "provide_steering_inbox",
    "on_error",
)


# -- fixtures and helpers ------------------------------------------------------------------


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A fresh hookline home, and no setting of the machine running the tests."""
    for name in ("MODEL", "FALLBACK_MODELS", "API_KEY", "API_BASE", "API_FORMAT", "MAX_STEPS",
                 "MAX_TOKENS", "TAPE_STORE", "STREAM"):
        monkeypatch.delenv(f"HOOKLINE_{name}", raising=False)
    monkeypatch.delenv("HOOKLINE_DISABLE_PLUGINS", raising=False)
    path = tmp_path / "home"
    monkeypatch.setenv("HOOKLINE_HOME", str(path))
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any attempt to open a network connection fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield


def write_script(path: Path, *texts: str) -> str:
    return write_turns(path, [{"text": text} for text in texts])


def build(workspace: Path, *plugins: object, replies: tuple[str, ...] = ("ok",) * 4,
          **settings: Any) -> tuple[Framework, BuiltinPlugin]:
    """The builtin plugin (a scripted model by default), then `plugins` after it."""
    return build_builtin(workspace, [{"text": text} for text in replies], *plugins, **settings)


def builtin_of(framework: Framework) -> BuiltinPlugin:
    plugin = framework.registry.get_plugin("builtin")
    assert isinstance(plugin, BuiltinPlugin)
    return plugin


def texts(messages: list[ModelMessage], role: str) -> list[str]:
    return [message.text for message in messages if message.role == role]


async def entries_of(framework: Framework, session_id: str = SESSION) -> list[TapeEntry]:
    tape = Tape(framework.get_tape_store(), session_tape_name(session_id, framework.workspace))
    return await tape.entries()


# -- loading and the hook report -------------------------------------------------------------


def test_load_hooks_registers_the_builtin_plugin_first(workspace: Path) -> None:
    framework = Framework(workspace)
    framework.load_hooks()
    status = framework.plugin_status()["builtin"]
    assert (status.ok, status.detail, status.source) == (True, "loaded", "builtin")
    name, plugin = framework.registry.list_name_plugin()[0]
    assert name == "builtin" and isinstance(plugin, BuiltinPlugin)
    assert plugin.framework is framework

    class Later:
        @hookimpl
        def system_prompt(self) -> str:
            return "later"

    framework.registry.register(Later(), name="later")
    execution = framework.hook_report().binding("system_prompt").execution
    assert [info.plugin for info in execution] == ["later", "builtin"], "builtin runs last"


def test_loading_reads_no_settings_until_they_are_needed(
    workspace: Path, home: Path
) -> None:
    home.mkdir()
    (home / "config.toml").write_text("modle = 'typo'\n")
    framework = Framework(workspace)
    framework.load_hooks()  # a bad config file does not break loading...
    assert framework.plugin_status()["builtin"].ok
    with pytest.raises(SettingsError, match="modle"):  # ...it is reported when used
        builtin_of(framework).get_settings()


def test_the_lazily_made_parts_are_made_once_and_can_be_replaced(workspace: Path) -> None:
    """The background processes and the memory store are made on first use (building the
    plugin imports neither module), then kept; the sweep period is the lifespan's."""
    plugin = BuiltinPlugin(Framework(workspace))
    assert plugin.sweep_seconds == SWEEP_SECONDS
    assert isinstance(plugin.processes, BackgroundProcesses)
    assert plugin.processes is plugin.processes
    assert isinstance(plugin.memory_store, InMemoryTapeStore)
    assert plugin.memory_store is plugin.memory_store
    processes, store = BackgroundProcesses(), InMemoryTapeStore()
    plugin.processes, plugin.memory_store = processes, store
    assert plugin.processes is processes and plugin.memory_store is store


@pytest.mark.parametrize("hook", DEFAULT_HOOKS)
def test_every_hook_with_a_default_has_the_builtin_one(workspace: Path, hook: str) -> None:
    framework = Framework(workspace)
    framework.load_hooks()
    binding = framework.hook_report().binding(hook)
    assert [info.plugin for info in binding.execution] == ["builtin"]


# -- a fresh machine: the offline model ---------------------------------------------------


class ErrorLog:
    def __init__(self) -> None:
        self.errors: list[tuple[str, BaseException]] = []

    @hookimpl
    def on_error(self, stage: str, error: Exception) -> None:
        self.errors.append((stage, error))


@pytest.mark.anyio
async def test_with_no_model_configured_the_offline_model_answers_without_network(
    workspace: Path, home: Path, no_network: None
) -> None:
    framework = Framework(workspace)
    framework.load_hooks()
    errors = ErrorLog()
    framework.registry.register(errors, name="errors")
    async with framework.running():
        result = await framework.process_inbound({"content": "hello"})
        entries = await entries_of(framework, "default:default")

    assert errors.errors == []

    assert result.session_id == "default:default"
    assert result.model_output.startswith(OFFLINE_LABEL)
    assert 'You said: "hello"' in result.model_output
    assert "HOOKLINE_MODEL" not in result.model_output, "the notice is logged, not replied"
    assert result.outbounds == [{
        "session_id": "default:default", "channel": "default", "chat_id": "default",
        "content": result.model_output, "output_channel": "default", "kind": "normal",
    }]
    assert (home / "tapes.db").is_file(), "the default store lives in the hookline home"
    messages = [(e.payload["role"], e.payload["content"]) for e in entries if e.kind == "message"]
    assert messages == [("user", "hello"), ("assistant", result.model_output)]


@pytest.mark.anyio
async def test_the_offline_model_runs_tools_end_to_end(workspace: Path, no_network: None) -> None:
    framework = Framework(workspace)
    framework.load_hooks()
    (workspace / "notes.txt").write_text("remember the milk\n")
    async with framework.running():
        result = await framework.process_inbound(
            {"content": '/tool fs_read {"path": "notes.txt"}'}, stream_output=True
        )
    assert "Calling tool `fs_read`" in result.model_output
    assert "remember the milk" in result.model_output


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
    """Contract 2.23: the builtin on_error dispatches an error envelope through
    dispatch_outbound whenever a message is given; a plugin delivering outbounds itself
    (no channel router bound) must receive it too."""
    log = OutboundLog()
    framework, _ = build(workspace, log)
    envelope = {"content": "hi", "channel": "webhook", "chat_id": "c1"}
    await framework.notify_error("turn", RuntimeError("boom"), envelope)
    assert [(m["kind"], m["content"]) for m in log.sent] == [
        ("error", "An error occurred at stage 'turn': boom")
    ]


# -- defaults of the resource hooks ----------------------------------------------------------


@pytest.mark.anyio
async def test_model_options_and_onboarding_come_from_the_settings(workspace: Path) -> None:
    framework, _ = build(workspace, model="openai:gpt-4o-mini",
                         fallback_models=("ollama:llama3", "openai:gpt-4o-mini"))
    options = await framework.get_model_options(SESSION)
    assert options == ModelOptions(
        [ModelChoice("openai:gpt-4o-mini"), ModelChoice("ollama:llama3")],
        current_model="openai:gpt-4o-mini",
    )
    assert framework.collect_onboard_config({}) == {"model": "openai:gpt-4o-mini"}
    assert framework.collect_onboard_config({"model": "mine:x"}) == {"model": "mine:x"}

    bare, _ = build(workspace, model=None)
    assert await bare.get_model_options(SESSION) == ModelOptions([], None)
    assert bare.collect_onboard_config({}) == {"model": "offline"}


@pytest.mark.anyio
async def test_environment_tools_and_inbox_defaults(workspace: Path) -> None:
    framework, _ = build(workspace)
    names = {tool.name for tool in framework.get_tools()}
    assert {"shell", "shell.output", "shell.stop", "fs.read", "fs.write", "fs.edit",
            "tape.info", "tape.search", "tape.handoff"} <= names
    assert framework.get_steering_inbox() is None
    async with framework.running():
        assert isinstance(framework.get_steering_inbox(), InMemorySteeringInbox)
        assert isinstance(framework.get_tape_store(), SQLiteTapeStore)
        environment = await framework.get_environment(SESSION)
        assert isinstance(environment, LocalEnvironment)
        assert Path(environment.workspace) == workspace.resolve()
        state = await framework.build_state({"content": "x"}, SESSION)
        assert state["_runtime_environment"] is environment
    assert framework.get_tape_store() is None and framework.get_steering_inbox() is None


@pytest.mark.anyio
async def test_system_prompt_is_the_default_plus_agents_md(workspace: Path) -> None:
    framework, builtin = build(workspace, replies=("one", "two"))
    without = framework.get_system_prompt("", {})
    assert without.startswith(DEFAULT_SYSTEM_PROMPT) and "AGENTS.md" not in without

    (workspace / "AGENTS.md").write_text("Always answer in French.\n")
    with_agents = framework.get_system_prompt("", {})
    assert with_agents.startswith(DEFAULT_SYSTEM_PROMPT)
    assert "Always answer in French." in with_agents

    async with framework.running():
        await framework.process_inbound({"content": "bonjour", "session_id": SESSION})
    (call,) = model_of(builtin).calls
    assert call.messages[0].role == "system"
    assert "Always answer in French." in call.messages[0].text


# -- every default can be replaced by a plugin registered after the builtin ------------------


class OwnStore:
    def __init__(self) -> None:
        self.store = InMemoryTapeStore()

    @hookimpl
    def provide_tape_store(self) -> InMemoryTapeStore:
        return self.store


@pytest.mark.anyio
async def test_a_plugin_tape_store_wins(workspace: Path, home: Path) -> None:
    own = OwnStore()
    framework, _ = build(workspace, own)
    async with framework.running():
        assert framework.get_tape_store() is own.store
        await framework.process_inbound({"content": "hi", "session_id": SESSION})
    assert own.store.list_tapes() == [session_tape_name(SESSION, workspace)]
    assert not (home / "tapes.db").exists(), "the builtin store was not opened"


class ExtraBlock:
    @hookimpl
    def system_prompt(self, prompt: Any, state: dict[str, Any]) -> str:
        return f"Plugin block for {state.get('session_id')}."


@pytest.mark.anyio
async def test_a_plugin_system_prompt_adds_a_block_after_the_default(workspace: Path) -> None:
    framework, builtin = build(workspace, ExtraBlock())
    async with framework.running():
        await framework.process_inbound({"content": "hi", "session_id": SESSION})
    (call,) = model_of(builtin).calls
    system = call.messages[0].text
    assert system.startswith(DEFAULT_SYSTEM_PROMPT)
    assert system.endswith(f"\n\nPlugin block for {SESSION}.")


class WholeTape:
    def __init__(self) -> None:
        self.selected: list[list[TapeEntry]] = []

    @hookimpl
    def build_tape_context(self) -> TapeContext:
        def select(entries: list[TapeEntry], context: TapeContext) -> list[dict[str, Any]]:
            self.selected.append(entries)
            return [{"role": "user", "content": f"{len(entries)} entries, from the plugin"}]

        return TapeContext(anchor=None, select=select)


@pytest.mark.anyio
async def test_a_plugin_tape_context_wins(workspace: Path) -> None:
    whole = WholeTape()
    framework, builtin = build(workspace, whole, replies=("first answer", "second answer"))
    async with framework.running():
        await framework.process_inbound({"content": "first", "session_id": SESSION})
        await framework.process_inbound({"content": "second", "session_id": SESSION})
    second = model_of(builtin).calls[1].messages
    # The plugin's conversion replaced the default one: the earlier exchange is not replayed,
    # the plugin's summary of the whole tape (anchor=None) is there instead.
    assert second[1].role == "user" and second[1].text.endswith("entries, from the plugin")
    assert "first" not in texts(second, "user") and texts(second, "assistant") == []
    assert set(texts(second, "user")) <= {second[1].text, "second"}
    assert whole.selected[-1][0].kind == "anchor"
    assert any(e.payload.get("content") == "first answer" for e in whole.selected[-1])


class OwnModel:
    def __init__(self) -> None:
        self.prompts: list[Any] = []

    @hookimpl
    def run_model(self, prompt: Any, session_id: str, state: dict[str, Any]) -> str:
        self.prompts.append(prompt)
        return f"plugin answer to {prompt}"


@pytest.mark.anyio
@pytest.mark.parametrize("stream_output", [False, True])
async def test_a_plugin_run_model_replaces_the_agent(
    workspace: Path, stream_output: bool
) -> None:
    own = OwnModel()
    framework, builtin = build(workspace, own)
    async with framework.running():
        result = await framework.process_inbound(
            {"content": "hi", "session_id": SESSION}, stream_output=stream_output
        )
        entries = await entries_of(framework)
    assert result.model_output == "plugin answer to hi"
    assert own.prompts == ["hi"]
    assert model_of(builtin).calls == [], "the builtin agent never ran"
    assert entries == [], "nothing was recorded on the session tape"


class OwnStream:
    @hookimpl
    def run_model_stream(self, prompt: Any, session_id: str, state: dict[str, Any]) -> Any:
        async def events() -> Any:
            yield StreamEvent("text", {"delta": "streamed "})
            yield StreamEvent("text", {"delta": "by the plugin"})

        return AsyncStreamEvents(events())


@pytest.mark.anyio
async def test_a_plugin_run_model_stream_replaces_the_agent(workspace: Path) -> None:
    framework, builtin = build(workspace, OwnStream())
    async with framework.running():
        result = await framework.process_inbound({"content": "hi"}, stream_output=True)
    assert result.model_output == "streamed by the plugin"
    assert model_of(builtin).calls == []


class Overrides:
    """One plugin answering first for several first-result hooks."""

    def __init__(self, workspace: Path) -> None:
        self.environment = LocalEnvironment(workspace)
        self.inbox = InMemorySteeringInbox()
        self.shell = Tool("shell", lambda command: f"not really: {command}",
                          description="A pretend shell.",
                          parameters={"type": "object",
                                      "properties": {"command": {"type": "string"}}})

    @hookimpl
    def resolve_session(self, message: Any) -> str:
        return "plugin-session"

    @hookimpl
    def load_state(self, message: Any, session_id: str) -> dict[str, Any]:
        return {"context": "from the plugin", "extra": 1}

    @hookimpl
    def build_prompt(self, message: Any, session_id: str, state: dict[str, Any]) -> str:
        return "rewritten prompt"

    @hookimpl
    def provide_environment(self, session_id: str, workspace: Any) -> LocalEnvironment:
        return self.environment

    @hookimpl
    def provide_steering_inbox(self) -> InMemorySteeringInbox:
        return self.inbox

    @hookimpl
    def provide_tools(self) -> list[Tool]:
        return [self.shell]

    @hookimpl
    def provide_model_options(self, session_id: str, workspace: Any) -> ModelOptions:
        return ModelOptions([ModelChoice("plugin:model")], current_model="plugin:model")

    @hookimpl
    def onboard_config(self, current_config: dict[str, Any]) -> dict[str, Any]:
        return {"model": "plugin:model", "plugins": {"overrides": {"on": True}}}


@pytest.mark.anyio
async def test_later_plugins_replace_the_first_result_defaults(workspace: Path) -> None:
    overrides = Overrides(workspace)
    framework, builtin = build(workspace, overrides)
    async with framework.running():
        assert framework.get_steering_inbox() is overrides.inbox
        result = await framework.process_inbound({"content": "hi", "session_id": SESSION})
        assert result.session_id == "plugin-session"
        assert result.state["context"] == "from the plugin" and result.state["extra"] == 1
        assert result.state["session_id"] == "plugin-session", "builtin keys are kept"
        assert result.state["_runtime_environment"] is overrides.environment
        assert result.prompt == ["rewritten prompt"]
    (call,) = model_of(builtin).calls
    assert texts(call.messages, "user") == ["rewritten prompt"]
    assert [tool for tool in framework.get_tools() if tool.name == "shell"] == [overrides.shell]
    schemas = {schema.name: schema for schema in call.tools}
    assert schemas["shell"].description == "A pretend shell."
    options = await framework.get_model_options(SESSION)
    assert options is not None and options.current_model == "plugin:model"
    assert framework.collect_onboard_config({}) == {
        "model": "plugin:model", "plugins": {"overrides": {"on": True}}
    }


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
        anchor=LAST_ANCHOR, window=CONTEXT_WINDOW)
    second = model_of(builtin).calls[1].messages
    assert "old topic" not in texts(second, "user")
    assert texts(second, "user") == ["new topic"]
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


def test_model_options_name_the_model_turns_use(tmp_path: Path) -> None:
    """With only fallbacks set, the first fallback used to be reported as current."""
    plugin = BuiltinPlugin(Framework(tmp_path),
                           settings=Settings(home=tmp_path, fallback_models=("a:x", "b:y")))
    options = plugin.provide_model_options("s", tmp_path)
    assert options.current_model == "offline"
    assert [choice.id for choice in options.models] == ["offline", "a:x", "b:y"]


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
