"""Builtin tape stores: durable SQLite (the default), in-memory (tests), async adapter."""

from __future__ import annotations

from .asyncstore import AsyncJournal, AsyncStoreAdapter, append_batch, as_async_store, journal_of
from .entries import SIDECAR_MARKER, is_sidecar_tape
from .memory import InMemoryTapeStore
from .sqlite.store import (
    COMMIT_FAILED_ERROR,
    INTERRUPTED_ERROR,
    SCHEMA_VERSION,
    SQLiteTapeStore,
    StoreCheck,
    backup_database,
    check_database,
)

__all__ = [
    "COMMIT_FAILED_ERROR",
    "INTERRUPTED_ERROR",
    "SCHEMA_VERSION",
    "SIDECAR_MARKER",
    "AsyncJournal",
    "AsyncStoreAdapter",
    "InMemoryTapeStore",
    "SQLiteTapeStore",
    "StoreCheck",
    "append_batch",
    "as_async_store",
    "backup_database",
    "check_database",
    "is_sidecar_tape",
    "journal_of",
]
