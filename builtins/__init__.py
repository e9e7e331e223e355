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
