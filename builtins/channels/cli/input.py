"""What a line typed into `hookline chat` is: a message, a steer, or a command for the chat.

- A line whose first word is `/` and a name (`/help`, `/model fast`) is a command, run by
  the chat itself and never sent to the model; a name the chat does not know gets one line
  saying so. `/tool` is the exception: the offline model is driven by `/tool NAME {json}`
  lines, so they go to the model. A path (`/etc/hosts is gone`) is no command word.
- `//text` sends `/text` to the model (a message that has to start with a slash).
- `>> text` steers `text` into the running turn (it joins that turn at its next model step);
  with no turn running it is an ordinary message. A message that has to start with `>>`
  is typed with a space before it.
- Anything else is a message: it gets a turn of its own, after the lines typed before it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = ["ChatCommand"]

STEER_PREFIX = ">>"
ESCAPE = "//"
MODEL_COMMANDS = frozenset({"tool"})
"""Command words that belong to the model: the offline model's `/tool NAME {json}`."""

_COMMAND = re.compile(r"/([A-Za-z][\w-]*)(?:\s+(.*))?\Z", re.DOTALL)


@dataclass(frozen=True)
class ChatCommand:
    """A command the chat runs itself: `run` gets the text after the name (maybe empty)."""

    name: str
    run: Callable[[str], Awaitable[None]]
    help: str
    arguments: str = ""
    """How its arguments are written in `/help` (`NAME`, `PATH`), empty for none."""


_HELP = ("/help", "this list")
_QUIT = ("/quit", "leave, once the lines already sent are answered (Ctrl-C: at once)")


@dataclass(frozen=True)
class Typed:
    """One typed line, classified: `text` is the message (or the command's arguments)."""

    kind: Literal["empty", "message", "steer", "command", "unknown"]
    text: str = ""
    name: str = ""


def classify(line: str, commands: Collection[str]) -> Typed:
    """What `line` is, given the names of the commands the chat has (module docstring)."""
    if not line.strip():
        return Typed("empty")
    if line.startswith(ESCAPE):
        return Typed("message", line[1:])
    if line.startswith(STEER_PREFIX):
        text = line[len(STEER_PREFIX):].strip()
        return Typed("steer", text) if text else Typed("empty")
    match = _COMMAND.match(line.strip())
    if match is None or match.group(1) in MODEL_COMMANDS:
        return Typed("message", line)
    name, arguments = match.group(1), (match.group(2) or "").strip()
    return Typed("command" if name in commands else "unknown", arguments, name)


def help_lines(commands: Iterable[ChatCommand]) -> list[str]:
    """`/help`'s text: the commands, the steer prefix and the escapes."""
    rows = [_HELP, *((f"/{command.name} {command.arguments}".rstrip(), command.help)
                     for command in commands), _QUIT,
            (f"{STEER_PREFIX} TEXT", "steer TEXT into the running turn (no turn running: "
                                     "a message)"),
            (f"{ESCAPE}TEXT", "send /TEXT to the model (a message that starts with a slash)"),
            ("/tool NAME {json}", "not a chat command: it goes to the model (the offline "
                                  "model runs the tool)")]
    width = max(len(usage) for usage, _ in rows)
    return ["commands (run by the chat, never sent to the model):",
            *(f"  {usage.ljust(width)}  {text}" for usage, text in rows),
            "Lines typed while a turn runs wait for it, and each gets a turn of its own, "
            "in order."]


def unknown_line(name: str) -> str:
    return (f"unknown command /{name}: /help lists the commands (to send a message that "
            f"starts with /, type //{name})")
