"""Telling a PostgreSQL URL from a file path, and showing one without its password.

Kept free of heavy imports: the settings parser uses it on every start, and the psycopg
driver is imported only once a PostgreSQL store is really opened.
"""

from __future__ import annotations

import re
from typing import Final

from .redact import redact_credentials

__all__ = ["POSTGRES_SCHEMES", "StoreURL", "is_postgres_url", "redact_url"]

POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")

_QUERY_PASSWORD = re.compile(r"(?i)([?&]password=)[^&#\s]*")


def is_postgres_url(value: object) -> bool:
    """True for a `postgresql://` or `postgres://` URL (the scheme in any case)."""
    return isinstance(value, str) and value.strip().lower().startswith(POSTGRES_SCHEMES)


def redact_url(text: str) -> str:
    """`text` with the passwords of URLs hidden: the user-info part (`user:pw@` becomes
    `***@`) and a `password=` query parameter, which libpq URLs may also carry."""
    return _QUERY_PASSWORD.sub(r"\1***", redact_credentials(text))


class StoreURL(str):
    """A tape store URL; its repr hides the password, so a settings repr, a log line of
    an object holding one, or a traceback's locals never show it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(redact_url(str(self)))
