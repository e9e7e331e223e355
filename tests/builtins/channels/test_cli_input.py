"""How the cli channel tells a typed line's kind: message, steer, or a chat command."""

from __future__ import annotations

import pytest

from hookline.builtins.channels.cli.input import Typed, classify, help_lines

NAMES = {"help", "quit", "model", "attach"}


@pytest.mark.parametrize(("line", "typed"), [
    ("hello", Typed("message", "hello")),
    ("   ", Typed("empty")),
    ("/help", Typed("command", "", "help")),
    ("  /model  openai:gpt-4o  ", Typed("command", "openai:gpt-4o", "model")),
    ("/attach my notes.txt", Typed("command", "my notes.txt", "attach")),
    ("/nosuch thing", Typed("unknown", "thing", "nosuch")),
    ("/Help", Typed("unknown", "", "Help")),  # names are matched as typed
    ("//help", Typed("message", "/help")),  # the escape: sent with one slash
    ("/etc/hosts is empty", Typed("message", "/etc/hosts is empty")),  # a path, no command
    ("/ alone", Typed("message", "/ alone")),
    ('/tool shell {"command": "ls"}', Typed("message", '/tool shell {"command": "ls"}')),
    ("/tool", Typed("message", "/tool")),  # the offline model's command, not the chat's
    (">> also this", Typed("steer", "also this")),
    (">>", Typed("empty")),
    (" >> quoted", Typed("message", " >> quoted")),  # a space before: a plain message
    ("/help\nmore lines", Typed("command", "more lines", "help")),
])
def test_lines_are_classified(line: str, typed: Typed) -> None:
    assert classify(line, NAMES) == typed


def test_help_names_every_command_the_steer_prefix_and_the_escapes() -> None:
    text = "\n".join(help_lines([]))
    for usage in ("/help", "/quit", ">> TEXT", "//TEXT", "/tool NAME {json}"):
        assert f"  {usage} " in text
