"""What one server may put in every request is bounded: at most `MAX_SERVER_TOOLS` of its
tools are offered (one warning for the rest), and a description is cut to
`MAX_DESCRIPTION` characters with what was left out counted."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from hookline.builtins.mcp.cache import ListedTool
from hookline.builtins.mcp.config import parse_server
from hookline.builtins.mcp.tools import MAX_DESCRIPTION, MAX_SERVER_TOOLS, make_tools

SCHEMA = {"type": "object", "properties": {}}


async def never(*_args: Any) -> Any:
    raise AssertionError("not called")


def test_a_server_offering_thousands_of_tools_offers_the_first_and_says_so(
        caplog: pytest.LogCaptureFixture) -> None:
    listed = [ListedTool(f"t{index}", "d", SCHEMA) for index in range(MAX_SERVER_TOOLS + 50)]
    warned: set[str] = set()
    config = parse_server("many", {"command": "x"})
    with caplog.at_level(logging.WARNING):
        tools = make_tools(config, listed, never, never, warned)
        again = make_tools(config, listed, never, never, warned)
    assert [tool.name for tool in tools] == [f"many__t{i}" for i in range(MAX_SERVER_TOOLS)]
    assert len(again) == MAX_SERVER_TOOLS
    (said,) = [r.getMessage() for r in caplog.records if "more than" in r.getMessage()]
    assert said == (f"MCP server 'many' offers more than {MAX_SERVER_TOOLS} tools: the rest "
                    f"are not offered (choose them with tools.allow)")


def test_a_huge_description_is_cut_with_what_was_left_out_counted() -> None:
    listed = [ListedTool("big", "x" * (MAX_DESCRIPTION + 1234), SCHEMA)]
    (tool,) = make_tools(parse_server("s", {"command": "x"}), listed, never, never, set())
    assert tool.description == "x" * MAX_DESCRIPTION + "... [1,234 more characters left out]"


def test_a_request_offers_at_most_its_limit_of_tools_whatever_their_servers(
        caplog: pytest.LogCaptureFixture) -> None:
    """Each server within its bound, two of them and the builtin tools are still more
    than a request may offer: the first in priority order are, one warning says so."""
    from hookline.builtins.agent.loop import offered_tools
    from hookline.builtins.config.limits import MAX_REQUEST_TOOLS
    from hookline.builtins.host.tools import builtin_tools

    listed = [ListedTool(f"t{index}", "d", SCHEMA) for index in range(100)]
    servers = [make_tools(parse_server(name, {"command": "x"}), listed, never, never, set())
               for name in ("one", "two")]
    tools = [*builtin_tools(), *servers[0], *servers[1]]
    with caplog.at_level(logging.WARNING):
        offered = offered_tools(tools)
        offered_tools(tools)  # every run collects them: said once
    assert offered == tools[:MAX_REQUEST_TOOLS]
    (said,) = [r.getMessage() for r in caplog.records if "too_many_tools" in r.getMessage()]
    assert f"offered={len(tools)} left_out={len(tools) - MAX_REQUEST_TOOLS}" in said
