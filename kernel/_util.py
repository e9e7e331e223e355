"""Small helpers shared by kernel modules."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import logging

T = TypeVar("T")

__all__ = ["FALSE_WORDS", "TRUE_WORDS", "dedupe_by_name", "get_logger", "parse_flag"]

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def get_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)``, importing ``logging`` on first use: the kernel logs
    only when something goes wrong, so importing it does not pay for ``logging``."""
    import logging

    return logging.getLogger(name)


def parse_flag(text: str) -> bool | None:
    """A switch's value as written in a variable or a setting (any case, blanks around):
    True or False for the words above, None for anything else, so each caller decides
    what an unknown word means (an error, or the switch's default)."""
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return None


def dedupe_by_name(items: Iterable[T], key: Callable[[T], Hashable]) -> list[T]:
    """Keep the first item per key, in order of first appearance.

    Several hooks (tools, channels, sidecars) combine results this way: the
    implementation that runs first wins a name.
    """
    seen: set[Hashable] = set()
    result: list[T] = []
    for item in items:
        name = key(item)
        if name in seen:
            continue
        seen.add(name)
        result.append(item)
    return result
