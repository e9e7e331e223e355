"""Scrubbing text that leaves the process: credentials in URLs and absolute paths.

Error messages are built from whatever failed, and what failed often names a URL
(`api_base` may be `http://user:password@host/v1`) or a file under the workspace or the
hookline home. Text shown to a remote client, written to a log or printed goes through
these functions, so that neither a password nor the layout of the machine leaks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

__all__ = ["redact_credentials", "redact_paths"]

_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/@]+@")


def redact_credentials(text: str) -> str:
    """`scheme://user:password@host` becomes `scheme://***@host` everywhere in `text`."""
    if "@" not in text:
        return text
    return _URL_CREDENTIALS.sub(r"\1***@", text)


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
