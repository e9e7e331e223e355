"""The turn's store budget: calls are bounded by what is left, each takes what it took,
a call inside a call counts once, and a spent budget fails the next call at once."""

from __future__ import annotations

import time

import pytest

from hookline.builtins.store.budget import store_call, turn_store_budget
from hookline.kernel.errors import ErrorKind, HooklineError


def test_without_a_budget_a_call_keeps_its_own_bound() -> None:
    with store_call(123.0) as until:
        assert until == 123.0


def test_calls_share_the_budget_and_nested_calls_count_once() -> None:
    with turn_store_budget(0.3) as budget:
        assert budget is not None
        far = time.monotonic() + 60
        with store_call(far) as until:
            assert until < far and until - time.monotonic() <= 0.3
            with store_call(far) as inner:
                assert inner == far  # not bounded or counted again
            time.sleep(0.1)
        assert 0.15 <= budget.left <= 0.2
        with store_call(far):
            time.sleep(0.2)
        with pytest.raises(HooklineError) as caught, store_call(far):
            pass
    assert caught.value.kind is ErrorKind.temporary
    assert "within 0.3 s during this turn" in caught.value.message


def test_a_call_failing_once_the_budget_is_spent_says_so() -> None:
    with turn_store_budget(0.05), pytest.raises(HooklineError) as caught, \
            store_call(time.monotonic() + 60):
        time.sleep(0.06)
        raise HooklineError(ErrorKind.temporary, "connection timeout expired")
    assert "store_turn_deadline" in caught.value.message
    assert "connection timeout" in str(caught.value.__cause__)
