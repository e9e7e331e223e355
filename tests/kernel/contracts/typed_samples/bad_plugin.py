"""Plugins with one mistake each: mypy --strict reports every one, on its line.

test_typed_hooks.py finds each mistake by the comment that ends its line and checks that
the error mypy reports there is the expected one, and that nothing else is reported.
"""

from __future__ import annotations

from hookline.kernel import (
    DispatchOutboundImpl,
    Envelope,
    LegacyPrompt,
    LoadStateHook,
    ResolveSessionHook,
    SaveStateHook,
    SystemPromptHook,
    TurnState,
    hookimpl,
)


class Mistakes(SystemPromptHook, LoadStateHook, SaveStateHook):
    @hookimpl
    def system_prompt(self, prompt: int, state: TurnState) -> str:  # wrong parameter type
        return "be brief"

    @hookimpl
    def load_state(self, message: Envelope, session_id: str) -> str:  # wrong return type
        return session_id

    @hookimpl
    def save_state(  # misspelled parameter
        self, session_id: str, state: TurnState, mesage: Envelope, model_output: str
    ) -> None:
        pass


class AsyncOnSyncPath(SystemPromptHook):
    @hookimpl
    async def system_prompt(  # async on a sync path
        self, prompt: LegacyPrompt, state: TurnState
    ) -> str:
        return "skipped: system_prompt is dispatched on a sync path"


class Unchecked:
    """No protocol base: the mistake shows where the object is assigned to one."""

    @hookimpl
    def resolve_session(self, message: Envelope, session: str) -> str:
        return session


def deliver(message: Envelope) -> str:
    return "sent"


resolver: ResolveSessionHook = Unchecked()  # assignment: the parameter above
delivery: DispatchOutboundImpl = deliver  # function: wrong return type
