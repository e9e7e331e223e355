"""Framework resources: the running() scope and its providers, per-session environments and
steering through the inbox (the collectors are in test_framework_collectors.py)."""

from __future__ import annotations

import logging
import types
from pathlib import Path
from typing import Any

import anyio
import pytest
from recorders import FakeEnvironment

from hookline.kernel import hookimpl
from hookline.kernel.framework.core import Framework

FRAMEWORK_LOGGER = "hookline.kernel.framework.core"


RUNTIME_LOGGER = "hookline.kernel.runtime"


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
