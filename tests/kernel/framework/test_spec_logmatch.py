"""Expected log lines are matched on their fields (spec/logmatch.py): another kernel may
order fields, add fields or text, and still pass; a wrong event, value or missing field
fails."""

from __future__ import annotations

import pytest
from spec_support import SPEC_DIR  # noqa: F401  (puts spec/ on sys.path)

from hookline.spec.logmatch import all_match, log_matches, parse

EXPECTED = "hook.async_not_supported hook=load_state adapter=kwonly"


def test_a_line_is_an_event_fields_and_text() -> None:
    assert parse("environment.close_failed session=bad error=OSError: cannot close") == (
        "environment.close_failed", {"session": "bad", "error": "OSError"}, "cannot close")


@pytest.mark.parametrize("actual", [
    EXPECTED,
    "hook.async_not_supported adapter=kwonly hook=load_state",
    "hook.async_not_supported hook=load_state adapter=kwonly kind=coroutine (closed)",
])
def test_another_kernels_wording_of_the_same_fields_matches(actual: str) -> None:
    assert log_matches(EXPECTED, actual)


@pytest.mark.parametrize("actual", [
    "hook.async_skipped hook=load_state adapter=kwonly",
    "hook.async_not_supported hook=load_state adapter=other",
    "hook.async_not_supported hook=load_state",
    "hook.async_not_supported hook=load_state plugin=kwonly",
])
def test_a_different_event_value_or_field_does_not(actual: str) -> None:
    assert not log_matches(EXPECTED, actual)


def test_empty_values_text_and_lines() -> None:
    assert log_matches("hook.bad_return got=dict expected=",
                       "hook.bad_return expected=A | B got=dict")
    assert not log_matches("hook.bad_return got=dict expected=", "hook.bad_return got=dict")
    assert log_matches("hook.x plugin 'p' returned list",
                       "hook.x plugin 'p' returned list, which is ignored")
    assert not log_matches("hook.x plugin 'p' returned list", "hook.x plugin 'q' returned list")
    assert all_match(["", EXPECTED], ["anything at all", EXPECTED])
    assert not all_match([EXPECTED], [EXPECTED, EXPECTED])
