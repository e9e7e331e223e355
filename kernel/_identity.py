# hookline kernel 0.1.0 -- MIT licence, Copyright (c) 2026 the hookline authors (LICENSE)
"""Who this copy of the kernel is: the release it comes from, its licence, and the names
by which it finds its plugins and settings. `python -m hookline.kernel.vendor` rewrites
this one file in a copy, so that a vendored kernel never loads the plugins of an
installed hookline nor reads its environment variables (docs/vendoring.md)."""

from __future__ import annotations

from typing import Final

__version__: Final = "0.1.0"
LICENCE: Final = "MIT licence, Copyright (c) 2026 the hookline authors"
ENTRY_POINT_GROUP: Final = "hookline"
"""The entry point group plugins are loaded from."""
ENV_PREFIX: Final = "HOOKLINE_"
"""The prefix of the environment variables the kernel reads (`<prefix>DISABLE_PLUGINS`,
`<prefix>STRICT_PLUGINS`)."""
