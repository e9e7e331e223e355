"""Plugins implementing all 27 hooks the typed way: mypy --strict reports nothing here.

It covers the forms the kernel accepts: an instance, a class registered as itself (static
and class methods), a module (this one), ``specname`` functions; sync and async
implementations, generator providers, every parameter in any order, and subsets of them
through ``**_: object``. test_typed_hooks.py also registers these plugins and calls them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hookline.kernel import (
    HOOK_PROTOCOLS,
    AdmitDecision,
    AdmitMessageHook,
    AfterLLMCallHook,
    AfterToolCallHook,
    AsyncStreamEvents,
    BeforeLLMCallHook,
    BeforeToolCallHook,
    BuildPromptHook,
    BuildTapeContextHook,
    Channel,
    ContinuePromptHook,
    DispatchOutboundHook,
    DispatchOutboundImpl,
    Envelope,
    Environment,
    LegacyPrompt,
    LLMCallDecision,
    LLMCallRequest,
    LLMCallResult,
    LoadStateHook,
    LoadStateImpl,
    MessageHandler,
    ModelOptions,
    OnboardConfigHook,
    OnErrorHook,
    ProvideChannelsHook,
    ProvideEnvironmentHook,
    ProvideLifespanHook,
    ProvideLifespanImpl,
    ProvideModelOptionsHook,
    ProvideSteeringInboxHook,
    ProvideTapeSidecarHook,
    ProvideTapeStoreHook,
    ProvideToolsHook,
    RegisterCLICommandsHook,
    RenderOutboundHook,
    ResolveSessionHook,
    RunModelHook,
    RunModelStreamHook,
    SaveStateHook,
    StreamState,
    SystemPromptHook,
    TapeContext,
    TapeSidecar,
    TapeStore,
    Tool,
    ToolCall,
    ToolCallDecision,
    ToolCallResult,
    TurnSnapshot,
    TurnState,
    UserContent,
    hookimpl,
)


class TurnHooks(
    ResolveSessionHook, LoadStateHook, BuildPromptHook, RunModelHook, RunModelStreamHook,
    ContinuePromptHook, SaveStateHook, RenderOutboundHook, DispatchOutboundHook,
):
    """Every parameter, in another order than the spec's; sync and async alike."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    @hookimpl
    def resolve_session(self, message: Envelope) -> str:
        return f"{self.prefix}:{message['chat_id']}"

    @hookimpl
    async def load_state(self, session_id: str, message: Envelope) -> TurnState:
        return {"session": session_id}

    @hookimpl
    def build_prompt(
        self, state: TurnState, session_id: str, message: Envelope
    ) -> list[UserContent]:
        return [str(message)]

    @hookimpl
    async def run_model(self, prompt: LegacyPrompt, session_id: str, state: TurnState) -> str:
        return "answer"

    @hookimpl
    def run_model_stream(
        self, prompt: LegacyPrompt, session_id: str, state: TurnState
    ) -> AsyncStreamEvents | None:
        return None

    @hookimpl
    def continue_prompt(
        self, prompt: LegacyPrompt | None, tape: Any, state: StreamState | None
    ) -> str | None:
        return None

    @hookimpl
    async def save_state(
        self, model_output: str, message: Envelope, state: TurnState, session_id: str
    ) -> None:
        state.clear()

    @hookimpl
    def render_outbound(
        self, message: Envelope, session_id: str, state: TurnState, model_output: str
    ) -> list[Envelope]:
        return [{"content": model_output}]

    @hookimpl
    def dispatch_outbound(self, message: Envelope) -> bool:
        return True


class Resources(
    RegisterCLICommandsHook, OnboardConfigHook, ProvideModelOptionsHook,
    ProvideEnvironmentHook, SystemPromptHook, ProvideTapeStoreHook, ProvideLifespanHook,
    ProvideTapeSidecarHook, ProvideChannelsHook, BuildTapeContextHook, AdmitMessageHook,
    ProvideToolsHook, ProvideSteeringInboxHook, OnErrorHook,
):
    """Subsets of the parameters through ``**_: object``; generator providers."""

    @hookimpl
    def register_cli_commands(self, app: Any) -> None:
        pass

    @hookimpl
    def onboard_config(self, current_config: dict[str, Any]) -> dict[str, Any]:
        return {"model": current_config.get("model", "m")}

    @hookimpl
    async def provide_model_options(self, session_id: str, **_: object) -> ModelOptions:
        return ModelOptions()

    @hookimpl
    async def provide_environment(self, workspace: Path, **_: object) -> Environment | None:
        return None

    @hookimpl
    def system_prompt(self, prompt: LegacyPrompt, **_: object) -> str:
        return "be brief"

    @hookimpl
    def provide_tape_store(self) -> Iterator[TapeStore | None]:
        yield None

    @hookimpl
    async def provide_lifespan(self) -> AsyncIterator[None]:
        yield

    @hookimpl
    def provide_tape_sidecar(self) -> TapeSidecar | None:
        return None

    @hookimpl
    def provide_channels(self, message_handler: MessageHandler) -> list[Channel]:
        return []

    @hookimpl
    def build_tape_context(self) -> TapeContext:
        return TapeContext()

    @hookimpl
    async def admit_message(self, turn: TurnSnapshot, **_: object) -> AdmitDecision | None:
        return AdmitDecision("process")

    @hookimpl
    def provide_tools(self) -> list[Tool]:
        return []

    @hookimpl
    def provide_steering_inbox(self) -> None:
        return None

    @hookimpl
    def on_error(self, stage: str, error: Exception, message: Envelope | None) -> None:
        print(stage, error)


class Interception(BeforeLLMCallHook, AfterLLMCallHook, BeforeToolCallHook, AfterToolCallHook):
    """A class registered as itself: static and class methods."""

    @staticmethod
    @hookimpl
    def before_llm_call(request: LLMCallRequest, state: TurnState) -> LLMCallDecision | None:
        return None

    @classmethod
    @hookimpl
    async def after_llm_call(
        cls, request: LLMCallRequest, result: LLMCallResult, state: TurnState
    ) -> None:
        pass

    @staticmethod
    @hookimpl
    async def before_tool_call(call: ToolCall, state: TurnState) -> ToolCallDecision:
        return ToolCallDecision()

    @staticmethod
    @hookimpl
    def after_tool_call(call: ToolCall, result: ToolCallResult, state: TurnState) -> None:
        pass


class Renamed:
    """Implementations under other names (specname), checked as functions."""

    @hookimpl(specname="load_state")
    def load_clock(self, session_id: str, **_: object) -> TurnState:
        return {"clock": "frozen"}

    @hookimpl(specname="provide_lifespan")
    def lifespan(self) -> Iterator[None]:
        yield


@hookimpl
async def dispatch_outbound(message: Envelope) -> bool | None:
    """A module-level implementation: this module is a plugin too."""
    return None


# The assignments that have an object checked without subclassing. They are for the type
# checker only: at run time, a module-level alias of a marked function (``function``, and
# the bound methods ``clock`` and ``lifespan``) would be one more implementation of this
# module, registered under the alias's name.
if TYPE_CHECKING:
    import good_plugin  # this very module: a module is checked as a plugin too

    turns: ResolveSessionHook = TurnHooks("chat")
    interception: BeforeToolCallHook = Interception
    module: DispatchOutboundHook = good_plugin
    clock: LoadStateImpl = Renamed().load_clock
    lifespan: ProvideLifespanImpl = Renamed().lifespan
    function: DispatchOutboundImpl = dispatch_outbound
    hook_names: list[str] = list(HOOK_PROTOCOLS)
