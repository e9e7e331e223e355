"""How a fixture's expected log lines are matched: on their structured fields, not on a
kernel's wording.

A log line is an event name (its first word, ``hook.async_not_supported``), fields
(``key=value`` words: ``hook=load_state``, ``adapter=kwonly``) and free text (the other
words). An actual line matches an expected one when the event names are equal, every
expected field is there with the same value (an expected ``key=`` with no value asks
only that the field be there), and the expected free text occurs in the actual free text.
A value's trailing ``:``, ``,`` or ``;`` is punctuation, not part of it
(``error=OSError: cannot close`` has the field ``error=OSError``). An empty expected line
matches any line: one warning, whatever it says. Field order, extra fields and extra text
are a kernel's own business.
"""

from __future__ import annotations


def parse(line: str) -> tuple[str, dict[str, str], str]:
    """``(event, fields, free text)`` of one log line."""
    words = line.split()
    if not words:
        return "", {}, ""
    fields: dict[str, str] = {}
    text: list[str] = []
    for word in words[1:]:
        key, equals, value = word.partition("=")
        if equals and key.isidentifier():
            fields[key] = value.rstrip(":,;")
        else:
            text.append(word)
    return words[0], fields, " ".join(text)


def log_matches(expected: str, actual: str) -> bool:
    """Whether the actual log line says what the expected one asks."""
    if not expected.strip():
        return True
    want_event, want_fields, want_text = parse(expected)
    event, fields, text = parse(actual)
    if want_event != event:
        return False
    for key, value in want_fields.items():
        if key not in fields or (value and fields[key] != value):
            return False
    return want_text in text


def all_match(expected: list[str], actual: list[str]) -> bool:
    """The same number of lines, each matching the expected line at its place."""
    return len(expected) == len(actual) and all(
        log_matches(want, seen) for want, seen in zip(expected, actual, strict=True))
