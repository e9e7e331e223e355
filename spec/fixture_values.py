"""Fixture values: how fixture data becomes Python values, and how results are compared.

Standard library only; the runner and ``fixture_plugins.py`` import this module. The
value tags are described in ``spec/README.md``.
"""

from __future__ import annotations

import os
from typing import Any

from .framework_steps import FixtureError, Tags, make_exception


def decode(value: Any, tags: Tags | None = None, args: dict[str, Any] | None = None) -> Any:
    """Turn fixture data into Python values.

    TOML has no null and no exceptions: ``{"$none" = true}`` and
    ``{"$exception" = "RuntimeError", message = "..."}`` stand for them. Any other table
    with a ``$tag`` key is built by ``tags`` (see ``framework_steps.Tags``); ``args`` are
    the arguments of the call being answered, for ``$arg`` and ``$replace``.
    """
    if isinstance(value, dict):
        if value.get("$none") is True:
            return None
        if "$exception" in value:
            return make_exception({"type": value["$exception"],
                                   "message": value.get("message", "")})
        tag = next((key[1:] for key in value if key.startswith("$")), None)
        if tag is not None:
            if tags is None:
                raise FixtureError(f"${tag} cannot be used here")
            return tags.build(tag, value, args)
        return {key: decode(item, tags, args) for key, item in value.items()}
    if isinstance(value, list):
        return [decode(item, tags, args) for item in value]
    return value


def describe(value: Any, adapter: Any = None) -> Any:
    """Plain data for comparison: tables, arrays, strings, numbers, booleans, None.

    Values the runner built describe themselves (``__spec_describe__``); anything else
    that is not plain data goes to ``adapter.describe``. What is left: exceptions become
    ``[type name, message]``, paths their string, tuples arrays.
    """
    own = getattr(type(value), "__spec_describe__", None)
    if own is not None:
        return describe(own(value), adapter)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return str.__str__(value)  # str subclasses (enums, markers) as plain text
    if isinstance(value, dict):
        return {key: describe(item, adapter) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [describe(item, adapter) for item in value]
    adapter_describe = getattr(adapter, "describe", None)
    if adapter_describe is not None:
        described = adapter_describe(value)
        if described is not value:
            return describe(described, adapter)
    if isinstance(value, BaseException):
        return [type(value).__name__, str(value)]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value  # unknown: compared as is, so it fails against fixture data


def same(expected: Any, actual: Any) -> bool:
    """Equality of described values that also tells booleans from numbers
    (``False == 0`` in Python, but a fixture expecting ``false`` must not accept ``0``)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(map(same, expected, actual))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(
            same(expected[key], actual[key]) for key in expected
        )
    return expected == actual


def includes(expected: Any, actual: Any) -> bool:
    """Like ``same``, but a table only needs the keys the fixture gives (recursively)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return all(key in actual and includes(item, actual[key])
                   for key, item in expected.items())
    return same(expected, actual)
