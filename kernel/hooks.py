"""The agent contract's 27 hooks: names, typed parameters, dispatch kinds, one line each.

The parameters of each spec method are the hook's parameters; registration checks every
implementation against them. The annotations are the contract's types, read by type
checkers and readers (the kernel itself checks only the results each hook's caller
documents). ``kind`` is the runtime primitive the framework dispatches the hook with
(see ``_dispatch.specs``); how the framework then combines the results (model kind
selection, chained interception, isolated observers, ...) is in docs/hooks/.

This module also names hookline's marks: ``hookimpl`` and ``hookspec`` belong to the
project ``hookline`` (function attributes ``hookline_impl``, ``hookline_spec``), and a
framework's registry also accepts Bub's ``bub_impl`` marks, so Bub plugins load
unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Protocol

from ._dispatch import HookimplMarker, HookSpec, HookspecMarker, collect_specs
from ._dispatch import HookRuntime as _CoreRuntime

if TYPE_CHECKING:
    from pathlib import Path

    from ._dispatch import HookImpl
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
    "BUB_PROJECT",
    "HOOK_SPECS",
    "IMPL_PROJECTS",
    "PROJECT",
    "HookRuntime",
    "HooklineSpecs",
    "hookimpl",
    "hookspec",
]

PROJECT: Final = "hookline"
"""hookline's project name: its marks are the ``hookline_impl`` / ``hookline_spec``
function attributes."""

BUB_PROJECT: Final = "bub"
"""Bub's project name: Bub's marker (pluggy's) leaves an option dict in ``bub_impl``."""

IMPL_PROJECTS: Final = (PROJECT, BUB_PROJECT)
"""The marks a ``Framework``'s registry reads, in precedence order: hookline's first."""

hookimpl = HookimplMarker(PROJECT)
"""Mark a function or method as a hookline hook implementation."""

hookspec = HookspecMarker(PROJECT)
"""Mark a function as a hookline hook specification (for hooks an application adds)."""


class HooklineSpecs(Protocol):
    """One method per hook, in the seed's order (bodies are never run).

    A plugin implements any subset of these, with any subset of each one's parameters;
    a return annotation says what an implementation returns (None: no opinion).
    """

    # Turn hooks.
    @hookspec(kind="first")
    def resolve_session(self, message: Envelope) -> str | None:
        """Resolve the session id of an inbound envelope; falsy falls back to the default."""
        ...

    @hookspec(kind="many")
    def load_state(self, message: Envelope, session_id: str) -> TurnState | None:
        """Contribute a state fragment; higher-priority fragments override lower ones."""
        ...

    @hookspec(kind="first")
    def build_prompt(
        self, message: Envelope, session_id: str, state: TurnState
    ) -> list[UserContent] | LegacyPrompt | None:
        """Build the prompt; a selected falsy value falls back to the inbound content."""
        ...

    @hookspec(kind="first")
    def run_model(self, prompt: LegacyPrompt, session_id: str, state: TurnState) -> str | None:
        """Produce the model stage's text; a plugin implements this or run_model_stream."""
        ...

    @hookspec(kind="first")
    def run_model_stream(
        self, prompt: LegacyPrompt, session_id: str, state: TurnState
    ) -> AsyncStreamEvents | None:
        """Produce the model stage's event stream (AsyncStreamEvents)."""
        ...

    @hookspec(kind="first")
    def continue_prompt(
        self, prompt: LegacyPrompt | None, tape: Any, state: StreamState | None
    ) -> str | None:
        """Give the next user message when a step finishes with status continue."""
        # tape: the agent's session tape, whatever type the agent plugin uses.
        ...

    @hookspec(kind="many")
    def save_state(
        self, session_id: str, state: TurnState, message: Envelope, model_output: str
    ) -> None:
        """Persist turn state; called in the model stage's finally."""
        ...

    @hookspec(kind="many")
    def render_outbound(
        self, message: Envelope, session_id: str, state: TurnState, model_output: str
    ) -> list[Envelope] | Envelope | None:
        """Render outbound envelopes; every batch is concatenated."""
        ...

    @hookspec(kind="many")
    def dispatch_outbound(self, message: Envelope) -> bool | None:
        """Deliver one outbound envelope; every implementation sees every envelope."""
        ...

    # Application resources and configuration.
    @hookspec(kind="many_sync")
    def register_cli_commands(self, app: Any) -> None:
        """Add commands to the typer application when the CLI is created."""
        # app: a typer.Typer; the kernel does not import typer.
        ...

    @hookspec(kind="many_sync")
    def onboard_config(self, current_config: dict[str, Any]) -> dict[str, Any] | None:
        """Return a configuration fragment merged into the accumulated config."""
        ...

    @hookspec(kind="many")
    def provide_model_options(self, session_id: str, workspace: Path) -> ModelOptions | None:
        """Offer model choices for a session; merged in priority order."""
        ...

    @hookspec(kind="first")
    def provide_environment(self, session_id: str, workspace: Path) -> Environment | None:
        """Provide the session's execution environment; cached per session."""
        ...

    @hookspec(kind="many_sync")
    def system_prompt(self, prompt: LegacyPrompt, state: TurnState) -> str | None:
        """Contribute a system prompt block; blocks are joined by a blank line."""
        ...

    @hookspec(kind="first_sync")
    def provide_tape_store(
        self,
    ) -> TapeStore | AsyncTapeStore | Iterator[Any] | AsyncIterator[Any] | None:
        """Provide the tape store when running() is entered (may be a generator)."""
        ...

    @hookspec(kind="many_sync")
    def provide_lifespan(self) -> Iterator[None] | AsyncIterator[None] | None:
        """Provide a lifespan entered once per running() scope (a generator)."""
        ...

    @hookspec(kind="many_sync")
    def provide_tape_sidecar(self) -> TapeSidecar | None:
        """Provide a named sidecar tape; the first per name in priority order wins."""
        ...

    @hookspec(kind="many_sync")
    def provide_channels(self, message_handler: MessageHandler) -> list[Channel] | None:
        """Provide channels; de-duplicated by name, the first in priority order wins."""
        ...

    @hookspec(kind="first_sync")
    def build_tape_context(self) -> TapeContext | None:
        """Choose how tape entries become model context (a TapeContext)."""
        ...

    @hookspec(kind="first")
    def admit_message(
        self, session_id: str, message: Envelope, turn: TurnSnapshot
    ) -> AdmitDecision | None:
        """Decide how a channel message is scheduled (AdmitDecision or None)."""
        ...

    @hookspec(kind="many_sync")
    def provide_tools(self) -> list[Tool] | None:
        """Provide tools; de-duplicated by name, the first in priority order wins."""
        ...

    @hookspec(kind="first_sync")
    def provide_steering_inbox(
        self,
    ) -> SteeringInbox | Iterator[Any] | AsyncIterator[Any] | None:
        """Provide the steering inbox when running() is entered (may be a generator)."""
        ...

    @hookspec(kind="many")
    def on_error(self, stage: str, error: Exception, message: Envelope | None) -> None:
        """Observe a failure; observer exceptions are logged and skipped."""
        ...

    # Agent interception.
    @hookspec(kind="first")
    def before_llm_call(
        self, request: LLMCallRequest, state: TurnState
    ) -> LLMCallRequest | LLMCallDecision | None:
        """Update the LLM request, or finish the call without the provider."""
        ...

    @hookspec(kind="many")
    def after_llm_call(
        self, request: LLMCallRequest, result: LLMCallResult, state: TurnState
    ) -> None:
        """Observe a completed or failed provider call."""
        ...

    @hookspec(kind="first")
    def before_tool_call(self, call: ToolCall, state: TurnState) -> ToolCallDecision | None:
        """Update tool arguments, or replace or deny the call."""
        ...

    @hookspec(kind="many")
    def after_tool_call(self, call: ToolCall, result: ToolCallResult, state: TurnState) -> None:
        """Observe a tool outcome; assigning result.result changes the value passed on."""
        ...


HOOK_SPECS: Mapping[str, HookSpec] = MappingProxyType(collect_specs(HooklineSpecs, PROJECT))
"""The 27 hooks of the contract, in the seed's order."""


RUN_MODEL: Final = "run_model"
RUN_MODEL_STREAM: Final = "run_model_stream"


class HookRuntime(_CoreRuntime):
    """The dispatch runtime, plus the contract's error observer hook, ``on_error``, and
    the model stage (``run_model`` / ``run_model_stream``), which host code can run alone."""

    _model_choice: tuple[int, bool, str | None] | None = None

    def model_hook(self, stream_output: bool) -> str | None:
        """Which model hook answers on this path, or None when no plugin offers one.

        Plugins are walked newest first; the first one that implements either hook (with a
        marked implementation) decides; a plugin implementing both uses the kind the path
        prefers (``run_model_stream`` when streaming). Cached until plugins change.
        """
        registry = self.registry
        cached = self._model_choice
        if cached is not None and cached[0] == registry.generation and cached[1] == stream_output:
            return cached[2]
        preferred = (RUN_MODEL, RUN_MODEL_STREAM)
        if stream_output:
            preferred = (RUN_MODEL_STREAM, RUN_MODEL)
        choice = None
        for name, _ in reversed(registry.list_name_plugin()):
            hooks = registry.plugin_hooks(name)
            choice = next((hook for hook in preferred if hook in hooks), None)
            if choice:
                break
        self._model_choice = (registry.generation, stream_output, choice)
        return choice

    async def run_model(
        self, prompt: UserContent | list[UserContent] | LegacyPrompt, session_id: str,
        state: TurnState,
    ) -> str | None:
        """The model's text for `prompt`, or None when no model plugin answers.

        The chosen hook (see `model_hook`) gets the legacy prompt form; its first non-None
        result over all implementations is the answer. When the newest model plugin only
        streams, its text deltas are collected. A result of the wrong type is a TypeError
        naming the plugin and function that returned it.
        """
        kwargs = _model_kwargs(prompt, session_id, state)
        hook = self.model_hook(False)
        if hook == RUN_MODEL:
            return await self._model_text(kwargs)
        if hook == RUN_MODEL_STREAM:
            stream = await self._model_stream(kwargs)
            if stream is not None:
                async with stream:
                    return "".join([str(event.data.get("delta", ""))
                                    async for event in stream if event.kind == "text"])
        return None

    async def run_model_stream(
        self, prompt: UserContent | list[UserContent] | LegacyPrompt, session_id: str,
        state: TurnState,
    ) -> AsyncStreamEvents | None:
        """The model's answer to `prompt` as a stream, or None when no model plugin answers.

        When the newest model plugin only has ``run_model``, its answer is offered as a
        stream of one ``text`` event, dispatched when the stream is first iterated (a None
        answer gives an empty stream whose ``answered`` is False). A result of the wrong
        type is a TypeError naming the plugin and function that returned it.
        """
        from .streaming import TextAnswerStream

        kwargs = _model_kwargs(prompt, session_id, state)
        hook = self.model_hook(True)
        if hook == RUN_MODEL_STREAM:
            return await self._model_stream(kwargs)
        if hook == RUN_MODEL:
            return TextAnswerStream(lambda: self._model_text(kwargs))
        return None

    async def _model_text(self, kwargs: dict[str, Any]) -> str | None:
        impl, value = await self.call_first_each(RUN_MODEL, **kwargs)
        if impl is not None and not isinstance(value, str):
            raise bad_return(impl, "str or None", value)
        return value  # type: ignore[no-any-return]  # a str, or None when nobody answered

    async def _model_stream(self, kwargs: dict[str, Any]) -> AsyncStreamEvents | None:
        from .streaming import AsyncStreamEvents

        impl, value = await self.call_first_each(RUN_MODEL_STREAM, **kwargs)
        if impl is not None and not isinstance(value, AsyncStreamEvents):
            raise bad_return(impl, "AsyncStreamEvents or None", value,
                             "; wrap an async generator in AsyncStreamEvents(...)")
        return value  # type: ignore[no-any-return]  # a stream, or None when nobody answered

    async def notify_error(self, stage: str, error: BaseException, message: Any = None) -> None:
        """Call every ``on_error`` observer; an observer's exception is logged as
        ``hook.on_error_failed stage=<stage> adapter=<plugin>`` and the next one runs."""
        await self.notify("on_error", f"stage={stage}", stage=stage, error=error,
                          message=message)

    def notify_error_sync(self, stage: str, error: BaseException, message: Any = None) -> None:
        """Sync ``notify_error``: awaitable results are skipped with a warning."""
        self.notify_sync("on_error", f"stage={stage}", stage=stage, error=error,
                         message=message)


def bad_return(impl: HookImpl, expected: str, value: Any, hint: str = "") -> TypeError:
    """The TypeError for a hook result of the wrong type: the reference's leading text
    (``hook.<name> must return <expected>``), then the plugin, function and file:line."""
    return TypeError(
        f"hook.{impl.hook_name} must return {expected}; {impl.describe()} returned "
        f"{type(value).__name__}{hint}"
    )


def _model_kwargs(
    prompt: UserContent | list[UserContent] | LegacyPrompt, session_id: str, state: TurnState
) -> dict[str, Any]:
    from .prompt import to_content, to_legacy_prompt

    return {"prompt": to_legacy_prompt(to_content(prompt)), "session_id": session_id,
            "state": state}
