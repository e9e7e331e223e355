"""Framework collectors: tools, channels, sidecars, system prompt, tape context, onboarding,
model options, admission and continue_prompt."""

from __future__ import annotations

import copy
import logging
import types
from pathlib import Path
from typing import Any

import pytest
from recorders import Answering, AsyncAnswering

from hookline.kernel import hookimpl
from hookline.kernel.channels import AdmitDecision, Channel, TurnSnapshot
from hookline.kernel.framework.core import Framework
from hookline.kernel.models import ModelChoice, ModelOptions
from hookline.kernel.tape import TapeContext
from hookline.kernel.tools import Tool

# -- tools, channels, sidecars -------------------------------------------------------------


def tool(name: str, tag: str) -> Tool:
    return Tool(name=name, handler=lambda: tag, description=tag)


def test_get_tools_dedupes_by_name_first_in_priority_order_wins(
    framework: Framework,
) -> None:
    framework.registry.register(
        Answering("provide_tools", [tool("a", "low"), tool("b", "low")]), "low"
    )
    framework.registry.register(Answering("provide_tools", None), "nothing")
    framework.registry.register(
        Answering("provide_tools", [tool("b", "high"), tool("c", "high")]), "high"
    )
    tools = framework.get_tools()
    assert [(t.name, t.description) for t in tools] == [
        ("b", "high"), ("c", "high"), ("a", "low"),
    ]


def test_get_tools_empty_and_none(framework: Framework) -> None:
    assert framework.get_tools() == []
    framework.registry.register(Answering("provide_tools", None), "nothing")
    framework.registry.register(Answering("provide_tools", []), "empty")
    assert framework.get_tools() == []


@pytest.mark.parametrize("bad", [tool("single", "x"), "a-string", {"a": 1}])
def test_get_tools_non_list_is_a_type_error_naming_plugin_and_hook(
    framework: Framework, bad: Any
) -> None:
    framework.registry.register(Answering("provide_tools", [tool("a", "ok")]), "fine")
    framework.registry.register(Answering("provide_tools", bad), "offender")
    with pytest.raises(TypeError) as info:
        framework.get_tools()
    message = str(info.value)
    assert "provide_tools" in message
    assert "'offender'" in message
    assert "fine" not in message


def make_channel(channel_name: str, tag: str, handler: Any) -> Channel:
    class _Channel(Channel):
        name = channel_name

        async def start(self, stop_event):  # pragma: no cover - unused
            return None

        async def stop(self):  # pragma: no cover - unused
            return None

    channel = _Channel()
    channel.tag = tag  # type: ignore[attr-defined]
    channel.handler = handler  # type: ignore[attr-defined]
    return channel


class ChannelProvider:
    def __init__(self, tag: str, names: list[str] | None, result: Any = None) -> None:
        self.tag, self.names, self.result = tag, names, result

    @hookimpl
    def provide_channels(self, message_handler):
        if self.result is not None:
            return self.result
        if self.names is None:
            return None
        return [make_channel(name, self.tag, message_handler) for name in self.names]


def test_get_channels_dedupes_by_name_first_in_priority_order_wins(
    framework: Framework,
) -> None:
    async def handler(message: Any) -> None:  # pragma: no cover - never called
        return None

    framework.registry.register(ChannelProvider("low", ["cli", "web"]), "low")
    framework.registry.register(ChannelProvider("none", None), "none")
    framework.registry.register(ChannelProvider("high", ["web", "chat"]), "high")
    channels = framework.get_channels(handler)
    assert list(channels) == ["web", "chat", "cli"]
    assert {name: c.tag for name, c in channels.items()} == {  # type: ignore[attr-defined]
        "web": "high", "chat": "high", "cli": "low",
    }
    assert all(c.handler is handler for c in channels.values())  # type: ignore[attr-defined]


def test_get_channels_non_list_is_a_type_error(framework: Framework) -> None:
    framework.registry.register(
        ChannelProvider("x", None, result=make_channel("solo", "x", None)), "solo_provider"
    )
    with pytest.raises(TypeError) as info:
        framework.get_channels(lambda message: None)
    assert "provide_channels" in str(info.value)
    assert "'solo_provider'" in str(info.value)


def test_get_tape_sidecars_dedupes_and_skips_none(framework: Framework) -> None:
    spill_low = types.SimpleNamespace(name="spill", tag="low")
    notes = types.SimpleNamespace(name="notes", tag="low")
    spill_high = types.SimpleNamespace(name="spill", tag="high")
    framework.registry.register(Answering("provide_tape_sidecar", spill_low), "low1")
    framework.registry.register(Answering("provide_tape_sidecar", notes), "low2")
    framework.registry.register(Answering("provide_tape_sidecar", None), "none")
    framework.registry.register(Answering("provide_tape_sidecar", spill_high), "high")
    sidecars = framework.get_tape_sidecars()
    assert [(s.name, s.tag) for s in sidecars] == [("spill", "high"), ("notes", "low")]


def test_get_tape_sidecars_none_only(framework: Framework) -> None:
    assert framework.get_tape_sidecars() == []
    framework.registry.register(Answering("provide_tape_sidecar", None), "none")
    assert framework.get_tape_sidecars() == []


# -- system prompt and tape context --------------------------------------------------------


def test_system_prompt_joins_truthy_blocks_lowest_priority_first(
    framework: Framework,
) -> None:
    seen: list[Any] = []
    framework.registry.register(Answering("system_prompt", "lowest", seen), "lowest")
    framework.registry.register(Answering("system_prompt", ""), "empty")
    framework.registry.register(Answering("system_prompt", None), "none")
    framework.registry.register(Answering("system_prompt", "middle"), "middle")
    framework.registry.register(Answering("system_prompt", "highest"), "highest")
    state = {"k": "v"}
    assert framework.get_system_prompt("hi", state) == "lowest\n\nmiddle\n\nhighest"
    assert seen == [("hi", state)]


def test_system_prompt_empty_and_bad_type(framework: Framework) -> None:
    assert framework.get_system_prompt("", {}) == ""
    framework.registry.register(Answering("system_prompt", ["not", "text"]), "bad")
    with pytest.raises(TypeError, match="system_prompt"):
        framework.get_system_prompt("", {})


def test_build_tape_context(framework: Framework) -> None:
    with pytest.raises(TypeError, match="build_tape_context must return TapeContext"):
        framework.build_tape_context()

    class Wrong:
        @hookimpl
        def build_tape_context(self):
            return {"anchor": None}

    framework.registry.register(Wrong(), "wrong")
    with pytest.raises(TypeError, match="build_tape_context must return TapeContext"):
        framework.build_tape_context()

    context = TapeContext(anchor=None)

    class Right:
        @hookimpl(tryfirst=True)
        def build_tape_context(self):
            return context

    framework.registry.register(Right(), "right")
    assert framework.build_tape_context() is context


def test_build_tape_context_async_only_is_a_type_error(framework: Framework) -> None:
    class AsyncContext:
        @hookimpl
        async def build_tape_context(self):
            return TapeContext()

    framework.registry.register(AsyncContext(), "async")
    with pytest.raises(TypeError, match="build_tape_context"):
        framework.build_tape_context()


# -- onboarding ----------------------------------------------------------------------------


class Onboard:
    def __init__(self, fragment: Any, seen: list[Any]) -> None:
        self.fragment, self.seen = fragment, seen

    @hookimpl
    def onboard_config(self, current_config):
        self.seen.append((self, current_config, copy.deepcopy(current_config)))
        return self.fragment


def test_onboard_config_deep_merges_lowest_priority_first(framework: Framework) -> None:
    seen: list[Any] = []
    low = Onboard({"model": {"name": "low", "size": 1}, "a": 1}, seen)
    mid = Onboard(None, seen)
    high = Onboard({"model": {"name": "high"}, "b": [1]}, seen)
    framework.registry.register(low, "low")
    framework.registry.register(mid, "mid")
    framework.registry.register(high, "high")
    current = {"model": {"temperature": 0.5}, "kept": True}

    config = framework.collect_onboard_config(current)

    assert config == {
        "model": {"temperature": 0.5, "name": "high", "size": 1},
        "kept": True,
        "a": 1,
        "b": [1],
    }
    assert current == {"model": {"temperature": 0.5}, "kept": True}  # not mutated
    assert [entry[0] for entry in seen] == [low, mid, high]
    # Every implementation receives the same accumulating dict...
    assert all(entry[1] is config for entry in seen)
    # ...holding what lower-priority fragments already merged.
    assert seen[0][2] == current
    assert seen[1][2] == {"model": {"temperature": 0.5, "name": "low", "size": 1},
                          "kept": True, "a": 1}
    assert seen[2][2] == seen[1][2]


def test_onboard_config_without_config_or_plugins(framework: Framework) -> None:
    assert framework.collect_onboard_config() == {}
    assert framework.collect_onboard_config({"x": 1}) == {"x": 1}


def test_onboard_config_non_dict_is_a_type_error(framework: Framework) -> None:
    framework.registry.register(Onboard(["x"], []), "listy")
    with pytest.raises(TypeError) as info:
        framework.collect_onboard_config({})
    assert "onboard_config must return dict or None" in str(info.value)
    assert "'listy'" in str(info.value)


def test_onboard_config_async_implementation_is_skipped_with_a_warning(
    framework: Framework, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[Any] = []

    class AsyncOnboard:
        @hookimpl
        async def onboard_config(self, current_config):  # pragma: no cover - never awaited
            return {"async": True}

    framework.registry.register(Onboard({"sync": True}, seen), "sync")
    framework.registry.register(AsyncOnboard(), "asyncplugin")
    with caplog.at_level(logging.WARNING):
        config = framework.collect_onboard_config({})
    assert config == {"sync": True}
    assert any(
        "hook.async_not_supported hook=onboard_config adapter=asyncplugin" in r.getMessage()
        for r in caplog.records
    )


def test_onboard_config_plugin_filter(framework: Framework) -> None:
    seen: list[Any] = []
    framework.registry.register(Onboard({"from": "beta"}, seen), "beta")
    framework.registry.register(Onboard({"from": "alpha"}, seen), "alpha")

    class NotOnboarding:
        @hookimpl
        def provide_tools(self):
            return []

    framework.registry.register(NotOnboarding(), "other")
    assert framework.collect_onboard_config({}, plugin="beta") == {"from": "beta"}
    assert len(seen) == 1

    with pytest.raises(ValueError) as info:
        framework.collect_onboard_config({}, plugin="gamma")
    assert str(info.value) == (
        "No onboard_config hook found for plugin 'gamma'. Available plugins: alpha, beta"
    )


def test_onboard_config_plugin_filter_without_any_implementation() -> None:
    with pytest.raises(ValueError, match=r"Available plugins: \(none\)"):
        Framework().collect_onboard_config({}, plugin="gamma")


# -- model options, admission, continue_prompt ---------------------------------------------


@pytest.mark.anyio
async def test_get_model_options_merges_in_priority_order(
    framework: Framework, tmp_path: Path
) -> None:
    a, b, c = ModelChoice("p:a"), ModelChoice("p:b"), ModelChoice("p:c")
    seen: list[Any] = []
    framework.registry.register(
        Answering("provide_model_options", ModelOptions([a], current_model="p:a"), seen), "low"
    )
    framework.registry.register(Answering("provide_model_options", None), "none")
    framework.registry.register(
        AsyncAnswering("provide_model_options", ModelOptions([b, c], current_model="")), "mid"
    )
    framework.registry.register(
        Answering("provide_model_options", ModelOptions([a], current_model=None)), "high"
    )

    merged = await framework.get_model_options("s1")
    assert merged == ModelOptions([a, b, c, a], current_model="p:a")
    assert seen == [("s1", framework.workspace)]

    other = tmp_path / "sub" / ".." / "other"
    await framework.get_model_options("s2", workspace=other)
    assert seen[-1] == ("s2", (tmp_path / "other").resolve())


@pytest.mark.anyio
async def test_get_model_options_none_and_wrong_type(framework: Framework) -> None:
    assert await framework.get_model_options("s") == ModelOptions([], None)
    framework.registry.register(Answering("provide_model_options", None), "none")
    assert (await framework.get_model_options("s")).models == []
    framework.registry.register(Answering("provide_model_options", {"models": []}), "wrong")
    with pytest.raises(TypeError) as info:
        await framework.get_model_options("s")
    assert "provide_model_options" in str(info.value)
    assert "'wrong'" in str(info.value)


@pytest.mark.anyio
async def test_admit_message(framework: Framework) -> None:
    snapshot = TurnSnapshot("s1", running_count=1)
    message = {"content": "hi"}
    assert await framework.admit_message("s1", message, snapshot) is None

    seen: list[Any] = []
    framework.registry.register(
        AsyncAnswering("admit_message", AdmitDecision.follow_up("busy")), "low"
    )
    framework.registry.register(AsyncAnswering("admit_message", None, seen), "abstain")
    decision = await framework.admit_message("s1", message, snapshot)
    assert decision == AdmitDecision("follow_up", "busy")
    assert seen == [("s1", message, snapshot)]

    framework.registry.register(AsyncAnswering("admit_message", "steer"), "wrong")
    with pytest.raises(TypeError, match="admit_message must return AdmitDecision or None"):
        await framework.admit_message("s1", message, snapshot)


@pytest.mark.anyio
async def test_continue_prompt(framework: Framework) -> None:
    assert await framework.continue_prompt("p", None, None) is None
    framework.registry.register(Answering("continue_prompt", "next"), "low")
    assert await framework.continue_prompt("p", None, None) == "next"
    framework.registry.register(Answering("continue_prompt", ""), "empty")
    assert await framework.continue_prompt(None, None, None) == ""
    framework.registry.register(Answering("continue_prompt", ["not", "text"]), "wrong")
    with pytest.raises(TypeError, match="continue_prompt must return str or None"):
        await framework.continue_prompt("p", None, None)
