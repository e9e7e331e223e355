"""Small helpers shared by kernel modules."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

T = TypeVar("T")

__all__ = ["dedupe_by_name"]


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
