"""The public names of this package, for type checkers (which do not see its lazy
imports).

Generated from the table of its ``__init__.py`` by the kernel's ``_generate.py``
(``python -m hookline.kernel._generate hookline.testing hookline.builtins``):
edit the table, never this file.
"""

from .asyncstore import PAGE_ENTRIES as PAGE_ENTRIES
from .asyncstore import AsyncJournal as AsyncJournal
from .asyncstore import AsyncStoreAdapter as AsyncStoreAdapter
from .asyncstore import append_batch as append_batch
from .asyncstore import as_async_store as as_async_store
from .asyncstore import inner_store as inner_store
from .asyncstore import journal_of as journal_of
from .asyncstore import recover_abandoned as recover_abandoned
from .asyncstore import reset_through as reset_through
from .asyncstore import scope_store as scope_store
from .asyncstore import tape_pages as tape_pages
from .copy import CopyReport as CopyReport
from .copy import copy_store as copy_store
from .copy import shown as shown
from .entries import LONE_SURROGATE as LONE_SURROGATE
from .entries import SIDECAR_MARKER as SIDECAR_MARKER
from .entries import is_sidecar_tape as is_sidecar_tape
from .entries import open_call_results as open_call_results
from .memory import InMemoryTapeStore as InMemoryTapeStore
from .postgres.check import check_postgres as check_postgres
from .postgres.store import PostgresTapeStore as PostgresTapeStore
from .sqlite.files import StoreCheck as StoreCheck
from .sqlite.files import backup_database as backup_database
from .sqlite.files import check_database as check_database
from .sqlite.store import COMMIT_FAILED_ERROR as COMMIT_FAILED_ERROR
from .sqlite.store import INTERRUPTED_ERROR as INTERRUPTED_ERROR
from .sqlite.store import SCHEMA_VERSION as SCHEMA_VERSION
from .sqlite.store import SQLiteTapeStore as SQLiteTapeStore
from .url import POSTGRES_SCHEMES as POSTGRES_SCHEMES
from .url import StoreURL as StoreURL
from .url import is_postgres_url as is_postgres_url
from .url import redact_url as redact_url
