"""Builtin tape stores: durable SQLite (the default, `sqlite/`), PostgreSQL for replicas
(`postgres/`), in-memory (tests), the async adapter, copying between stores, and store
URLs (docs/deployment.md).

Names are imported on first use: reading a store URL loads neither SQLite nor psycopg."""

from __future__ import annotations

from hookline.kernel._lazy import LazyExports as _LazyExports

_PUBLIC = {
    "asyncstore": ("PAGE_ENTRIES", "AsyncJournal", "AsyncStoreAdapter", "append_batch",
                   "as_async_store", "inner_store", "journal_of", "recover_abandoned",
                   "reset_through", "scope_store", "tape_pages"),
    "entries": ("LONE_SURROGATE", "SIDECAR_MARKER", "is_sidecar_tape", "open_call_results"),
    "memory": ("InMemoryTapeStore",),
    "sqlite.store": ("COMMIT_FAILED_ERROR", "INTERRUPTED_ERROR", "SCHEMA_VERSION",
                     "SQLiteTapeStore"),
    "sqlite.files": ("StoreCheck", "backup_database", "check_database"),
    "postgres.store": ("PostgresTapeStore",),
    "postgres.check": ("check_postgres",),
    "copy": ("CopyReport", "copy_store", "shown"),
    "url": ("POSTGRES_SCHEMES", "StoreURL", "is_postgres_url", "redact_url"),
}
"""Module (relative to this package) -> the public names it defines."""

_exports = _LazyExports(globals(), _PUBLIC)
__getattr__ = _exports.getattr
__dir__ = _exports.dir
