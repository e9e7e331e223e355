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

if TYPE_CHECKING:
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
    "BUB_PROJECT",
    "HOOK_SPECS",
    "IMPL_PROJECTS",
    "PROJECT",
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
    """One method per hook, in the order of the hook reference page (bodies are never run).

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
"""The 27 hooks of the contract, in the reference page's order."""
