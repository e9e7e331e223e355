"""The `[mcp_servers.NAME]` tables: what is read, and the errors for what is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from hookline.builtins.config import SettingsError
from hookline.builtins.mcp.config import parse_server, server_configs, server_table


def test_a_stdio_and_an_http_server_are_read_in_the_files_order() -> None:
    extra = {"mcp_servers": {
        "files": {"command": "srv", "args": ["-v"], "env": {"A": "1"}, "timeout": 5,
                  "tools": {"deny": ["rm"]}},
        "web": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer t"},
                "enabled": False},
    }}
    files, web = server_configs(extra)
    assert (files.transport, files.args, files.timeout, files.network) == ("stdio", ("-v",),
                                                                          5.0, False)
    assert files.offers("read") and not files.offers("rm")
    assert (web.transport, web.enabled, dict(web.headers)) == (
        "http", False, {"Authorization": "Bearer t"})
    assert "Bearer" not in repr(web)
    for server in (files, web):
        assert parse_server(server.name, server_table(server)) == server


@pytest.mark.parametrize(("name", "table", "message"), [
    ("a__b", {"command": "x"}, "the server name must be"),
    ("x", {"command": "x", "url": "http://h"}, "set exactly one of command"),
    ("x", {"url": "ftp://h"}, "url must be an http:// or https:// URL"),
    ("x", {"url": "http://h", "args": []}, "args apply to a command only"),
    ("x", {"command": "x", "comand": 1}, "unknown key 'comand'"),
    ("x", {"command": "x", "max_steps": 2}, "max_steps is a setting, which TOML puts in this "
                                             "table when written below its header"),
    ("x", {"command": "x", "timeout": 0}, "timeout must be a positive, finite number"),
    ("x", {"command": "x", "timeout": float("nan")}, "timeout must be a positive, finite"),
    ("x", {"command": "x", "timeout": float("inf")}, "timeout must be a positive, finite"),
    ("x", {"command": "x", "tools": {"allow": "read"}}, "tools.allow must be a list"),
])
def test_a_bad_table_names_the_server_and_what_is_wrong(name: str, table: dict[str, Any],
                                                         message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_server(name, table, "/home/config.toml")
    assert caught.value.message.startswith(f"MCP server [mcp_servers.{name}] in "
                                           f"/home/config.toml: ")
    assert message in caught.value.message
