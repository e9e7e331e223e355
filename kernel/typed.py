"""Typed hooks: one ``typing.Protocol`` per hook, for editors and type checkers (WIP).

Read only by type checkers and readers; the kernel never imports it at run time.
"""

from __future__ import annotations

__all__: list[str] = []
