"""Every default of the builtin plugin can be replaced by a plugin registered after it (see
test_builtin_plugin.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from builtin_plugin_support import SESSION, build, entries_of, texts
from builtin_support import model_of

from hookline.builtins.agent.steering import InMemorySteeringInbox
from hookline.builtins.host.environment import LocalEnvironment
from hookline.builtins.plugin import DEFAULT_SYSTEM_PROMPT
from hookline.builtins.store import InMemoryTapeStore
from hookline.builtins.tape.naming import session_tape_name
from hookline.kernel import hookimpl
from hookline.kernel.models import ModelChoice, ModelOptions
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent
from hookline.kernel.tape import TapeContext, TapeEntry
from hookline.kernel.tools import Tool

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


class WrongResources:
    """A store and an inbox of the wrong type (the kernel hands them on unchecked)."""

    def __init__(self, store: object, inbox: object) -> None:
        self.store, self.inbox = store, inbox

    @hookimpl
    def provide_tape_store(self) -> object:
        return self.store

    @hookimpl
    def provide_steering_inbox(self) -> object:
        return self.inbox


@pytest.mark.anyio
@pytest.mark.parametrize(("store", "inbox", "hook", "expected"), [
    ("a path", None, "provide_tape_store",
     "a tape store or None; plugin 'wrong', function 'WrongResources.provide_tape_store' "),
    (None, 42, "provide_steering_inbox",
     "a steering inbox or None; plugin 'wrong', function "
     "'WrongResources.provide_steering_inbox' "),
])
async def test_a_resource_of_the_wrong_type_names_the_plugin_that_gave_it(
    workspace: Path, store: object, inbox: object, hook: str, expected: str,
) -> None:
    framework, _ = build(workspace)
    framework.registry.register(WrongResources(store, inbox), name="wrong")
    async with framework.running():
        with pytest.raises(TypeError) as raised:
            await framework.process_inbound({"content": "hi", "session_id": SESSION})
    message = str(raised.value)
    assert message.startswith(f"hook.{hook} must return {expected}"), message
    assert "returned " + type(store or inbox).__name__ in message
    assert "to the builtin plugin" in message


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
