"""The builtin plugin: a default for every hook that has one, each replaceable by a plugin.

Turns run through `Framework.process_inbound` inside `running()`. Where a test needs to see
what the model was shown it configures a scripted model (`scripted:<file>`) and reads the
calls it recorded; HOOKLINE_HOME is a temporary directory in every test (conftest.py).
This file holds loading, the offline model and the resource hooks' defaults; the turn
hooks' defaults (state, prompt, media, outbound, errors, history) are in
test_builtin_plugin_turns.py, plugins replacing defaults in test_builtin_plugin_overrides.py.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builtin_plugin_support import SESSION, build, builtin_of, entries_of
from builtin_support import model_of

from hookline.builtins.agent.steering import InMemorySteeringInbox
from hookline.builtins.config import Settings, SettingsError
from hookline.builtins.host.background import BackgroundProcesses
from hookline.builtins.host.environment import LocalEnvironment
from hookline.builtins.models.offline import OFFLINE_LABEL
from hookline.builtins.plugin import DEFAULT_SYSTEM_PROMPT, BuiltinPlugin
from hookline.builtins.store import InMemoryTapeStore, SQLiteTapeStore
from hookline.kernel import Framework, hookimpl
from hookline.kernel.models import ModelChoice, ModelOptions

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


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any attempt to open a network connection fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield


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
    plugin imports neither module), then kept; the sweep period is docs/host.md's."""
    plugin = BuiltinPlugin(Framework(workspace))
    assert plugin.sweep_seconds == 5.0
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


def test_model_options_name_the_model_turns_use(tmp_path: Path) -> None:
    """With only fallbacks set, the first fallback used to be reported as current."""
    plugin = BuiltinPlugin(Framework(tmp_path),
                           settings=Settings(home=tmp_path, fallback_models=("a:x", "b:y")))
    options = plugin.provide_model_options("s", tmp_path)
    assert options.current_model == "offline"
    assert [choice.id for choice in options.models] == ["offline", "a:x", "b:y"]
