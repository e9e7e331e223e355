"""Telling a PostgreSQL URL from a file path, and showing one without its password.

Kept free of heavy imports: the settings parser uses it on every start, and the psycopg
driver is imported only once a PostgreSQL store is really opened.
"""

from __future__ import annotations

import re
from typing import Final

from ..privacy.redact import redact_credentials

__all__ = ["POSTGRES_SCHEMES", "StoreURL", "is_postgres_url", "redact_url", "url_secrets"]

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


def url_secrets(url: str) -> set[str]:
    """The passwords in a URL as the text may show them: raw, percent-decoded and
    encoded again; for a user-info password, also its pieces between `@` and `/` (libpq
    ends the user-info at the first of them and reads the rest as the host)."""
    from urllib.parse import quote_plus, unquote, unquote_plus

    found: set[str] = set()
    rest = url.strip().split("://", 1)[-1]
    user_info = rest[:rest.rfind("@")] if "@" in rest else ""
    if ":" in user_info:
        password = user_info.split(":", 1)[1]
        found.update([password, *re.split(r"[@/]", password)])
    query = rest.partition("?")[2].partition("#")[0]
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        if re.search(r"(?i)pass|pwd", key) and value:
            found.add(value)
    for secret in list(found):
        found.update([unquote(secret), unquote_plus(secret), quote_plus(unquote_plus(secret))])
    return {secret for secret in found if secret}


class StoreURL(str):
    """A tape store URL; its repr hides the password, so a settings repr, a log line of
    an object holding one, or a traceback's locals never show it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(redact_url(str(self)))
