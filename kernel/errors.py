"""The error types of the contract: ``HooklineError`` with its ``ErrorKind``, and the
``TypeError`` for a hook result of the wrong type.

Most of the kernel, the builtins and plugins need only these, not the stream types they
used to sit beside.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._dispatch import HookImpl

__all__ = ["ErrorKind", "HooklineError", "bad_return", "other_copy_note"]


class ErrorKind(StrEnum):
    """Coarse error categories, stable enough to show to users and to models."""

    invalid_input = "invalid_input"
    config = "config"
    provider = "provider"
    tool = "tool"
    temporary = "temporary"
    not_found = "not_found"
    unknown = "unknown"


@dataclass(eq=False)
class HooklineError(Exception):
    """An error with a kind, so callers can react to the category instead of the text."""

    kind: ErrorKind
    message: str
    details: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        # Accept plain strings for the kind, and keep `args` filled so the exception
        # pickles and prints like any other.
        self.kind = ErrorKind(self.kind)
        Exception.__init__(self, self.kind, self.message, self.details)

    def __str__(self) -> str:
        return f"[{self.kind.value}] {self.message}"

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form, used where the error is shown to a model or recorded."""
        data: dict[str, Any] = {"kind": self.kind.value, "message": self.message}
        if self.details is not None:
            data["details"] = self.details
        return data


def bad_return(impl: HookImpl, expected: str, value: Any, hint: str = "") -> TypeError:
    """The TypeError for a hook result of the wrong type: the reference's leading text
    (``hook.<name> must return <expected>``), then the plugin, function and file:line."""
    return TypeError(
        f"hook.{impl.hook_name} must return {expected}; {impl.describe()} returned "
        f"{type(value).__name__}{other_copy_note(value, expected)}{hint}"
    )


def other_copy_note(value: Any, expected: str) -> str:
    """For a result of the expected class's name that is still not of it: the class of
    another copy of the kernel (a vendored one beside hookline), which a plugin imported
    its types from. Empty otherwise."""
    name = type(value).__name__
    if name in ("str", "dict", "NoneType") or name not in expected.split():
        return ""
    return (f" (from {type(value).__module__}: another copy of the kernel; build results "
            f"with the classes of the kernel that runs the plugin)")
