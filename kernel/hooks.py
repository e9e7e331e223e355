"""The 27 application hooks: names, parameters, dispatch kinds, one line each.

The parameters of each spec function are the hook's parameters; registration checks
every implementation against them. ``kind`` says how the framework dispatches the hook:

- ``first``: first non-None result in priority order, awaitables awaited;
- ``all``: every result in priority order, None included, awaitables awaited;
- ``first-sync`` / ``all-sync``: the same, but awaitable results are skipped;
- ``model``: ``first`` on the model hook chosen by kind selection;
- ``accumulate-sync``: onboarding, lowest priority first, fragments merged;
- ``observer``: every implementation, each isolated from the others' exceptions;
- ``chained``: interception; each implementation sees the previous one's update.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ._dispatch.markers import SPEC_ATTR, HookspecOpts, hookspec

DISPATCH_KINDS = frozenset(
    {"first", "all", "first-sync", "all-sync", "model", "accumulate-sync", "observer", "chained"}
)


@dataclass(frozen=True, slots=True)
class HookSpec:
    """One hook: its name, parameters in order, dispatch kind, family and description."""

    name: str
    params: tuple[str, ...]
    kind: str
    family: str
    doc: str


class HooklineSpecs:
    """Specification namespace: one marked function per hook (bodies are never run)."""

    # Turn hooks.
    @hookspec(kind="first", family="turn")
    def resolve_session(self, message: Any) -> str:
        """Resolve the session id of an inbound envelope; falsy falls back to the default."""

    @hookspec(kind="all", family="turn")
    def load_state(self, message: Any, session_id: str) -> dict:
        """Contribute a state fragment; higher-priority fragments override lower ones."""

    @hookspec(kind="first", family="turn")
    def build_prompt(self, message: Any, session_id: str, state: dict) -> Any:
        """Build the prompt; a selected falsy value falls back to the inbound content."""

    @hookspec(kind="model", family="turn")
    def run_model(self, prompt: Any, session_id: str, state: dict) -> str:
        """Produce the model stage's text; a plugin implements this or run_model_stream."""

    @hookspec(kind="model", family="turn")
    def run_model_stream(self, prompt: Any, session_id: str, state: dict) -> Any:
        """Produce the model stage's event stream (AsyncStreamEvents)."""

    @hookspec(kind="first", family="turn")
    def continue_prompt(self, prompt: Any, tape: Any, state: Any) -> str | None:
        """Give the next user message when a step finishes with status continue."""

    @hookspec(kind="all", family="turn")
    def save_state(self, session_id: str, state: dict, message: Any, model_output: str) -> None:
        """Persist turn state; called in the model stage's finally."""

    @hookspec(kind="all", family="turn")
    def render_outbound(
        self, message: Any, session_id: str, state: dict, model_output: str
    ) -> list:
        """Render outbound envelopes; every batch is concatenated."""

    @hookspec(kind="all", family="turn")
    def dispatch_outbound(self, message: Any) -> bool:
        """Deliver one outbound envelope; every implementation sees every envelope."""

    # Application resources and configuration.
    @hookspec(kind="all-sync", family="resources")
    def register_cli_commands(self, app: Any) -> None:
        """Add commands to the typer application when the CLI is created."""

    @hookspec(kind="accumulate-sync", family="resources")
    def onboard_config(self, current_config: dict) -> dict | None:
        """Return a configuration fragment merged into the accumulated config."""

    @hookspec(kind="all", family="resources")
    def provide_model_options(self, session_id: str, workspace: Any) -> Any:
        """Offer model choices for a session; merged in priority order."""

    @hookspec(kind="first", family="resources")
    def provide_environment(self, session_id: str, workspace: Any) -> Any:
        """Provide the session's execution environment; cached per session."""

    @hookspec(kind="all-sync", family="resources")
    def system_prompt(self, prompt: Any, state: dict) -> str:
        """Contribute a system prompt block; blocks are joined by a blank line."""

    @hookspec(kind="first-sync", family="resources")
    def provide_tape_store(self) -> Any:
        """Provide the tape store when running() is entered (may be a generator)."""

    @hookspec(kind="all-sync", family="resources")
    def provide_lifespan(self) -> Any:
        """Provide a lifespan entered once per running() scope (a generator)."""

    @hookspec(kind="all-sync", family="resources")
    def provide_tape_sidecar(self) -> Any:
        """Provide a named sidecar tape; the first per name in priority order wins."""

    @hookspec(kind="all-sync", family="resources")
    def provide_channels(self, message_handler: Any) -> list:
        """Provide channels; de-duplicated by name, the first in priority order wins."""

    @hookspec(kind="first-sync", family="resources")
    def build_tape_context(self) -> Any:
        """Choose how tape entries become model context (a TapeContext)."""

    @hookspec(kind="first", family="resources")
    def admit_message(self, session_id: str, message: Any, turn: Any) -> Any:
        """Decide how a channel message is scheduled (AdmitDecision or None)."""

    @hookspec(kind="all-sync", family="resources")
    def provide_tools(self) -> list:
        """Provide tools; de-duplicated by name, the first in priority order wins."""

    @hookspec(kind="first-sync", family="resources")
    def provide_steering_inbox(self) -> Any:
        """Provide the steering inbox when running() is entered (may be a generator)."""

    @hookspec(kind="observer", family="resources")
    def on_error(self, stage: str, error: Exception, message: Any) -> None:
        """Observe a failure; observer exceptions are logged and skipped."""

    # Agent interception.
    @hookspec(kind="chained", family="interception")
    def before_llm_call(self, request: Any, state: dict) -> Any:
        """Update the LLM request, or finish the call without the provider."""

    @hookspec(kind="observer", family="interception")
    def after_llm_call(self, request: Any, result: Any, state: dict) -> None:
        """Observe a completed or failed provider call."""

    @hookspec(kind="chained", family="interception")
    def before_tool_call(self, call: Any, state: dict) -> Any:
        """Update tool arguments, or replace or deny the call."""

    @hookspec(kind="observer", family="interception")
    def after_tool_call(self, call: Any, result: Any, state: dict) -> None:
        """Observe a tool outcome; assigning result.result changes the value passed on."""


def collect_specs(namespace: object) -> dict[str, HookSpec]:
    """Read every ``@hookspec``-marked function of ``namespace`` into a ``HookSpec``.

    A class keeps its definition order (so reports list hooks as the seed does); other
    namespaces (modules, instances) come out in alphabetical order.
    """
    found: dict[str, HookSpec] = {}
    members = vars(namespace) if isinstance(namespace, type) else {
        name: getattr(namespace, name) for name in dir(namespace)
    }
    for name, function in members.items():
        opts = getattr(function, SPEC_ATTR, None)
        if not isinstance(opts, HookspecOpts):
            continue
        if opts.kind not in DISPATCH_KINDS:
            raise ValueError(
                f"hookspec {name!r} has unknown kind {opts.kind!r}; "
                f"use one of {', '.join(sorted(DISPATCH_KINDS))}"
            )
        params = tuple(inspect.signature(function).parameters)
        if params and params[0] == "self":
            params = params[1:]
        doc = (inspect.getdoc(function) or "").strip().splitlines()
        found[name] = HookSpec(name, params, opts.kind, opts.family, doc[0] if doc else "")
    return found


HOOK_SPECS: Mapping[str, HookSpec] = MappingProxyType(collect_specs(HooklineSpecs))
"""The 27 hooks of the contract, in the seed's order."""
