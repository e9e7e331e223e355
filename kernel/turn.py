"""Turn state and turn result.

One turn = one inbound envelope through the pipeline. The state is a plain dict shared by
every hook of the turn; keys starting with `_runtime_` belong to the runtime, and the
constants below name them so nobody has to type them twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

from .prompt import UserContent

__all__ = [
    "RUNTIME_AGENT",
    "RUNTIME_ENVIRONMENT",
    "RUNTIME_PREFIX",
    "RUNTIME_STEERING_INBOX",
    "RUNTIME_TAPE",
    "RUNTIME_THREAD_ID",
    "RUNTIME_TOOL_NAMES",
    "RUNTIME_WORKSPACE",
    "TurnResult",
    "TurnState",
]

TurnState: TypeAlias = dict[str, Any]
"""Mutable, one per turn, never persisted by the framework."""

RUNTIME_PREFIX = "_runtime_"
"""Keys with this prefix are owned by the runtime."""

RUNTIME_WORKSPACE = RUNTIME_PREFIX + "workspace"
"""Host workspace path, as a string."""
RUNTIME_STEERING_INBOX = RUNTIME_PREFIX + "steering_inbox"
"""The steering inbox of the current `running()` scope, or None."""
RUNTIME_ENVIRONMENT = RUNTIME_PREFIX + "environment"
"""The session's Environment, present only when one exists."""
RUNTIME_AGENT = RUNTIME_PREFIX + "agent"
"""The agent serving the turn."""
RUNTIME_THREAD_ID = RUNTIME_PREFIX + "thread_id"
"""Steering key when the envelope context names a thread."""
RUNTIME_TAPE = RUNTIME_PREFIX + "tape"
"""The run's tape, set before tool hooks run."""
RUNTIME_TOOL_NAMES = RUNTIME_PREFIX + "tool_names"
"""Model-facing tool names of the current step."""


@dataclass(frozen=True)
class TurnResult:
    """What `process_inbound` returns: enough to inspect a turn after the fact."""

    session_id: str
    prompt: list[UserContent]
    model_output: str
    outbounds: list[Any] = field(default_factory=list)
    state: TurnState = field(default_factory=dict)
