"""A PostgreSQL tape store, shared by several gateway replicas (work in progress).

Selected when the `tape_store` setting is a `postgresql://` or `postgres://` URL; needs the
optional extra `pip install 'hookline[postgres]'` (psycopg 3 and its pool).
"""

from __future__ import annotations

__all__: list[str] = []
