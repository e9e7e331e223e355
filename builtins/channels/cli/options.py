"""What `CliChannel` is configured with: the keyword options of its constructor, which
`configure` may change while the chat runs. Kept in one object that the channel's parts
share, so that a change (`/new`'s session, `/model`'s model) reaches them all at once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TextIO

from hookline.kernel.streaming import StreamEvent

from .input import ChatCommand

__all__ = ["ChatOptions", "option_names"]


@dataclass
class ChatOptions:
    """The options of one `CliChannel` (its docstring says what each does)."""

    session_id: str | None = None
    chat_id: str = "default"
    model: str | None = None
    input: TextIO | None = None
    output: TextIO | None = None
    interactive: bool | None = None
    editor: bool | None = None
    history: Path | None = None
    commands: list[ChatCommand] = field(default_factory=list)
    observe: Callable[[str, StreamEvent], None] | None = None
    workspace: str | None = None
    markdown: bool = True


def option_names() -> frozenset[str]:
    """The names `configure` accepts."""
    return frozenset(option.name for option in fields(ChatOptions))
