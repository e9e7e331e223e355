"""Errors raised by the plugin kernel."""

from __future__ import annotations


class PluginValidationError(ValueError):
    """A plugin cannot be registered; nothing of it was added.

    It subclasses ``ValueError`` because duplicate names and duplicate plugin objects,
    which the reference reports as ``ValueError``, are reported with it too.
    """

    def __init__(
        self,
        message: str,
        *,
        plugin_name: str | None = None,
        hook_name: str | None = None,
        function: str | None = None,
        location: str | None = None,
    ) -> None:
        super().__init__(message)
        self.plugin_name = plugin_name
        self.hook_name = hook_name
        self.function = function
        self.location = location


def missing_argument(hook_name: str, name: str, declared_by: list[str]) -> TypeError:
    """A dispatch lacks an argument that the named implementations declare."""
    return TypeError(
        f"hook {hook_name!r} was called without argument {name!r}, which "
        f"{'; '.join(declared_by)} declares; pass {name}=... to the dispatch call"
    )
