"""hookline.builtins: the default plugin and the real capabilities it provides."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .plugin import BuiltinPlugin


def create_plugin(framework: Any) -> BuiltinPlugin:
    """The builtin plugin for ``framework``: what ``Framework.load_hooks()`` registers first
    (the kernel looks this factory up by name). The plugin module is imported here, on
    first use, so importing ``hookline.builtins`` stays light."""
    from .plugin import BuiltinPlugin

    return BuiltinPlugin(framework)


def plugin_groups(framework: Any) -> list[Any]:
    """Entry point groups to read besides ``hookline`` (the kernel asks for them by name).

    The ``bub`` group, through the Bub compatibility layer, when the ``bub`` distribution
    is installed and ``HOOKLINE_BUB_PLUGINS`` does not turn it off. Nothing is imported
    otherwise, so a framework without Bub pays only for one ``find_spec``.
    """
    from .bub import plugin_groups as bub_groups

    return bub_groups(framework)
