"""Scrubbing text that leaves the process: credentials in URLs and absolute paths.

Error messages are built from whatever failed, and what failed often names a URL
(`api_base` may be `http://user:password@host/v1`) or a file under the workspace or the
hookline home. Text shown to a remote client, written to a log or printed goes through
these functions, so that neither a password nor the layout of the machine leaks.

Passwords come in many spellings, and a hidden one must stay hidden however it is
written, so the rules err on hiding too much:

- URL user-info. With a password (`scheme://user:password@host`) everything up to the
  last `@` before the next URL or the end of the line goes: a password may hold `@`,
  spaces, `/` or a stray `%` that were never percent-encoded. A bare user or token
  (`scheme://token@host`) goes up to its first `@`, as it cannot hold spaces.
- Any key that names a password (`password`, `PASSWORD`, `passwd`, `pwd`,
  `sslpassword`, `passphrase`...) followed by `=`: in a URL query the value up to the
  next `&` or `#`; in a libpq key=value string (`host=db password=secret`) the value up
  to the next space, or the whole quoted value (`password='a b\\'c'`). In a URL query,
  a key that names a token, a secret, a key, a signature, auth or a credential
  (`token`, `api_key`, `access_token`, `sig`) too.
- In a command line shown in a listing (`redact_command_line`), the value of an option
  named so (`--token X`, `--api-key=X`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

__all__ = ["redact_command_line", "redact_credentials", "redact_paths", "replace_values",
           "url_secrets"]

_SCHEME = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://")
_USER_THEN_COLON = re.compile(r"[^\s/:]*:")
_TOKEN = re.compile(r"[^\s/@]+@")
_PASSWORD_KEY = r"[\w.-]*?(?:password|passwd|passphrase|pwd)\s*=\s*"
_SECRET_NAME = (r"[\w.-]*?(?:password|passwd|passphrase|pwd|token|secret|signature"
                r"|credential|apikey|(?<![a-z])(?:key|sig|auth)(?![a-z]))[\w.-]*?")
_QUERY_SECRET_KEY = _SECRET_NAME + r"\s*=\s*"
_QUERY_PASSWORD = re.compile(rf"(?i)(?<=[?&;])({_QUERY_SECRET_KEY})[^&#\s]*")
_PASSWORD_PARAM = re.compile(
    rf"(?i)(?<![\w.?&;-])({_PASSWORD_KEY})"
    r"(?:'(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?)?\S*")


def redact_credentials(text: str) -> str:
    """`text` with every password of a URL or a key=value string replaced by `***`:
    `scheme://user:password@host` becomes `scheme://***@host`, `password=x` becomes
    `password=***` (see the module's rules)."""
    if "@" in text:
        text = "\n".join(_redact_user_info(line) for line in text.split("\n"))
    if "=" in text:
        text = _PASSWORD_PARAM.sub(r"\1***", _QUERY_PASSWORD.sub(r"\1***", text))
    return text


_SECRET_OPTION = re.compile(rf"(?i)^(--?{_SECRET_NAME})(=.*)?$")
"""A command line's option that names a secret (`--token`, `--api-key=...`)."""


def redact_command_line(words: Iterable[str]) -> str:
    """A command line for a listing: the value of each option that names a token, key,
    password or secret (`--token X`, `--api-key=X`) replaced by `***`, then URLs' and
    `password=` values as `redact_credentials` hides them."""
    shown: list[str] = []
    hide_next = False
    for word in words:
        option = _SECRET_OPTION.match(word)
        if hide_next:
            shown.append("***")
        elif option is not None and option.group(2) is not None:
            shown.append(f"{option.group(1)}=***")
        else:
            shown.append(word)
        hide_next = not hide_next and option is not None and option.group(2) is None
    return redact_credentials(" ".join(shown))


def _redact_user_info(line: str) -> str:
    matches = list(_SCHEME.finditer(line))
    if not matches:
        return line

    def end_of(index: int) -> int:  # where the text of the index-th URL ends at the latest
        return matches[index].start() if index < len(matches) else len(line)

    pieces = [line[:matches[0].start()]]
    index = 0
    while index < len(matches):
        match, index = matches[index], index + 1
        rest = line[match.end():end_of(index)]
        if _USER_THEN_COLON.match(rest):
            while "@" not in rest and index < len(matches):  # a password holding "://"
                index += 1
                rest = line[match.end():end_of(index)]
            if "@" in rest:
                rest = "***" + rest[rest.rfind("@"):]
        elif (token := _TOKEN.match(rest)) is not None:
            rest = "***@" + rest[token.end():]
        pieces.append(match.group(0) + rest)
    return "".join(pieces)


def replace_values(text: str, values: Iterable[tuple[str | None, str]]) -> str:
    """Each `(value, label)` pair's value (a key, an endpoint) replaced by its label in
    `text`, longer values first; values shorter than 8 characters are left (they would
    match ordinary words)."""
    for value, label in sorted(((value, label) for value, label in values
                                if value and len(value) >= 8),
                               key=lambda pair: len(pair[0]), reverse=True):
        text = text.replace(value, label)
    return text


def redact_paths(text: str, workspace: str | os.PathLike[str] | None = None,
                 others: Iterable[tuple[str | os.PathLike[str], str]] = ()) -> str:
    """Paths under `workspace` become relative to it (the workspace itself `.`); each other
    `(folder, label)` pair replaces `folder` with `label` (for example the hookline home
    with `$HOOKLINE_HOME`). Longer folders are replaced first, so nested ones stay exact."""
    pairs = [(os.fspath(folder), label) for folder, label in others if folder]
    if workspace:
        pairs.append((os.fspath(workspace), ""))
    for folder, label in sorted(pairs, key=lambda pair: len(pair[0]), reverse=True):
        folder = folder.rstrip(os.sep)
        if len(folder) < 2 or folder not in text:
            continue
        pattern = re.compile(re.escape(folder) + r"(?:/(?=[^\s'\"])|(?![\w.-]))")

        def replace(match: re.Match[str], label: str = label) -> str:
            if match.group(0).endswith("/"):
                return f"{label}/" if label else ""
            return label or "."

        text = pattern.sub(replace, text)
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
