"""Typed hooks: each hook of ``HOOK_SPECS`` as a ``typing.Protocol`` that type checkers
enforce.

Generated from ``hooks.py`` by ``_generate.py`` (``python -m hookline.kernel._generate``):
edit the specs there, never this file (a test fails while it is stale).

``HooklineSpecs`` (``hooks.py``) declares every hook on one class, so it cannot type a
plugin that implements two of them. Here each hook has two protocols:

- ``<Hook>Hook`` (``SystemPromptHook``, ...): an object with a method named after the
  hook. A plugin class subclasses the ones it implements, or an instance, class or module
  is assigned to one (``_: SystemPromptHook = MyPlugin()``).
- ``<Hook>Impl`` (``SystemPromptImpl``, ...): one implementation function, whatever its
  name (a ``specname`` method, a module function).

Parameters are keyword-only, because the kernel passes them by keyword: an
implementation may list them in any order, as ordinary or as keyword-only parameters
(the signature copied from here registers as it is), and a misspelled name is an error
(with positional parameters mypy checks types but not names). A protocol method takes every
parameter of its hook; an implementation that uses fewer adds ``**_: object``, which the
kernel never fills. A hook dispatched on an async path returns ``MaybeAwaitable[X]``, so
``def`` and ``async def`` both fit; a sync-path hook returns exactly its spec's type, so
an ``async def`` implementation, which that path would skip, is an error.

Nothing here runs in the kernel: the module exists for type checkers and for plugin
classes that subclass a protocol. The hook types are imported for type checkers only, so
importing this module costs little more than creating its classes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from .channels import AdmitDecision, Channel, MessageHandler, SteeringInbox, TurnSnapshot
    from .envelope import Envelope
    from .environment import Environment
    from .interception import (
        LLMCallDecision,
        LLMCallRequest,
        LLMCallResult,
        ToolCall,
        ToolCallDecision,
        ToolCallResult,
    )
    from .models import ModelOptions
    from .prompt import LegacyPrompt, UserContent
    from .streaming import AsyncStreamEvents, StreamState
    from .tape import AsyncTapeStore, TapeContext, TapeSidecar, TapeStore
    from .tools import Tool
    from .turn import TurnState

__all__ = [
    "HOOK_PROTOCOLS",
    "IMPL_PROTOCOLS",
    "AdmitMessageHook",
    "AdmitMessageImpl",
    "AfterLLMCallHook",
    "AfterLLMCallImpl",
    "AfterToolCallHook",
    "AfterToolCallImpl",
    "BeforeLLMCallHook",
    "BeforeLLMCallImpl",
    "BeforeToolCallHook",
    "BeforeToolCallImpl",
    "BuildPromptHook",
    "BuildPromptImpl",
    "BuildTapeContextHook",
    "BuildTapeContextImpl",
    "ContinuePromptHook",
    "ContinuePromptImpl",
    "DispatchOutboundHook",
    "DispatchOutboundImpl",
    "LoadStateHook",
    "LoadStateImpl",
    "MaybeAwaitable",
    "OnErrorHook",
    "OnErrorImpl",
    "OnboardConfigHook",
    "OnboardConfigImpl",
    "ProvideChannelsHook",
    "ProvideChannelsImpl",
    "ProvideEnvironmentHook",
    "ProvideEnvironmentImpl",
    "ProvideLifespanHook",
    "ProvideLifespanImpl",
    "ProvideModelOptionsHook",
    "ProvideModelOptionsImpl",
    "ProvideSteeringInboxHook",
    "ProvideSteeringInboxImpl",
    "ProvideTapeSidecarHook",
    "ProvideTapeSidecarImpl",
    "ProvideTapeStoreHook",
    "ProvideTapeStoreImpl",
    "ProvideToolsHook",
    "ProvideToolsImpl",
    "RegisterCLICommandsHook",
    "RegisterCLICommandsImpl",
    "RenderOutboundHook",
    "RenderOutboundImpl",
    "ResolveSessionHook",
    "ResolveSessionImpl",
    "RunModelHook",
    "RunModelImpl",
    "RunModelStreamHook",
    "RunModelStreamImpl",
    "SaveStateHook",
    "SaveStateImpl",
    "SystemPromptHook",
    "SystemPromptImpl",
]

_T = TypeVar("_T")

MaybeAwaitable: TypeAlias = _T | Awaitable[_T]
"""What an async-path hook returns: its value, or an awaitable of it (``async def``)."""


# Turn hooks.
class ResolveSessionHook(Protocol):
    """A plugin implementing ``resolve_session`` (first; sync or async)."""

    def resolve_session(self, *, message: Envelope) -> MaybeAwaitable[str | None]: ...


class ResolveSessionImpl(Protocol):
    """One implementation function of ``resolve_session``, whatever its name."""

    def __call__(self, *, message: Envelope) -> MaybeAwaitable[str | None]: ...


class LoadStateHook(Protocol):
    """A plugin implementing ``load_state`` (many; sync or async)."""

    def load_state(
        self, *, message: Envelope, session_id: str
    ) -> MaybeAwaitable[TurnState | None]: ...


class LoadStateImpl(Protocol):
    """One implementation function of ``load_state``, whatever its name."""

    def __call__(
        self, *, message: Envelope, session_id: str
    ) -> MaybeAwaitable[TurnState | None]: ...


class BuildPromptHook(Protocol):
    """A plugin implementing ``build_prompt`` (first; sync or async)."""

    def build_prompt(
        self, *, message: Envelope, session_id: str, state: TurnState
    ) -> MaybeAwaitable[list[UserContent] | LegacyPrompt | None]: ...


class BuildPromptImpl(Protocol):
    """One implementation function of ``build_prompt``, whatever its name."""

    def __call__(
        self, *, message: Envelope, session_id: str, state: TurnState
    ) -> MaybeAwaitable[list[UserContent] | LegacyPrompt | None]: ...


class RunModelHook(Protocol):
    """A plugin implementing ``run_model`` (first; sync or async)."""

    def run_model(
        self, *, prompt: LegacyPrompt, session_id: str, state: TurnState
    ) -> MaybeAwaitable[str | None]: ...


class RunModelImpl(Protocol):
    """One implementation function of ``run_model``, whatever its name."""

    def __call__(
        self, *, prompt: LegacyPrompt, session_id: str, state: TurnState
    ) -> MaybeAwaitable[str | None]: ...


class RunModelStreamHook(Protocol):
    """A plugin implementing ``run_model_stream`` (first; sync or async)."""

    def run_model_stream(
        self, *, prompt: LegacyPrompt, session_id: str, state: TurnState
    ) -> MaybeAwaitable[AsyncStreamEvents | None]: ...


class RunModelStreamImpl(Protocol):
    """One implementation function of ``run_model_stream``, whatever its name."""

    def __call__(
        self, *, prompt: LegacyPrompt, session_id: str, state: TurnState
    ) -> MaybeAwaitable[AsyncStreamEvents | None]: ...


class ContinuePromptHook(Protocol):
    """A plugin implementing ``continue_prompt`` (first; sync or async)."""

    def continue_prompt(
        self, *, prompt: LegacyPrompt | None, tape: Any, state: StreamState | None
    ) -> MaybeAwaitable[str | None]: ...


class ContinuePromptImpl(Protocol):
    """One implementation function of ``continue_prompt``, whatever its name."""

    def __call__(
        self, *, prompt: LegacyPrompt | None, tape: Any, state: StreamState | None
    ) -> MaybeAwaitable[str | None]: ...


class SaveStateHook(Protocol):
    """A plugin implementing ``save_state`` (many; sync or async)."""

    def save_state(
        self, *, session_id: str, state: TurnState, message: Envelope, model_output: str
    ) -> MaybeAwaitable[None]: ...


class SaveStateImpl(Protocol):
    """One implementation function of ``save_state``, whatever its name."""

    def __call__(
        self, *, session_id: str, state: TurnState, message: Envelope, model_output: str
    ) -> MaybeAwaitable[None]: ...


class RenderOutboundHook(Protocol):
    """A plugin implementing ``render_outbound`` (many; sync or async)."""

    def render_outbound(
        self, *, message: Envelope, session_id: str, state: TurnState, model_output: str
    ) -> MaybeAwaitable[list[Envelope] | Envelope | None]: ...


class RenderOutboundImpl(Protocol):
    """One implementation function of ``render_outbound``, whatever its name."""

    def __call__(
        self, *, message: Envelope, session_id: str, state: TurnState, model_output: str
    ) -> MaybeAwaitable[list[Envelope] | Envelope | None]: ...


class DispatchOutboundHook(Protocol):
    """A plugin implementing ``dispatch_outbound`` (many; sync or async)."""

    def dispatch_outbound(self, *, message: Envelope) -> MaybeAwaitable[bool | None]: ...


class DispatchOutboundImpl(Protocol):
    """One implementation function of ``dispatch_outbound``, whatever its name."""

    def __call__(self, *, message: Envelope) -> MaybeAwaitable[bool | None]: ...


# Application resources and configuration.
class RegisterCLICommandsHook(Protocol):
    """A plugin implementing ``register_cli_commands`` (many_sync: sync only)."""

    def register_cli_commands(self, *, app: Any) -> None: ...


class RegisterCLICommandsImpl(Protocol):
    """One implementation function of ``register_cli_commands``, whatever its name."""

    def __call__(self, *, app: Any) -> None: ...


class OnboardConfigHook(Protocol):
    """A plugin implementing ``onboard_config`` (many_sync: sync only)."""

    def onboard_config(self, *, current_config: dict[str, Any]) -> dict[str, Any] | None: ...


class OnboardConfigImpl(Protocol):
    """One implementation function of ``onboard_config``, whatever its name."""

    def __call__(self, *, current_config: dict[str, Any]) -> dict[str, Any] | None: ...


class ProvideModelOptionsHook(Protocol):
    """A plugin implementing ``provide_model_options`` (many; sync or async)."""

    def provide_model_options(
        self, *, session_id: str, workspace: Path
    ) -> MaybeAwaitable[ModelOptions | None]: ...


class ProvideModelOptionsImpl(Protocol):
    """One implementation function of ``provide_model_options``, whatever its name."""

    def __call__(
        self, *, session_id: str, workspace: Path
    ) -> MaybeAwaitable[ModelOptions | None]: ...


class ProvideEnvironmentHook(Protocol):
    """A plugin implementing ``provide_environment`` (first; sync or async)."""

    def provide_environment(
        self, *, session_id: str, workspace: Path
    ) -> MaybeAwaitable[Environment | None]: ...


class ProvideEnvironmentImpl(Protocol):
    """One implementation function of ``provide_environment``, whatever its name."""

    def __call__(
        self, *, session_id: str, workspace: Path
    ) -> MaybeAwaitable[Environment | None]: ...


class SystemPromptHook(Protocol):
    """A plugin implementing ``system_prompt`` (many_sync: sync only)."""

    def system_prompt(self, *, prompt: LegacyPrompt, state: TurnState) -> str | None: ...


class SystemPromptImpl(Protocol):
    """One implementation function of ``system_prompt``, whatever its name."""

    def __call__(self, *, prompt: LegacyPrompt, state: TurnState) -> str | None: ...


class ProvideTapeStoreHook(Protocol):
    """A plugin implementing ``provide_tape_store`` (first_sync: sync, or a generator)."""

    def provide_tape_store(
        self,
    ) -> TapeStore | AsyncTapeStore | Iterator[Any] | AsyncIterator[Any] | None: ...


class ProvideTapeStoreImpl(Protocol):
    """One implementation function of ``provide_tape_store``, whatever its name."""

    def __call__(
        self,
    ) -> TapeStore | AsyncTapeStore | Iterator[Any] | AsyncIterator[Any] | None: ...


class ProvideLifespanHook(Protocol):
    """A plugin implementing ``provide_lifespan`` (many_sync: sync, or a generator)."""

    def provide_lifespan(self) -> Iterator[None] | AsyncIterator[None] | None: ...


class ProvideLifespanImpl(Protocol):
    """One implementation function of ``provide_lifespan``, whatever its name."""

    def __call__(self) -> Iterator[None] | AsyncIterator[None] | None: ...


class ProvideTapeSidecarHook(Protocol):
    """A plugin implementing ``provide_tape_sidecar`` (many_sync: sync only)."""

    def provide_tape_sidecar(self) -> TapeSidecar | None: ...


class ProvideTapeSidecarImpl(Protocol):
    """One implementation function of ``provide_tape_sidecar``, whatever its name."""

    def __call__(self) -> TapeSidecar | None: ...


class ProvideChannelsHook(Protocol):
    """A plugin implementing ``provide_channels`` (many_sync: sync only)."""

    def provide_channels(self, *, message_handler: MessageHandler) -> list[Channel] | None: ...


class ProvideChannelsImpl(Protocol):
    """One implementation function of ``provide_channels``, whatever its name."""

    def __call__(self, *, message_handler: MessageHandler) -> list[Channel] | None: ...


class BuildTapeContextHook(Protocol):
    """A plugin implementing ``build_tape_context`` (first_sync: sync only)."""

    def build_tape_context(self) -> TapeContext | None: ...


class BuildTapeContextImpl(Protocol):
    """One implementation function of ``build_tape_context``, whatever its name."""

    def __call__(self) -> TapeContext | None: ...


class AdmitMessageHook(Protocol):
    """A plugin implementing ``admit_message`` (first; sync or async)."""

    def admit_message(
        self, *, session_id: str, message: Envelope, turn: TurnSnapshot
    ) -> MaybeAwaitable[AdmitDecision | None]: ...


class AdmitMessageImpl(Protocol):
    """One implementation function of ``admit_message``, whatever its name."""

    def __call__(
        self, *, session_id: str, message: Envelope, turn: TurnSnapshot
    ) -> MaybeAwaitable[AdmitDecision | None]: ...


class ProvideToolsHook(Protocol):
    """A plugin implementing ``provide_tools`` (many_sync: sync only)."""

    def provide_tools(self) -> list[Tool] | None: ...


class ProvideToolsImpl(Protocol):
    """One implementation function of ``provide_tools``, whatever its name."""

    def __call__(self) -> list[Tool] | None: ...


class ProvideSteeringInboxHook(Protocol):
    """A plugin implementing ``provide_steering_inbox`` (first_sync: sync, or a generator)."""

    def provide_steering_inbox(
        self,
    ) -> SteeringInbox | Iterator[Any] | AsyncIterator[Any] | None: ...


class ProvideSteeringInboxImpl(Protocol):
    """One implementation function of ``provide_steering_inbox``, whatever its name."""

    def __call__(self) -> SteeringInbox | Iterator[Any] | AsyncIterator[Any] | None: ...


class OnErrorHook(Protocol):
    """A plugin implementing ``on_error`` (many; sync or async)."""

    def on_error(
        self, *, stage: str, error: Exception, message: Envelope | None
    ) -> MaybeAwaitable[None]: ...


class OnErrorImpl(Protocol):
    """One implementation function of ``on_error``, whatever its name."""

    def __call__(
        self, *, stage: str, error: Exception, message: Envelope | None
    ) -> MaybeAwaitable[None]: ...


# Agent interception.
class BeforeLLMCallHook(Protocol):
    """A plugin implementing ``before_llm_call`` (first; sync or async)."""

    def before_llm_call(
        self, *, request: LLMCallRequest, state: TurnState
    ) -> MaybeAwaitable[LLMCallRequest | LLMCallDecision | None]: ...


class BeforeLLMCallImpl(Protocol):
    """One implementation function of ``before_llm_call``, whatever its name."""

    def __call__(
        self, *, request: LLMCallRequest, state: TurnState
    ) -> MaybeAwaitable[LLMCallRequest | LLMCallDecision | None]: ...


class AfterLLMCallHook(Protocol):
    """A plugin implementing ``after_llm_call`` (many; sync or async)."""

    def after_llm_call(
        self, *, request: LLMCallRequest, result: LLMCallResult, state: TurnState
    ) -> MaybeAwaitable[None]: ...


class AfterLLMCallImpl(Protocol):
    """One implementation function of ``after_llm_call``, whatever its name."""

    def __call__(
        self, *, request: LLMCallRequest, result: LLMCallResult, state: TurnState
    ) -> MaybeAwaitable[None]: ...


class BeforeToolCallHook(Protocol):
    """A plugin implementing ``before_tool_call`` (first; sync or async)."""

    def before_tool_call(
        self, *, call: ToolCall, state: TurnState
    ) -> MaybeAwaitable[ToolCallDecision | None]: ...


class BeforeToolCallImpl(Protocol):
    """One implementation function of ``before_tool_call``, whatever its name."""

    def __call__(
        self, *, call: ToolCall, state: TurnState
    ) -> MaybeAwaitable[ToolCallDecision | None]: ...


class AfterToolCallHook(Protocol):
    """A plugin implementing ``after_tool_call`` (many; sync or async)."""

    def after_tool_call(
        self, *, call: ToolCall, result: ToolCallResult, state: TurnState
    ) -> MaybeAwaitable[None]: ...


class AfterToolCallImpl(Protocol):
    """One implementation function of ``after_tool_call``, whatever its name."""

    def __call__(
        self, *, call: ToolCall, result: ToolCallResult, state: TurnState
    ) -> MaybeAwaitable[None]: ...


HOOK_PROTOCOLS: Mapping[str, type] = MappingProxyType({
    "resolve_session": ResolveSessionHook,
    "load_state": LoadStateHook,
    "build_prompt": BuildPromptHook,
    "run_model": RunModelHook,
    "run_model_stream": RunModelStreamHook,
    "continue_prompt": ContinuePromptHook,
    "save_state": SaveStateHook,
    "render_outbound": RenderOutboundHook,
    "dispatch_outbound": DispatchOutboundHook,
    "register_cli_commands": RegisterCLICommandsHook,
    "onboard_config": OnboardConfigHook,
    "provide_model_options": ProvideModelOptionsHook,
    "provide_environment": ProvideEnvironmentHook,
    "system_prompt": SystemPromptHook,
    "provide_tape_store": ProvideTapeStoreHook,
    "provide_lifespan": ProvideLifespanHook,
    "provide_tape_sidecar": ProvideTapeSidecarHook,
    "provide_channels": ProvideChannelsHook,
    "build_tape_context": BuildTapeContextHook,
    "admit_message": AdmitMessageHook,
    "provide_tools": ProvideToolsHook,
    "provide_steering_inbox": ProvideSteeringInboxHook,
    "on_error": OnErrorHook,
    "before_llm_call": BeforeLLMCallHook,
    "after_llm_call": AfterLLMCallHook,
    "before_tool_call": BeforeToolCallHook,
    "after_tool_call": AfterToolCallHook,
})
"""Hook name -> its ``<Hook>Hook`` protocol, in ``HOOK_SPECS`` order (for tools that look
a hook's typed description up by name)."""

IMPL_PROTOCOLS: Mapping[str, type] = MappingProxyType({
    "resolve_session": ResolveSessionImpl,
    "load_state": LoadStateImpl,
    "build_prompt": BuildPromptImpl,
    "run_model": RunModelImpl,
    "run_model_stream": RunModelStreamImpl,
    "continue_prompt": ContinuePromptImpl,
    "save_state": SaveStateImpl,
    "render_outbound": RenderOutboundImpl,
    "dispatch_outbound": DispatchOutboundImpl,
    "register_cli_commands": RegisterCLICommandsImpl,
    "onboard_config": OnboardConfigImpl,
    "provide_model_options": ProvideModelOptionsImpl,
    "provide_environment": ProvideEnvironmentImpl,
    "system_prompt": SystemPromptImpl,
    "provide_tape_store": ProvideTapeStoreImpl,
    "provide_lifespan": ProvideLifespanImpl,
    "provide_tape_sidecar": ProvideTapeSidecarImpl,
    "provide_channels": ProvideChannelsImpl,
    "build_tape_context": BuildTapeContextImpl,
    "admit_message": AdmitMessageImpl,
    "provide_tools": ProvideToolsImpl,
    "provide_steering_inbox": ProvideSteeringInboxImpl,
    "on_error": OnErrorImpl,
    "before_llm_call": BeforeLLMCallImpl,
    "after_llm_call": AfterLLMCallImpl,
    "before_tool_call": BeforeToolCallImpl,
    "after_tool_call": AfterToolCallImpl,
})
"""Hook name -> its ``<Hook>Impl`` protocol, in ``HOOK_SPECS`` order."""
