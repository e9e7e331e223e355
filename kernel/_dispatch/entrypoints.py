"""Loading plugins from installed distributions' entry points, as pluggy's
``load_setuptools_entrypoints`` does, with the standard library's ``importlib.metadata``.

Optional: nothing else in the core imports this module's dependency, which is imported
inside the function (it is slow to import, and most hosts never load entry points).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .registry import Registry


def load_entry_points(
    registry: Registry,
    group: str,
    *,
    name: str | None = None,
    skip: Iterable[str] = (),
    prepare: Callable[[Any], object] | None = None,
) -> list[str]:
    """Register the object of every entry point of ``group`` under the entry point's name.

    ``name`` keeps only the entry point of that name; names in ``skip`` and names already
    registered are left alone (so calling it twice registers nothing twice). ``prepare``,
    when given, turns each loaded object into the plugin (for example, calling a factory).
    Returns the names registered, in the order of ``importlib.metadata``. An entry point
    that fails to import, or whose plugin is rejected, raises its own exception with a
    note naming the entry point and its distribution; the plugins registered before it
    stay registered.
    """
    from importlib import metadata

    skipped = set(skip)
    registered: list[str] = []
    for entry_point in metadata.entry_points(group=group):
        if (name is not None and entry_point.name != name) or entry_point.name in skipped:
            continue
        if registry.has_plugin(entry_point.name):
            continue
        try:
            loaded = entry_point.load()
            plugin = prepare(loaded) if prepare is not None else loaded
            registry.register(plugin, name=entry_point.name)
        except Exception as exc:
            dist = getattr(entry_point, "dist", None)
            where = f" (distribution {dist.name} {dist.version})" if dist is not None else ""
            exc.add_note(f"while loading entry point {entry_point.name} = "
                         f"{entry_point.value} of group {group!r}{where}")
            raise
        registered.append(entry_point.name)
    return registered
