"""The module paths older Bub plugins import, for a Bub that no longer has them.

bub-wecom and bub-lark were written for Bub 0.3, where ``bub.hookspecs`` held the marker
and ``bub.types`` the shared type names. Bub 0.6 moved them (``bub.hooks``,
``bub.channels.contracts``, ``bub.turn``, ``bub.envelope``). Each alias is a small
module that re-exports Bub 0.6's own objects under the old names; it is put into
``sys.modules`` only when the installed Bub cannot import that path itself.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Callable
from typing import Any

__all__ = ["ALIASES", "install_aliases", "install_tool_keywords"]


def _hookspecs() -> dict[str, Any]:
    from bub.hooks.specs import BUB_HOOK_NAMESPACE, BubHookSpecs, hookimpl, hookspec

    return {"BUB_HOOK_NAMESPACE": BUB_HOOK_NAMESPACE, "BubHookSpecs": BubHookSpecs,
            "hookimpl": hookimpl, "hookspec": hookspec}


def _types() -> dict[str, Any]:
    from bub.channels.contracts import ChannelRouter, MessageHandler
    from bub.envelope import Envelope
    from bub.turn import TurnResult, TurnState

    return {"Envelope": Envelope, "MessageHandler": MessageHandler, "State": TurnState,
            "TurnState": TurnState, "TurnResult": TurnResult,
            "OutboundChannelRouter": ChannelRouter, "ChannelRouter": ChannelRouter}


ALIASES: dict[str, Callable[[], dict[str, Any]]] = {
    "bub.hookspecs": _hookspecs,
    "bub.types": _types,
}
"""Old module path -> the names it exported, taken from the installed Bub."""


def _missing(name: str) -> bool:
    if name in sys.modules:
        return False
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):
        return True


def install_aliases() -> list[str]:
    """Install every alias the installed Bub lacks; returns the names installed."""
    import bub

    installed = []
    for name, exports in ALIASES.items():
        if not _missing(name):
            continue
        module = types.ModuleType(name, f"hookline alias of Bub's old {name} module")
        names = exports()
        module.__dict__.update(names)
        module.__dict__["__all__"] = sorted(names)
        sys.modules[name] = module
        setattr(bub, name.rpartition(".")[2], module)
        installed.append(name)
    return installed


def install_tool_keywords() -> bool:
    """Let ``bub.tool`` accept ``agent_use``, the keyword bub-qq 0.1.0 passes, when the
    installed Bub does not: ``agent_use=False`` was the name of ``exposure="command"``
    (a comma command, never offered to the model). Bub's own ``tool`` does the rest.
    Returns whether the keyword was added."""
    import inspect

    import bub.core.tools as tools

    original = tools.tool
    if "agent_use" in inspect.signature(original).parameters or getattr(
            original, "hookline_alias", False):
        return False

    def tool(func: Any = None, *, agent_use: bool | None = None, **options: Any) -> Any:
        if agent_use is False and "exposure" not in options:
            options["exposure"] = "command"
        return original(func, **options)

    tool.__doc__ = original.__doc__
    tool.__wrapped__ = original  # type: ignore[attr-defined]
    tool.hookline_alias = True  # type: ignore[attr-defined]
    tools.tool = tool
    return True
