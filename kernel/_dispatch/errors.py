"""Errors raised by the dispatch core, and the loggers it reports through."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

LOGGER_PREFIX = __name__.rpartition(".")[0].removesuffix("._dispatch")
"""The package the core's loggers are named after.

The core's own package, except that a trailing ``._dispatch`` is dropped: inside hookline
(or a copy of the whole kernel) the loggers are ``<kernel>.runtime`` and
``<kernel>.registry``, the names hookline has always logged under.
"""


def get_logger(name: str) -> logging.Logger:
    """``<LOGGER_PREFIX>.<name>``; ``logging`` is imported on first use (a warning path),
    so importing the core does not pay for it."""
    import logging

    return logging.getLogger(f"{LOGGER_PREFIX}.{name}")


def check_project(project: object) -> str:
    """``project`` as a project name: marks live in the attribute ``<project>_impl``, so
    it must be a Python identifier; a ValueError saying so otherwise."""
    if not isinstance(project, str) or not project.isidentifier():
        raise ValueError(
            f"project name {project!r} must be a Python identifier (marks are the function "
            f"attributes <project>_impl and <project>_spec)"
        )
    return project


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
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.plugin_name = plugin_name
        self.hook_name = hook_name
        self.function = function
        self.location = location
        self.code = code
        """A stable name of the problem (``Rejection.code``), or None for plugin-level ones."""


def missing_argument(hook_name: str, name: str, declared_by: list[str]) -> TypeError:
    """A dispatch lacks an argument that the named implementations declare."""
    return TypeError(
        f"hook {hook_name!r} was called without argument {name!r}, which "
        f"{'; '.join(declared_by)} declares; pass {name}=... to the dispatch call"
    )


class UnknownHookError(LookupError):
    """A strict runtime was asked to dispatch a hook no spec declares (a misspelled name)."""

    def __init__(self, hook_name: str, known: list[str]) -> None:
        import difflib  # an error path only

        self.hook_name = hook_name
        self.suggestions = difflib.get_close_matches(hook_name, known, n=3, cutoff=0.6)
        hint = (f"did you mean {' or '.join(repr(name) for name in self.suggestions)}? "
                if self.suggestions else "")
        super().__init__(
            f"hook {hook_name!r} is not declared by any spec; {hint}declare it "
            f"(Registry.add_specs) or fix the name at the dispatch site (strict runtime)"
        )
