"""hookline.builtins: the default plugin and the real capabilities it provides."""

from __future__ import annotations

from typing import Any


def create_plugin(framework: Any) -> Any:
    """The builtin plugin for ``framework`` (imported lazily to keep imports light)."""
    from .plugin import BuiltinPlugin

    return BuiltinPlugin(framework)
