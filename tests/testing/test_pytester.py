"""A plugin author's test file, run by pytest in a fresh process: the fixtures come from
hookline's pytest11 entry point, with nothing in the author's conftest but the backends."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CONFTEST = '''
import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param
'''

AUTHOR_TEST = '''
import pytest

from hookline.kernel import hookimpl
from hookline.testing import run_turn

pytestmark = pytest.mark.anyio


class Greeter:
    def __init__(self, framework):
        self.framework = framework

    @hookimpl
    def system_prompt(self, prompt, state):
        return "Greet the user by name."


async def test_greets(hookline_framework):
    framework = hookline_framework(Greeter, script=[{"text": "Hello, Ada!"}])
    turn = await run_turn(framework, "I am Ada")
    assert turn.reply == "Hello, Ada!"
    turn.trace.assert_calls("system_prompt", ["Greeter", "builtin"])


async def test_wrong_expectation(hookline_framework):
    framework = hookline_framework(Greeter, script=[{"text": "Hi"}])
    turn = await run_turn(framework, "x")
    turn.trace.assert_answered("resolve_session", "Greeter")
'''


@pytest.fixture
def author(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_greeter=AUTHOR_TEST)
    return pytester


def test_an_authors_tests_run_on_both_backends(author: pytest.Pytester) -> None:
    result = author.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([
        "*test_greets?asyncio? PASSED*",
        "*test_greets?trio? PASSED*",
    ])
    result.stdout.fnmatch_lines([
        "*AssertionError: hook 'resolve_session' was answered by 'builtin', not 'Greeter'*"])


def test_the_fixtures_come_from_the_hookline_entry_point(author: pytest.Pytester) -> None:
    listed = author.runpytest_subprocess("-p", "no:cacheprovider", "--fixtures")
    listed.stdout.fnmatch_lines(["*fixtures defined from hookline.testing.plugin*",
                                 "hookline_home*", "hookline_workspace*",
                                 "hookline_framework*"])
    without = author.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:hookline",
                                          "-k", "test_greets")
    without.assert_outcomes(errors=2)
    without.stdout.fnmatch_lines(["*fixture 'hookline_framework' not found*"])
