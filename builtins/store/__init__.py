"""Builtin tape stores: durable SQLite (the default), in-memory (tests), async adapter."""

from __future__ import annotations

from .asyncstore import AsyncStoreAdapter, as_async_store
from .memory import SIDECAR_MARKER, InMemoryTapeStore, is_sidecar_tape
from .sqlite import SCHEMA_VERSION, SQLiteTapeStore

__all__ = [
    "SCHEMA_VERSION",
    "SIDECAR_MARKER",
    "AsyncStoreAdapter",
    "InMemoryTapeStore",
    "SQLiteTapeStore",
    "as_async_store",
    "is_sidecar_tape",
]
