"""Frameworks with the builtin plugin and readers of what it recorded, for the builtin plugin
tests (tests/builtins/plugin/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from builtin_support import build_builtin

from hookline.builtins.models import ModelMessage
from hookline.builtins.plugin import BuiltinPlugin
from hookline.builtins.tape.naming import session_tape_name
from hookline.builtins.tape.tape import Tape
from hookline.kernel import Framework
from hookline.kernel.tape import TapeEntry

SESSION = "test:chat"


def build(workspace: Path, *plugins: object, replies: tuple[str, ...] = ("ok",) * 4,
          **settings: Any) -> tuple[Framework, BuiltinPlugin]:
    """The builtin plugin (a scripted model by default), then `plugins` after it."""
    return build_builtin(workspace, [{"text": text} for text in replies], *plugins, **settings)


def builtin_of(framework: Framework) -> BuiltinPlugin:
    plugin = framework.registry.get_plugin("builtin")
    assert isinstance(plugin, BuiltinPlugin)
    return plugin


def texts(messages: list[ModelMessage], role: str) -> list[str]:
    return [message.text for message in messages if message.role == role]


async def entries_of(framework: Framework, session_id: str = SESSION) -> list[TapeEntry]:
    tape = Tape(framework.get_tape_store(), session_tape_name(session_id, framework.workspace))
    return await tape.entries()
