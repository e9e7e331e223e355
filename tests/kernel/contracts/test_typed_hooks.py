"""Typed hooks (kernel/typed.py) match HOOK_SPECS, and mypy catches a wrong plugin (WIP)."""

from __future__ import annotations
