"""hookline settings, under the name code and plugins import: the package
`hookline.builtins.config` holds them (see docs/configuration.md)."""

from __future__ import annotations

from .config import *  # noqa: F403  (the same names, written once in config/__init__)
from .config import __all__ as __all__
