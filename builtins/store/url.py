"""Telling a PostgreSQL URL from a file path, and showing one without its password.

Kept free of heavy imports: the settings parser uses it on every start, and the psycopg
driver is imported only once a PostgreSQL store is really opened.
"""

from __future__ import annotations

from typing import Final

from ..privacy.redact import redact_credentials, url_secrets

__all__ = ["POSTGRES_SCHEMES", "StoreURL", "is_postgres_url", "redact_url"]

POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")

_SHORTEST_SECRET = 3
"""Shorter passwords are hidden only where the rules find them (a URL's user-info, a
password parameter), not wherever the text has the same letters."""


def is_postgres_url(value: object) -> bool:
    """True for a `postgresql://` or `postgres://` URL (the scheme in any case)."""
    return isinstance(value, str) and value.strip().lower().startswith(POSTGRES_SCHEMES)


def redact_url(text: str, url: str | None = None) -> str:
    """`text` with the passwords of URLs and key=value strings hidden (`redact_credentials`).
    With `url`, also every password `url` holds, wherever `text` quotes it: the driver's
    error about a malformed URL may quote the password alone (`invalid percent-encoded
    token: "s3cr%t"`), or part of it as a host name (a password holding `@`)."""
    text = redact_credentials(text)
    for secret in sorted(url_secrets(url) if url else (), key=len, reverse=True):
        if len(secret) >= _SHORTEST_SECRET:
            text = text.replace(secret, "***")
    return text


class StoreURL(str):
    """A tape store URL; its repr hides the password, so a settings repr, a log line of
    an object holding one, or a traceback's locals never show it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(redact_url(str(self)))
