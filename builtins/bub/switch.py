"""The variable that turns the Bub layer off: a leaf of its own, so the layer's entry
module (which must stay light) and its loader both name it without importing each other."""

from __future__ import annotations

from hookline.kernel._identity import ENV_PREFIX

__all__ = ["SWITCH_ENV"]

SWITCH_ENV = f"{ENV_PREFIX}BUB_PLUGINS"
"""``0`` (or false, no, off) turns the ``bub`` entry point group off."""
