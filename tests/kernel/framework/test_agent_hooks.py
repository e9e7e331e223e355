"""PluginAgentHooks: chained interception of LLM and tool calls and the isolation of failing
plugins, run against a real Framework and its registry (the bus wiring and AgentPlugins
are in test_agent_hooks_bus.py)."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest
from agent_hooks_support import _call, _request

from hookline.kernel import hookimpl
from hookline.kernel.framework.agent_hooks import AgentPlugins, PluginAgentHooks
from hookline.kernel.framework.core import Framework
from hookline.kernel.interception import (
    LLMCallDecision,
    LLMCallRequest,
    LLMCallResult,
    ToolCall,
    ToolCallDecision,
    ToolCallResult,
)
from hookline.kernel.tools import ToolContext

LOGGER = "hookline.kernel.framework.agent_hooks"


def _messages(caplog: pytest.LogCaptureFixture, prefix: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.getMessage().startswith(prefix)]


def test_framework_owns_the_adapters(framework: Framework) -> None:
    assert isinstance(framework.agent_hooks, PluginAgentHooks)
    assert isinstance(framework.agent_plugins, AgentPlugins)
    assert framework.agent_hooks.registry is framework.registry
    assert framework.agent_plugins.agent_hooks is framework.agent_hooks


# -- before_llm_call -------------------------------------------------------------------


@pytest.mark.anyio
async def test_before_llm_call_without_plugins_returns_the_request(
    framework: Framework,
) -> None:
    request = _request()
    assert await framework.agent_hooks.before_llm_call(request, {}) == (request, None)


@pytest.mark.anyio
async def test_before_llm_call_chains_replacements(framework: Framework) -> None:
    seen: list[str] = []

    class Router:
        @hookimpl(tryfirst=True)
        def before_llm_call(self, request: LLMCallRequest) -> LLMCallRequest:
            seen.append(request.model)
            return dataclasses.replace(request, model="ollama:llama")

    class Limiter:
        @hookimpl
        async def before_llm_call(self, request: LLMCallRequest, state: dict) -> Any:
            seen.append(request.model)
            state["limited"] = True
            return dataclasses.replace(request, max_tokens=64)

    class Watcher:
        @hookimpl(trylast=True)
        def before_llm_call(self, request: LLMCallRequest) -> None:
            seen.append(f"{request.model}/{request.max_tokens}")

    for plugin in (Watcher(), Limiter(), Router()):
        framework.registry.register(plugin, name=type(plugin).__name__)
    state: dict[str, Any] = {}
    result, decision = await framework.agent_hooks.before_llm_call(_request(), state)

    assert decision is None
    assert (result.model, result.max_tokens) == ("ollama:llama", 64)
    assert seen == ["openai:gpt", "ollama:llama", "ollama:llama/64"]
    assert state == {"limited": True}


@pytest.mark.anyio
async def test_finish_decision_stops_the_chain(framework: Framework) -> None:
    called: list[str] = []

    class Cache:
        @hookimpl(tryfirst=True)
        async def before_llm_call(self, request: LLMCallRequest) -> LLMCallDecision:
            called.append("cache")
            return LLMCallDecision.finish("cached answer")

    class Later:
        @hookimpl
        def before_llm_call(self, request: LLMCallRequest) -> None:
            called.append("later")

    framework.registry.register(Later(), name="later")
    framework.registry.register(Cache(), name="cache")
    request = _request()
    final, decision = await framework.agent_hooks.before_llm_call(request, {})

    assert decision == LLMCallDecision.finish("cached answer")
    assert final == request  # the request as the chain left it comes with the decision
    assert called == ["cache"]


@pytest.mark.anyio
async def test_execution_order_tryfirst_normal_trylast(framework: Framework) -> None:
    order: list[str] = []

    def plugin(label: str, **opts: bool) -> object:
        class Plugin:
            @hookimpl(**opts)
            def before_llm_call(self, request: LLMCallRequest) -> None:
                order.append(label)

        return Plugin()

    framework.registry.register(plugin("normal-old"), name="normal-old")
    framework.registry.register(plugin("first", tryfirst=True), name="first")
    framework.registry.register(plugin("last-old", trylast=True), name="last-old")
    framework.registry.register(plugin("normal-new"), name="normal-new")
    framework.registry.register(plugin("last-new", trylast=True), name="last-new")
    await framework.agent_hooks.before_llm_call(_request(), {})

    assert order == ["first", "normal-new", "normal-old", "last-old", "last-new"]


@pytest.mark.anyio
async def test_plugins_are_read_at_call_time(framework: Framework) -> None:
    hooks = framework.agent_hooks

    class Router:
        @hookimpl
        def before_llm_call(self, request: LLMCallRequest) -> LLMCallRequest:
            return dataclasses.replace(request, model="late:model")

    assert (await hooks.before_llm_call(_request(), {}))[0].model == "openai:gpt"
    framework.registry.register(Router(), name="router")
    assert (await hooks.before_llm_call(_request(), {}))[0].model == "late:model"
    framework.registry.unregister("router")
    assert (await hooks.before_llm_call(_request(), {}))[0].model == "openai:gpt"


@pytest.mark.anyio
async def test_before_llm_call_bad_return_is_logged_and_ignored(
    framework: Framework, caplog: pytest.LogCaptureFixture
) -> None:
    class Confused:
        @hookimpl(tryfirst=True)
        def before_llm_call(self, request: LLMCallRequest) -> Any:
            return {"model": "nope"}

    class Router:
        @hookimpl
        def before_llm_call(self, request: LLMCallRequest) -> LLMCallRequest:
            return dataclasses.replace(request, model="routed:model")

    framework.registry.register(Router(), name="router")
    framework.registry.register(Confused(), name="confused")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        result, decision = await framework.agent_hooks.before_llm_call(_request(), {})

    assert decision is None and result.model == "routed:model"
    [record] = _messages(caplog, "hook.agent_hook_bad_return")
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (
        "hook.agent_hook_bad_return hook=before_llm_call adapter=confused got=dict "
        "expected=LLMCallRequest | LLMCallDecision | None"
    )


@pytest.mark.anyio
async def test_exceptions_are_logged_and_the_chain_continues(
    framework: Framework, caplog: pytest.LogCaptureFixture
) -> None:
    class SyncBroken:
        @hookimpl(tryfirst=True)
        def before_llm_call(self, request: LLMCallRequest) -> None:
            raise ValueError("sync boom")

    class AsyncBroken:
        @hookimpl
        async def before_llm_call(self, request: LLMCallRequest) -> None:
            raise RuntimeError("async boom")

    class Router:
        @hookimpl(trylast=True)
        def before_llm_call(self, request: LLMCallRequest) -> LLMCallRequest:
            return dataclasses.replace(request, model="still:called")

    framework.registry.register(Router(), name="router")
    framework.registry.register(AsyncBroken(), name="async-broken")
    framework.registry.register(SyncBroken(), name="sync-broken")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        result, decision = await framework.agent_hooks.before_llm_call(_request(), {})

    assert decision is None and result.model == "still:called"
    records = _messages(caplog, "hook.agent_hook_failed")
    assert [r.getMessage() for r in records] == [
        "hook.agent_hook_failed hook=before_llm_call adapter=sync-broken",
        "hook.agent_hook_failed hook=before_llm_call adapter=async-broken",
    ]
    assert [type(r.exc_info[1]) for r in records if r.exc_info] == [ValueError, RuntimeError]


@pytest.mark.anyio
async def test_base_exceptions_are_not_caught(framework: Framework) -> None:
    class Interrupter:
        @hookimpl
        async def before_tool_call(self, call: ToolCall) -> None:
            raise KeyboardInterrupt

    framework.registry.register(Interrupter(), name="interrupter")
    with pytest.raises(KeyboardInterrupt):
        await framework.agent_hooks.before_tool_call(_call(), {})


# -- after_llm_call --------------------------------------------------------------------


@pytest.mark.anyio
async def test_after_llm_call_runs_every_implementation(
    framework: Framework, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[tuple[str, Any]] = []
    failure = ConnectionError("provider down")

    class Broken:
        @hookimpl(tryfirst=True)
        def after_llm_call(self, result: LLMCallResult) -> None:
            raise ValueError("observer boom")

    class Recorder:
        @hookimpl
        async def after_llm_call(
            self, request: LLMCallRequest, result: LLMCallResult, state: dict
        ) -> str:
            seen.append(("async", result.error))
            return "ignored"

    class Counter:
        @hookimpl(trylast=True)
        def after_llm_call(self, result: LLMCallResult) -> None:
            seen.append(("sync", result.text))

    framework.registry.register(Counter(), name="counter")
    framework.registry.register(Recorder(), name="recorder")
    framework.registry.register(Broken(), name="broken")
    result = LLMCallResult("run-1", text="partial", error=failure)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        returned = await framework.agent_hooks.after_llm_call(_request(), result, {})

    assert returned is None
    assert seen == [("async", failure), ("sync", "partial")]
    [record] = _messages(caplog, "hook.agent_hook_failed")
    assert record.getMessage() == "hook.agent_hook_failed hook=after_llm_call adapter=broken"
    assert record.levelname == "WARNING", "isolated failures are warnings, as in the reference"
    assert record.exc_info is not None and record.exc_info[1] is not None, "with the traceback"


# -- before_tool_call ------------------------------------------------------------------


@pytest.mark.anyio
async def test_proceed_arguments_fold_through_the_chain(framework: Framework) -> None:
    seen: list[dict[str, Any]] = []
    given = {"query": "cats", "limit": 5}

    class Rewriter:
        @hookimpl(tryfirst=True)
        def before_tool_call(self, call: ToolCall) -> ToolCallDecision:
            seen.append(call.arguments)
            return ToolCallDecision.proceed(given)

    class Keeper:
        @hookimpl
        async def before_tool_call(self, call: ToolCall) -> ToolCallDecision:
            seen.append(call.arguments)
            return ToolCallDecision.proceed()

    class Limiter:
        @hookimpl(trylast=True)
        def before_tool_call(self, call: ToolCall, state: dict) -> ToolCallDecision:
            seen.append(call.arguments)
            return ToolCallDecision.proceed({**call.arguments, "limit": state["max"]})

    framework.registry.register(Limiter(), name="limiter")
    framework.registry.register(Keeper(), name="keeper")
    framework.registry.register(Rewriter(), name="rewriter")
    context = ToolContext(run_id="run-1", code_mode=True)
    original = dataclasses.replace(_call(query="dogs"), context=context)
    call, decision = await framework.agent_hooks.before_tool_call(original, {"max": 2})
    given["query"] = "edited by the plugin afterwards"

    assert seen == [{"query": "dogs"}, {"query": "cats", "limit": 5},
                    {"query": "cats", "limit": 5}]
    assert call.arguments == {"query": "cats", "limit": 2}
    assert call.context is context and call.run_id == "run-1" and call.tool == "search"
    assert decision.action == "proceed" and decision.arguments == {"query": "cats", "limit": 2}
    assert seen[1] is not given  # a copy, so the plugin's later edit changed nothing
    assert original.arguments == {"query": "dogs"}


@pytest.mark.anyio
async def test_without_plugins_the_call_proceeds_unchanged(framework: Framework) -> None:
    original = _call(query="dogs")
    call, decision = await framework.agent_hooks.before_tool_call(original, {})
    assert call is original
    assert decision == ToolCallDecision.proceed({"query": "dogs"})


@pytest.mark.anyio
@pytest.mark.parametrize(
    "stop",
    [ToolCallDecision.replace({"cached": True}), ToolCallDecision.deny("not allowed")],
    ids=["replace", "deny"],
)
async def test_replace_and_deny_stop_the_chain(
    framework: Framework, stop: ToolCallDecision
) -> None:
    called: list[str] = []

    class Rewriter:
        @hookimpl(tryfirst=True)
        def before_tool_call(self, call: ToolCall) -> ToolCallDecision:
            called.append("rewriter")
            return ToolCallDecision.proceed({"query": "rewritten"})

    class Policy:
        @hookimpl
        async def before_tool_call(self, call: ToolCall) -> ToolCallDecision:
            called.append("policy")
            return stop

    class Later:
        @hookimpl(trylast=True)
        def before_tool_call(self, call: ToolCall) -> None:
            called.append("later")

    framework.registry.register(Later(), name="later")
    framework.registry.register(Policy(), name="policy")
    framework.registry.register(Rewriter(), name="rewriter")
    call, decision = await framework.agent_hooks.before_tool_call(_call(query="x"), {})

    assert called == ["rewriter", "policy"]
    assert decision is stop
    assert call.arguments == {"query": "rewritten"}


@pytest.mark.anyio
async def test_before_tool_call_bad_return_and_failure_are_isolated(
    framework: Framework, caplog: pytest.LogCaptureFixture
) -> None:
    class Confused:
        @hookimpl(tryfirst=True)
        def before_tool_call(self, call: ToolCall) -> Any:
            return "deny"

    class Broken:
        @hookimpl
        async def before_tool_call(self, call: ToolCall) -> None:
            raise LookupError("policy store down")

    class Rewriter:
        @hookimpl(trylast=True)
        def before_tool_call(self, call: ToolCall) -> ToolCallDecision:
            return ToolCallDecision.proceed({"query": "safe"})

    framework.registry.register(Rewriter(), name="rewriter")
    framework.registry.register(Broken(), name="broken")
    framework.registry.register(Confused(), name="confused")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        call, decision = await framework.agent_hooks.before_tool_call(_call(query="x"), {})

    assert decision.action == "proceed" and call.arguments == {"query": "safe"}
    assert [r.getMessage() for r in _messages(caplog, "hook.agent_hook_bad_return")] == [
        "hook.agent_hook_bad_return hook=before_tool_call adapter=confused got=str "
        "expected=ToolCallDecision | None"
    ]
    assert [r.getMessage() for r in _messages(caplog, "hook.agent_hook_failed")] == [
        "hook.agent_hook_failed hook=before_tool_call adapter=broken"
    ]


# -- after_tool_call -------------------------------------------------------------------


@pytest.mark.anyio
async def test_after_tool_call_shares_one_mutable_result(
    framework: Framework, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[Any] = []
    failure = TimeoutError("tool timed out")

    class Explainer:
        @hookimpl(tryfirst=True)
        def after_tool_call(self, result: ToolCallResult) -> None:
            seen.append(result.result)
            result.result = f"explained: {result.error}"

    class Broken:
        @hookimpl
        def after_tool_call(self, result: ToolCallResult) -> None:
            result.result = "half-written"
            raise ValueError("observer boom")

    class Reader:
        @hookimpl(trylast=True)
        async def after_tool_call(
            self, call: ToolCall, result: ToolCallResult, state: dict
        ) -> str:
            seen.append((call.tool, result.result, result.error))
            return "ignored"

    framework.registry.register(Reader(), name="reader")
    framework.registry.register(Broken(), name="broken")
    framework.registry.register(Explainer(), name="explainer")
    result = ToolCallResult("run-1", "search", {"query": "x"}, error=failure)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        returned = await framework.agent_hooks.after_tool_call(_call(query="x"), result, {})

    assert returned is None
    assert seen == [None, ("search", "half-written", failure)]
    assert result.result == "half-written"  # the caller sees the last assignment
    assert result.error is failure
    assert [r.getMessage() for r in _messages(caplog, "hook.agent_hook_failed")] == [
        "hook.agent_hook_failed hook=after_tool_call adapter=broken"
    ]
