"""Bub compatibility layer: runs the real Bub 0.6 plugin ecosystem unchanged.

The kernel never imports this package: the builtins package offers the kernel's loader an
extra entry point group (``plugin_groups``), and that group is this layer. It is active
only when the ``bub`` distribution is installed, ``HOOKLINE_BUB_PLUGINS`` does not turn
it off and at least one ``bub`` entry point exists; otherwise nothing of Bub is imported
and the only cost is one ``importlib.util.find_spec``. When active it adapts to the
installed Bub package: it imports Bub's own classes (``Channel``, ``Lifecycle``,
``ToolCallDecision``, ``REGISTRY``, ``configure``, ...) to recognise what plugins hand
over, rather than shipping look-alikes.

What it does (see docs/bub-plugins.md):

- reads the ``bub`` group beside ``hookline`` (status, disable list, strict mode alike);
  callable entry points get a facade of the framework with Bub's attributes;
- gives every Bub plugin's tools (from ``bub.tools.REGISTRY``) to the model through
  ``provide_tools``, attributed to the plugin that registered them;
- accepts Bub's decision objects, channels, admission decisions and model options with
  the meaning hookline gives its own;
- loads Bub's config file (``bub.configure.load``) and writes onboarding answers there;
- starts Bub's ``Lifecycle`` and ``Interface`` channels exactly as Bub selects them and
  resolves ``MediaItem`` data fetchers into prompt media;
- aliases the old module paths ``bub.hookspecs`` and ``bub.types`` when Bub lacks them.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from hookline.kernel._util import parse_flag

from .switch import SWITCH_ENV

__all__ = [
    "BUB_GROUP",
    "available",
    "plugin_groups",
    "save_onboard_config",
    "set_onboard_interactive",
    "unwrap_channel",
]

BUB_GROUP = "bub"

def available() -> bool:
    """Whether the layer may run: Bub is installed and the switch does not say no."""
    if parse_flag(os.environ.get(SWITCH_ENV, "")) is False:
        return False
    try:
        return importlib.util.find_spec("bub") is not None
    except (ImportError, ValueError):
        return False


def plugin_groups(framework: Any) -> list[Any]:
    """The ``bub`` entry point group for the kernel's loader, or nothing."""
    if not available():
        return []
    from .group import BubGroup

    return [BubGroup(framework)]


def save_onboard_config(framework: Any) -> Path | None:
    """Write what Bub plugins answered during onboarding to Bub's config file (where they
    read their settings); the file's path, or None when no Bub plugin answered."""
    group = framework.extensions.get(BUB_GROUP)
    if group is None:
        return None
    saved: Path | None = group.save_onboard_config()
    return saved


def set_onboard_interactive(framework: Any, interactive: bool) -> None:
    """Tell the layer whether onboarding may ask questions: Bub plugins ask through Bub's
    terminal UI, so with ``--yes`` (or no terminal) their questions are skipped."""
    group = framework.extensions.get(BUB_GROUP)
    if group is not None:
        group.onboard_interactive = interactive


def unwrap_channel(channel: Any) -> Any:
    """The Bub channel behind an adapter (what a Bub plugin expects to see), or
    ``channel`` itself. No channel is an adapter until the adapter module is loaded."""
    adapters = sys.modules.get(f"{__name__}.channels")
    return channel if adapters is None else adapters.unwrap_channel(channel)
