"""A small TOML writer: the config file `hookline onboard` writes (tables of strings,
integers, floats, booleans and lists). Reading is `tomllib`'s."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["dumps_toml", "rewritten"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {
    "\\": "\\\\",
    '"': '\\"',
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def _toml_string(text: str) -> str:
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _toml_key(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(f"TOML keys must be strings, got {type(key).__name__}: {key!r}")
    return key if _BARE_KEY.fullmatch(key) else _toml_string(key)


def _toml_value(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise ValueError(f"{where}: integer {value} does not fit TOML's 64-bit range")
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list | tuple):
        items = [
            _toml_value(item, f"{where}[{i}]") for i, item in enumerate(value) if item is not None
        ]
        return "[" + ", ".join(items) + "]"
    if isinstance(value, Mapping):
        pairs = [
            f"{_toml_key(k)} = {_toml_value(v, f'{where}.{k}')}"
            for k, v in value.items()
            if v is not None
        ]
        return "{ " + ", ".join(pairs) + " }" if pairs else "{}"
    raise TypeError(
        f"{where}: cannot write {type(value).__name__} to TOML "
        "(supported: str, int, float, bool, list, table)"
    )


def _write_table(lines: list[str], path: tuple[str, ...], table: Mapping[str, Any]) -> None:
    scalars = [(k, v) for k, v in table.items() if v is not None and not isinstance(v, Mapping)]
    tables = [(k, v) for k, v in table.items() if isinstance(v, Mapping)]
    if path and (scalars or not tables):
        if lines:
            lines.append("")
        lines.append("[" + ".".join(_toml_key(part) for part in path) + "]")
    for key, value in scalars:
        where = ".".join((*path, key)) if isinstance(key, str) else repr(key)
        lines.append(f"{_toml_key(key)} = {_toml_value(value, where)}")
    for key, value in tables:
        _toml_key(key)
        _write_table(lines, (*path, key), value)


def dumps_toml(data: Mapping[str, Any]) -> str:
    """TOML text for `data`: nested tables of str/int/float/bool/list; None values are left out."""
    if not isinstance(data, Mapping):
        raise TypeError(f"TOML documents are tables, got {type(data).__name__}")
    lines: list[str] = []
    _write_table(lines, (), data)
    return "\n".join(lines) + "\n" if lines else ""


def rewritten(old: bytes, data: Mapping[str, Any]) -> str | None:
    """The TOML text `old`, changed to hold exactly `data`: its comments, order and layout
    kept where its values stay (tomlkit), a value that changed replaced in place, new ones
    added. None when `old` is not TOML, or the result would not read back as `data` (the
    caller then writes `data` afresh)."""
    import tomlkit  # only when a file is rewritten

    try:
        kept, comments = _without_header_comments(old.decode("utf-8"))
        document = tomlkit.parse(kept)
        _sync(document, data)
        text = _with_header_comments(tomlkit.dumps(document), comments)
        import tomllib

        if tomllib.loads(text) != _without_none(data):
            return None
    except (ValueError, TypeError, RecursionError):
        return None
    return text


_HEADER = re.compile(r"\s*\[\[?[^\]]+\]\]?\s*(#.*)?")
"""A table's header line, `[name]` or `[[name]]` (a comment may follow)."""


def _without_header_comments(text: str) -> tuple[str, dict[str, list[list[str]]]]:
    """`text` without the comment lines right above each table header, and those lines
    by header (in order, for `[[...]]` headers met again): tomlkit counts them as the end
    of the table before, so a table removed took the next one's comment, and keys added
    to the one before landed between a comment and its header."""
    lines = text.split("\n")
    kept: list[str] = []
    comments: dict[str, list[list[str]]] = {}
    for line in lines:
        if _HEADER.fullmatch(line):
            block: list[str] = []
            while kept and kept[-1].lstrip().startswith("#"):
                block.insert(0, kept.pop())
            comments.setdefault(line.strip(), []).append(block)
        kept.append(line)
    return "\n".join(kept), comments


def _with_header_comments(text: str, comments: dict[str, list[list[str]]]) -> str:
    """`text` with each header's comment lines put back above it (a header gone takes its
    comment with it)."""
    out: list[str] = []
    for line in text.split("\n"):
        blocks = comments.get(line.strip()) if _HEADER.fullmatch(line) else None
        if blocks:
            out.extend(blocks.pop(0))
        out.append(line)
    return "\n".join(out)


def _sync(table: Any, data: Mapping[str, Any]) -> None:
    for key in [key for key in table if data.get(key) is None]:
        del table[key]
    for key, value in data.items():
        if value is None:
            continue
        current = table.get(key)
        if isinstance(value, Mapping) and hasattr(current, "unwrap") and isinstance(
                current.unwrap(), dict):
            _sync(current, value)
        elif current is None or _plain(current) != _without_none(value):
            table[key] = _without_none(value)


def _plain(item: Any) -> Any:
    return item.unwrap() if hasattr(item, "unwrap") else item


def _without_none(value: Any) -> Any:
    """`value` as `dumps_toml` writes it: None left out of tables and arrays."""
    if isinstance(value, Mapping):
        return {key: _without_none(inner) for key, inner in value.items() if inner is not None}
    if isinstance(value, (list, tuple)):
        return [_without_none(inner) for inner in value if inner is not None]
    return value
