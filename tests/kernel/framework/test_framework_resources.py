"""Framework resources and collectors: the running() scope, environments, tools, channels,
sidecars, system prompt, tape context, onboarding, model options, admission, steering
(contract 2.7, 2.12-2.22)."""

from __future__ import annotations

import copy
import logging
import types
from pathlib import Path
from typing import Any

import anyio
import pytest
from recorders import Answering, AsyncAnswering, FakeEnvironment

from hookline.kernel import hookimpl
from hookline.kernel.channels import AdmitDecision, Channel, TurnSnapshot
from hookline.kernel.framework.core import Framework
from hookline.kernel.models import ModelChoice, ModelOptions
from hookline.kernel.tape import TapeContext
from hookline.kernel.tools import Tool

FRAMEWORK_LOGGER = "hookline.kernel.framework.core"
RUNTIME_LOGGER = "hookline.kernel.runtime"


@pytest.fixture
def framework(tmp_path: Path) -> Framework:
    return Framework(workspace=tmp_path)


# -- resource providers ------------------------------------------------------------------


class SyncLifespan:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    @hookimpl
    def provide_lifespan(self):
        self.log.append(f"enter {self.name}")
        try:
            yield
        finally:
            self.log.append(f"exit {self.name}")


class AsyncLifespan(SyncLifespan):
    @hookimpl
    async def provide_lifespan(self):
        self.log.append(f"enter {self.name}")
        try:
            yield
        finally:
            self.log.append(f"exit {self.name}")


class FirstLifespan(SyncLifespan):
    @hookimpl(tryfirst=True)
    def provide_lifespan(self):
        self.log.append(f"enter {self.name}")
        try:
            yield
        finally:
            self.log.append(f"exit {self.name}")


class NoLifespan:
    @hookimpl
    def provide_lifespan(self):
        return None


class StoreProvider:
    def __init__(self, log: list[str], store: Any) -> None:
        self.log, self.store = log, store

    @hookimpl
    def provide_tape_store(self):
        self.log.append("enter store")
        try:
            yield self.store
        finally:
            self.log.append("exit store")


class InboxProvider:
    def __init__(self, log: list[str], inbox: Any) -> None:
        self.log, self.inbox = log, inbox

    @hookimpl
    async def provide_steering_inbox(self):
        self.log.append("enter inbox")
        try:
            yield self.inbox
        finally:
            self.log.append("exit inbox")


class PlainResources:
    """Providers that return plain objects (no generator)."""

    def __init__(self, store: Any, inbox: Any) -> None:
        self.store, self.inbox = store, inbox

    @hookimpl
    def provide_tape_store(self):
        return self.store

    @hookimpl
    def provide_steering_inbox(self):
        return self.inbox


class RecordingInbox:
    def __init__(self) -> None:
        self.messages: list[tuple[Any, dict[str, Any]]] = []

    async def enqueue_message(self, message: Any, state: dict[str, Any]) -> None:
        self.messages.append((message, state))

    async def drain_messages(self, state: dict[str, Any]) -> list[Any]:
        drained = [m for m, _ in self.messages]
        self.messages.clear()
        return drained

    def message_count(self, state: dict[str, Any]) -> int:
        return len(self.messages)


def register_scope_plugins(framework: Framework, log: list[str]) -> tuple[object, object]:
    """low (sync), mid (async), none, high (tryfirst) lifespans; a store; an inbox.

    Priority order of the lifespans: high (tryfirst), mid, low (newest normal first).
    """
    store, inbox = object(), RecordingInbox()
    framework.registry.register(SyncLifespan("low", log), "low")
    framework.registry.register(FirstLifespan("high", log), "high")
    framework.registry.register(NoLifespan(), "none")
    framework.registry.register(AsyncLifespan("mid", log), "mid")
    framework.registry.register(StoreProvider(log, store), "store")
    framework.registry.register(InboxProvider(log, inbox), "inbox")
    return store, inbox


ENTER_ORDER = ["enter high", "enter mid", "enter low", "enter store", "enter inbox"]
EXIT_ORDER = ["exit inbox", "exit store", "exit low", "exit mid", "exit high"]


@pytest.mark.anyio
async def test_running_enters_in_priority_order_and_exits_in_reverse(
    framework: Framework,
) -> None:
    log: list[str] = []
    store, inbox = register_scope_plugins(framework, log)
    assert framework.get_tape_store() is None
    assert framework.get_steering_inbox() is None

    async with framework.running() as stack:
        assert log == ENTER_ORDER
        assert framework.get_tape_store() is store
        assert framework.get_steering_inbox() is inbox
        stack.callback(log.append, "host resource closed")
        log.append("body")

    assert log == [*ENTER_ORDER, "body", "host resource closed", *EXIT_ORDER]
    assert framework.get_tape_store() is None
    assert framework.get_steering_inbox() is None


@pytest.mark.anyio
async def test_running_exits_in_reverse_when_the_body_raises(framework: Framework) -> None:
    log: list[str] = []
    register_scope_plugins(framework, log)
    with pytest.raises(KeyError, match="body failed"):
        async with framework.running():
            log.append("body")
            raise KeyError("body failed")
    assert log == [*ENTER_ORDER, "body", *EXIT_ORDER]
    assert framework.get_tape_store() is None
    assert framework.get_steering_inbox() is None
    # The scope is closed: a new one can be opened.
    async with framework.running():
        assert framework.get_tape_store() is not None


@pytest.mark.anyio
async def test_getters_clear_before_the_providers_exit(framework: Framework) -> None:
    seen: list[Any] = []

    class Watching:
        @hookimpl
        def provide_tape_store(self):
            yield "store"
            seen.append(("store exit", framework.get_tape_store()))

    framework.registry.register(Watching(), "watching")
    async with framework.running():
        assert framework.get_tape_store() == "store"
    assert seen == [("store exit", None)]


@pytest.mark.anyio
async def test_plain_provider_results_are_used_as_is(framework: Framework) -> None:
    store, inbox = {"kind": "store"}, RecordingInbox()
    framework.registry.register(PlainResources(store, inbox), "plain")
    async with framework.running():
        assert framework.get_tape_store() is store
        assert framework.get_steering_inbox() is inbox
    assert framework.get_tape_store() is None


@pytest.mark.anyio
async def test_running_without_providers(framework: Framework) -> None:
    async with framework.running():
        assert framework.get_tape_store() is None
        assert framework.get_steering_inbox() is None


@pytest.mark.anyio
async def test_failing_inbox_exits_entered_resources_and_clears_the_store(
    framework: Framework,
) -> None:
    log: list[str] = []
    store = object()
    framework.registry.register(SyncLifespan("life", log), "life")
    framework.registry.register(StoreProvider(log, store), "store")

    class BrokenInbox:
        @hookimpl
        def provide_steering_inbox(self):
            log.append("inbox provider")
            raise OSError("no inbox today")

    framework.registry.register(BrokenInbox(), "broken")
    with pytest.raises(OSError, match="no inbox today"):
        async with framework.running():
            log.append("body")  # pragma: no cover - never reached
    assert log == ["enter life", "enter store", "inbox provider", "exit store", "exit life"]
    assert framework.get_tape_store() is None
    assert framework.get_steering_inbox() is None
    # The failed scope is not left open.
    framework.registry.unregister("broken")
    async with framework.running():
        assert framework.get_tape_store() is store


@pytest.mark.anyio
async def test_failing_store_generator_exits_only_the_entered_lifespans(
    framework: Framework,
) -> None:
    log: list[str] = []
    framework.registry.register(SyncLifespan("first", log), "first")
    framework.registry.register(AsyncLifespan("second", log), "second")

    class BrokenStore:
        @hookimpl
        def provide_tape_store(self):
            log.append("store starts")
            raise ValueError("store broke")
            yield  # pragma: no cover - makes this a generator

    framework.registry.register(BrokenStore(), "broken")
    framework.registry.register(InboxProvider(log, RecordingInbox()), "inbox")
    with pytest.raises(ValueError, match="store broke"):
        async with framework.running():
            pass  # pragma: no cover
    assert log == ["enter second", "enter first", "store starts", "exit first", "exit second"]
    assert framework.get_tape_store() is None
    assert framework.get_steering_inbox() is None


@pytest.mark.anyio
async def test_generator_that_does_not_yield_raises_runtime_error(
    framework: Framework,
) -> None:
    log: list[str] = []
    framework.registry.register(SyncLifespan("life", log), "life")

    class NoYield:
        @hookimpl
        def provide_tape_store(self):
            log.append("store without yield")
            return
            yield  # pragma: no cover

    framework.registry.register(NoYield(), "noyield")
    with pytest.raises(RuntimeError):
        async with framework.running():
            pass  # pragma: no cover
    assert log == ["enter life", "store without yield", "exit life"]
    assert framework.get_tape_store() is None


@pytest.mark.anyio
async def test_async_generator_that_does_not_yield_raises_runtime_error(
    framework: Framework,
) -> None:
    class NoYield:
        @hookimpl
        async def provide_lifespan(self):
            return
            yield  # pragma: no cover

    framework.registry.register(NoYield(), "noyield")
    with pytest.raises(RuntimeError):
        async with framework.running():
            pass  # pragma: no cover


@pytest.mark.anyio
async def test_overlapping_scopes_raise(framework: Framework) -> None:
    log: list[str] = []
    store, _ = register_scope_plugins(framework, log)
    async with framework.running():
        with pytest.raises(RuntimeError, match="already active"):
            async with framework.running():
                pass  # pragma: no cover
        # The rejected scope entered nothing and left the open one intact.
        assert log == ENTER_ORDER
        assert framework.get_tape_store() is store
    assert log == [*ENTER_ORDER, *EXIT_ORDER]
    async with framework.running():
        assert framework.get_tape_store() is store


@pytest.mark.anyio
async def test_coroutine_provider_is_skipped_with_a_warning(
    framework: Framework, caplog: pytest.LogCaptureFixture
) -> None:
    class AsyncStore:
        @hookimpl
        async def provide_tape_store(self):
            return "never"

    framework.registry.register(AsyncStore(), "asyncstore")
    with caplog.at_level(logging.WARNING):
        async with framework.running():
            assert framework.get_tape_store() is None
    assert any(
        "hook.async_not_supported hook=provide_tape_store adapter=asyncstore" in r.getMessage()
        for r in caplog.records
    )


# -- environments -------------------------------------------------------------------------


class EnvironmentProvider:
    def __init__(self, log: list[str], fail_close: tuple[str, ...] = ()) -> None:
        self.log = log
        self.calls: list[tuple[str, Path]] = []
        self.fail_close = fail_close

    @hookimpl
    async def provide_environment(self, session_id, workspace):
        self.calls.append((session_id, workspace))
        if session_id == "none":
            return None
        name = f"{session_id}#{len(self.calls)}"
        return FakeEnvironment(name, self.log, fail_close=session_id in self.fail_close)


@pytest.mark.anyio
async def test_environment_is_cached_per_session_within_a_scope(
    framework: Framework,
) -> None:
    log: list[str] = []
    provider = EnvironmentProvider(log)
    framework.registry.register(provider, "envs")
    async with framework.running():
        first = await framework.get_environment("s1")
        assert isinstance(first, FakeEnvironment)
        assert await framework.get_environment("s1") is first
        other = await framework.get_environment("s2")
        assert other is not first
        assert await framework.get_environment("none") is None
        assert await framework.get_environment("none") is None
        assert [s for s, _ in provider.calls] == ["s1", "s2", "none"]
        assert all(workspace == framework.workspace for _, workspace in provider.calls)
        assert log == []
    assert sorted(log) == ["close s1#1", "close s2#2"]

    # A fresh scope asks the provider again.
    async with framework.running():
        again = await framework.get_environment("s1")
        assert again is not first
        assert await framework.get_environment("none") is None
    assert [s for s, _ in provider.calls] == ["s1", "s2", "none", "s1", "none"]
    assert log[-1] == "close s1#4"


@pytest.mark.anyio
async def test_environment_close_failures_are_logged_and_the_others_still_close(
    framework: Framework, caplog: pytest.LogCaptureFixture
) -> None:
    log: list[str] = []
    framework.registry.register(EnvironmentProvider(log, fail_close=("s1", "s2")), "envs")
    framework.registry.register(StoreProvider(log, object()), "store")
    with caplog.at_level(logging.WARNING, logger=FRAMEWORK_LOGGER):
        async with framework.running():
            for session_id in ("s1", "s2", "s3"):
                await framework.get_environment(session_id)
    closes = [entry for entry in log if entry.startswith("close")]
    assert sorted(closes) == ["close s1#1", "close s2#2", "close s3#3"]
    # Environments close before the entered providers exit.
    assert log.index("exit store") > max(log.index(c) for c in closes)
    failures = [r.getMessage() for r in caplog.records if r.name == FRAMEWORK_LOGGER]
    assert any("s1" in m and "cannot close s1#1" in m for m in failures)
    assert any("s2" in m and "cannot close s2#2" in m for m in failures)
    assert not any("s3" in m for m in failures)


@pytest.mark.anyio
async def test_environments_close_also_when_the_body_raises(framework: Framework) -> None:
    log: list[str] = []
    framework.registry.register(EnvironmentProvider(log), "envs")
    with pytest.raises(LookupError):
        async with framework.running():
            await framework.get_environment("s1")
            raise LookupError("body")
    assert log == ["close s1#1"]


@pytest.mark.anyio
async def test_environment_of_the_wrong_type_is_a_type_error_and_not_cached(
    framework: Framework,
) -> None:
    calls: list[str] = []

    class Wrong:
        @hookimpl
        def provide_environment(self, session_id):
            calls.append(session_id)
            return "not an environment"

    framework.registry.register(Wrong(), "wrong")
    async with framework.running():
        with pytest.raises(TypeError, match="provide_environment must return Environment"):
            await framework.get_environment("s1")
        with pytest.raises(TypeError):
            await framework.get_environment("s1")
    assert calls == ["s1", "s1"]


@pytest.mark.anyio
async def test_environment_first_non_none_provider_wins(framework: Framework) -> None:
    log: list[str] = []
    low = EnvironmentProvider(log)
    framework.registry.register(low, "low")

    class High:
        @hookimpl
        def provide_environment(self, session_id, workspace):
            return FakeEnvironment("high", log) if session_id == "mine" else None

    framework.registry.register(High(), "high")
    async with framework.running():
        assert (await framework.get_environment("mine")).name == "high"
        assert (await framework.get_environment("yours")).name == "yours#1"
    assert [s for s, _ in low.calls] == ["yours"]


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


# -- steering --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_steer_message_without_an_inbox(framework: Framework) -> None:
    state: dict[str, Any] = {}
    assert await framework.steer_message({"content": "x"}, state) is False
    async with framework.running():
        assert await framework.steer_message({"content": "x"}, state) is False
    assert state == {}


@pytest.mark.anyio
async def test_steer_message_enqueues_and_sets_session_id(framework: Framework) -> None:
    inbox = RecordingInbox()
    framework.registry.register(PlainResources(None, inbox), "resources")
    async with framework.running():
        message = types.SimpleNamespace(channel="cli", chat_id="7", context={"a": 1})
        state: dict[str, Any] = {}
        assert await framework.steer_message(message, state, reason="user typed") is True
        assert inbox.messages == [(message, state)]
        assert state == {"session_id": "cli:7"}
        assert message.context == {"a": 1, "steering_reason": "user typed"}

        # An existing session_id is kept; a dict envelope refuses the reason silently.
        kept = {"session_id": "mine"}
        raw = {"content": "x", "session_id": "other"}
        assert await framework.steer_message(raw, kept, reason="why") is True
        assert kept == {"session_id": "mine"}
        assert inbox.messages[-1] == (raw, kept)
        assert "context" not in raw
    assert await framework.steer_message({"content": "x"}, {}) is False


@pytest.mark.anyio
async def test_concurrent_first_requests_share_one_environment(framework: Framework) -> None:
    log: list[str] = []
    release_first = anyio.Event()
    created: list[FakeEnvironment] = []

    class Racing:
        @hookimpl
        async def provide_environment(self, session_id):
            index = len(created)
            environment = FakeEnvironment(f"env{index}", log)
            created.append(environment)
            if index == 0:
                await release_first.wait()  # the first request finishes last
            return environment

    framework.registry.register(Racing(), "racing")
    results: dict[str, Any] = {}

    async def request(key: str) -> None:
        results[key] = await framework.get_environment("s")

    async with framework.running():
        async with anyio.create_task_group() as group:
            group.start_soon(request, "slow")
            await anyio.wait_all_tasks_blocked()
            group.start_soon(request, "fast")
            await anyio.wait_all_tasks_blocked()
            release_first.set()
        assert len(created) == 2
        # The first value stored wins; the loser is closed at once and both get the winner.
        assert results["slow"] is results["fast"] is created[1]
        assert log == ["close env0"]
    assert log == ["close env0", "close env1"]
