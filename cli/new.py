"""`hookline new plugin NAME`: write a ready-to-install plugin project."""

from __future__ import annotations
