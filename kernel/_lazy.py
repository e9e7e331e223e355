"""A package root's public names, written once and imported on first use.

A root lists its names in one table, module -> names (or ``EVERY`` for every name of that
module's ``__all__``), and takes its ``__getattr__`` and ``__dir__`` from a
``LazyExports`` built on it. ``__all__`` is derived from the table when first read, so
importing the root imports none of the modules it names. Type checkers read the names
from the root's ``__init__.pyi``, which ``python -m hookline.kernel._generate`` writes
from the same table. Names that left the root can stay reachable for a while: ``moved``
maps each to its module, and reading it there warns with a ``DeprecationWarning``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any, Final

__all__ = ["EVERY", "LazyExports"]

EVERY: Final = "*"
"""A table entry meaning every name of the module's ``__all__``."""


class LazyExports:
    """The lazy public surface of the package whose globals are ``namespace``."""

    def __init__(self, namespace: dict[str, Any], public: Mapping[str, tuple[str, ...] | str],
                 moved: Mapping[str, str] | None = None) -> None:
        self.package: str = namespace["__name__"]
        self.public = public
        self.moved: Mapping[str, str] = moved or {}
        self._namespace = namespace
        self._where = {name: module for module, names in public.items() if names != EVERY
                       for name in names}
        self._every = [module for module, names in public.items() if names == EVERY]

    def names(self) -> list[str]:
        """The package's ``__all__``: the table's names, those of ``EVERY`` modules
        included (which imports those modules); dunder names (``__version__``) are
        reachable but, as usual, not listed."""
        found = {name for name in self._where if not name.startswith("__")}
        for module in self._every:
            found.update(self._module(module).__all__)
        return sorted(found)

    def getattr(self, name: str) -> object:
        """A public name, a submodule or ``__all__``, imported on first use and then kept
        in the package (a moved name warns at every use and is not kept)."""
        module = self._where.get(name)
        if module is not None:
            value = getattr(self._module(module), name)
        elif name in self.moved:
            import warnings

            where = f"{self.package}.{self.moved[name]}"
            warnings.warn(f"{self.package}.{name} is deprecated; import {name} from {where}",
                          DeprecationWarning, stacklevel=2)
            return getattr(self._module(self.moved[name]), name)
        elif name == "__all__":
            value = self.names()
        elif name.startswith("__"):
            raise self._missing(name)
        else:
            value = self._submodule_or_every(name)
        self._namespace[name] = value
        return value

    def dir(self) -> list[str]:
        """``dir()`` of the package: what it holds and every public name."""
        return sorted({*self._namespace, *self.names()})

    def _submodule_or_every(self, name: str) -> object:
        try:
            return self._module(name)
        except ModuleNotFoundError as exc:
            if exc.name != f"{self.package}.{name}":
                raise
        for module in self._every:
            found = self._module(module)
            if name in found.__all__:
                return getattr(found, name)
        raise self._missing(name) from None

    def _module(self, name: str) -> ModuleType:
        return importlib.import_module(f".{name}", self.package)

    def _missing(self, name: str) -> AttributeError:
        return AttributeError(f"module {self.package!r} has no attribute {name!r}")
