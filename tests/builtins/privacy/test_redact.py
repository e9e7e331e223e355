"""Passwords in URLs and connection strings stay hidden however they are written: the
forms a red team tried by hand, then random passwords from a wide alphabet in every place
a PostgreSQL URL or libpq string can carry one."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from hookline.builtins.privacy.redact import redact_credentials
from hookline.builtins.store.url import StoreURL, redact_url

FORMS = [
    ("postgresql://u:s3cr%t@db:5432/h", "postgresql://***@db:5432/h"),
    ("postgresql://u:se cret@db/h is down", "postgresql://***@db/h is down"),
    ("postgresql://u:p@ss@db/h", "postgresql://***@db/h"),
    ("postgresql://me@corp.example:pw@db/h", "postgresql://***@db/h"),
    ("postgresql://u@db/h?sslpassword=k3y&sslmode=require",
     "postgresql://***@db/h?sslpassword=***&sslmode=require"),
    ("postgres://db/h?PASSWORD=s3cret", "postgres://db/h?PASSWORD=***"),
    ("postgres://db/h?sslmode=disable&passwd=s3cret#x", "postgres://db/h?sslmode=disable&passwd=***#x"),
    ("host=db port=5432 password=s3cret dbname=h", "host=db port=5432 password=*** dbname=h"),
    ("host=db password = 's3 c\\'ret' user=u", "host=db password = *** user=u"),
    ("PGPASSWORD=s3cret psql", "PGPASSWORD=*** psql"),
    ("copied postgresql://u:a@db1/h to postgres://v:b@db2/h",
     "copied postgresql://***@db1/h to postgres://***@db2/h"),
    ("https://ghp_token@github.com/o/r", "https://***@github.com/o/r"),
    ("http://127.0.0.1:8787/v1 refused", "http://127.0.0.1:8787/v1 refused"),
    ("no secrets here: a=b, user@example.org", "no secrets here: a=b, user@example.org"),
]


def test_a_query_s_tokens_and_keys_are_hidden_and_words_that_hold_them_are_not() -> None:
    assert redact_credentials(
        "https://h/mcp?token=Q&api_key=K&sig=S&apikey=A&access_token=T&auth=X&page=2"
    ) == "https://h/mcp?token=***&api_key=***&sig=***&apikey=***&access_token=***&auth=***&page=2"
    assert redact_credentials("https://h/x?monkey=1&design=2&author=3&keyword=4") == \
        "https://h/x?monkey=1&design=2&author=3&keyword=4"


@pytest.mark.parametrize(("text", "shown"), FORMS)
def test_each_form_is_redacted(text: str, shown: str) -> None:
    assert redact_credentials(text) == shown
    assert redact_url(text) == shown


PASSWORDS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Zl", "Zp"],
                                  exclude_characters="\n\r\x85"), min_size=1, max_size=24)
"""Any text on one line: letters, digits, spaces, punctuation (`@`, `/`, `%`, `:`, `?`,
`&`, `#`, quotes, backslashes), symbols, other scripts."""
QUERY_PASSWORDS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Z", "Cc"],
                                        exclude_characters="&#"), min_size=1, max_size=24)
"""What a URL query value can hold raw (its end is the next `&`, `#` or space)."""


@given(PASSWORDS)
@example("p@ss word/%zz:@")
@example("a http://b")
def test_a_user_info_password_never_shows(password: str) -> None:
    for text, shown in (
            (f"postgresql://user:{password}@db.internal:5432/tapes",
             "postgresql://***@db.internal:5432/tapes"),
            (f"cannot open postgresql://user:{password}@db:1/t: connection refused",
             "cannot open postgresql://***@db:1/t: connection refused"),
            (f"x postgres://me:{password}@db/t?sslmode=require and more",
             "x postgres://***@db/t?sslmode=require and more")):
        assert redact_credentials(text) == shown
        assert repr(StoreURL(text)) == repr(shown)


@given(QUERY_PASSWORDS, st.sampled_from(["password", "PASSWORD", "sslpassword", "passwd",
                                        "SslPassWord", "pwd"]))
def test_a_query_password_never_shows(password: str, key: str) -> None:
    assert redact_url(f"postgresql://db/tapes?{key}={password}") == (
        f"postgresql://db/tapes?{key}=***")
    assert redact_url(f"postgresql://u@db/tapes?sslmode=require&{key}={password}&x=1 failed") \
        == f"postgresql://***@db/tapes?sslmode=require&{key}=***&x=1 failed"


@given(PASSWORDS, st.sampled_from(["password", "PASSWORD", "sslpassword", "passwd"]))
@example("a://b@c", "password")
def test_a_conninfo_password_never_shows(password: str, key: str) -> None:
    quoted = "'" + password.replace("\\", "\\\\").replace("'", "\\'") + "'"
    shown = f"host=db port=5432 {key}=*** dbname=tapes"
    assert redact_credentials(f"host=db port=5432 {key}={quoted} dbname=tapes") == shown
    if not any(char.isspace() or char in "'\"\\" for char in password):  # the bare form
        assert redact_credentials(f"host=db port=5432 {key}={password} dbname=tapes") == shown


@given(st.text(st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="*"),
               min_size=3, max_size=24))
def test_a_driver_quoting_the_password_alone_is_scrubbed_with_the_url(password: str) -> None:
    """libpq's errors about a malformed URL quote the offending password by itself."""
    url = f"postgresql://user:{password}@db/tapes"
    assert password not in redact_url(f'invalid percent-encoded token: "{password}"', url)
