"""What the command line asks of a channel, by its shape: a plugin's channel satisfies
these without importing anything, and `hookline chat` and `hookline gateway` never name
the builtin channel classes.

- `ChatChannel`: the channel `hookline chat` talks through (the builtin `CliChannel`):
  it is configured with the chat's session, model and commands, says the chat's own
  lines, takes `/attach`'s files, shows the context meter, is told of turns cancelled with
  Ctrl-C, and lists the lines it left unanswered (the exit status says so). A `cli`
  channel without this shape still runs; the chat then prints its banner itself and has
  no commands of its own.
- `ListenerChannel`: a channel that listens for the gateway's clients (the builtin
  `HttpChannel`): `hookline gateway` hands it `--host`, `--port` and `--allow-remote`,
  and `hookline chat` leaves it out of the background channels it runs beside the
  terminal (it is the gateway's API).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["ChatChannel", "ListenerChannel"]


@runtime_checkable
class ChatChannel(Protocol):
    """The channel `hookline chat` talks through (see the module docstring)."""

    status_note: str
    """Said after the channel's status indicator: the chat sets its context meter."""

    @property
    def name(self) -> str:
        """The channel's name (the envelopes' `channel`)."""
        ...

    @property
    def chat_id(self) -> str:
        """The `chat_id` of the lines it sends."""
        ...

    @property
    def model(self) -> str | None:
        """The model the lines typed next ask for (None: the configured one)."""
        ...

    @property
    def unanswered(self) -> Sequence[str]:
        """The lines the channel reported unanswered when it stopped."""
        ...

    def configure(self, **options: Any) -> None:
        """Set the chat's options: `session_id`, `model`, `history`, `commands` (a list of
        `ChatCommand`), `observe` (called with each stream event), `workspace` and
        `markdown`; `session_id` and `model` may change while the chat runs."""
        ...

    def say(self, text: str) -> None:
        """Show a line of the chat's own (banner, notices, a command's output)."""
        ...

    def attach(self, text: str, media: list[Any]) -> None:
        """Add text (appended to the content) and media items to the next message sent."""
        ...

    def turns_cancelled(self, session_ids: Iterable[str]) -> None:
        """The chat cancelled the running turns of these sessions (Ctrl-C)."""
        ...


@runtime_checkable
class ListenerChannel(Protocol):
    """A channel that takes `--host`, `--port` and `--allow-remote` (see the module
    docstring). A plugin's channel named `http` without this method makes those options
    an error instead of being silently ignored."""

    def configure_listener(self, host: str | None, port: int | None,
                           allow_remote: bool | None) -> None:
        """Listen on `host` and `port` (None: the settings'), `allow_remote` allowing a
        non-loopback host (None: the setting's); called before the channel starts."""
        ...
