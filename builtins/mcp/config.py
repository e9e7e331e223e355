"""The `[mcp_servers.NAME]` tables of config.toml, checked into `ServerConfig`s.

Reading them needs no MCP SDK: `hookline mcp list` and a config without servers stay cheap.
A bad table is a `SettingsError` naming the server, the key and the fix.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config.table import SettingsError, misplaced_settings

__all__ = ["CONFIG_TABLE", "DEFAULT_TIMEOUT", "NAME_SEPARATOR", "ServerConfig", "server_configs"]

CONFIG_TABLE = "mcp_servers"
"""The config file's table of servers, as Claude Code's `mcpServers` and Codex's own."""

NAME_SEPARATOR = "__"
"""Between the server's name and the tool's: `files__read` is tool `read` of `files`."""

DEFAULT_TIMEOUT = 60.0
"""Seconds a server gets to start (and list its tools) and each call to answer."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,31}$")
_KEYS = frozenset({"command", "args", "env", "cwd", "url", "headers", "enabled", "tools",
                   "timeout", "network"})


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server: a command started over stdio, or a streamable HTTP `url`."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    enabled: bool = True
    allow: tuple[str, ...] | None = None
    """Tool names offered (all when None)."""
    deny: tuple[str, ...] = ()
    """Tool names never offered, even when allowed."""
    timeout: float = DEFAULT_TIMEOUT
    network: bool = False
    """A stdio server's sandbox lets it open TCP connections."""

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def offers(self, tool: str) -> bool:
        """Whether the `tools` lists let the model see tool `tool` of this server."""
        return (self.allow is None or tool in self.allow) and tool not in self.deny

    def describe(self) -> str:
        """The command line or the URL, for listings: credentials in it hidden (a URL's
        password, a `--token` option's value), header values never shown."""
        from ..privacy.redact import redact_command_line, redact_credentials

        if self.command is not None:
            return redact_command_line([self.command, *self.args])
        return redact_credentials(str(self.url))


def server_configs(extra: Mapping[str, Any], source: str = "config.toml") -> list[ServerConfig]:
    """The servers of the config's `[mcp_servers]` table, in the file's order."""
    table = extra.get(CONFIG_TABLE)
    if table is None:
        return []
    if not isinstance(table, Mapping):
        raise _error("", f"[{CONFIG_TABLE}] must be a table of servers", source)
    return [parse_server(name, value, source) for name, value in table.items()]


def parse_server(name: str, raw: Any, source: str = "config.toml") -> ServerConfig:
    """One `[mcp_servers.NAME]` table, checked."""
    if not _NAME.match(name) or NAME_SEPARATOR in name:
        raise _error(name, "the server name must be 1-32 letters, digits or dashes, the "
                     "first a letter or digit (tools are offered as NAME__tool)", source)
    if not isinstance(raw, Mapping):
        raise _error(name, "must be a table (command = ... or url = ...)", source)
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise _error(name, f"unknown key {', '.join(map(repr, unknown))} (known: "
                     f"{', '.join(sorted(_KEYS))}){misplaced_settings(unknown)}", source)
    command, url = raw.get("command"), raw.get("url")
    if (command is None) == (url is None):
        raise _error(name, "set exactly one of command (a stdio server) or url (a streamable "
                     "HTTP server)", source)
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise _error(name, "command must be a non-empty string", source)
    if url is not None and (not isinstance(url, str)
                            or not url.startswith(("http://", "https://"))):
        raise _error(name, "url must be an http:// or https:// URL", source)
    stdio_only = [key for key in ("args", "env", "cwd", "network") if key in raw]
    if url is not None and stdio_only:
        raise _error(name, f"{', '.join(stdio_only)} apply to a command only, not to a url",
                     source)
    if command is not None and "headers" in raw:
        raise _error(name, "headers apply to a url only, not to a command", source)
    tools = raw.get("tools", {})
    if not isinstance(tools, Mapping) or set(tools) - {"allow", "deny"}:
        raise _error(name, "tools must be a table with allow and/or deny lists of tool names",
                     source)
    allow = tools.get("allow")
    timeout = raw.get("timeout", DEFAULT_TIMEOUT)
    if (isinstance(timeout, bool) or not isinstance(timeout, int | float)
            or not 0 < timeout < math.inf):  # nan fails it too
        raise _error(name, f"timeout must be a positive, finite number of seconds, got "
                           f"{timeout!r}", source)
    return ServerConfig(
        name=name,
        command=command,
        args=_strings(name, "args", raw.get("args", []), source),
        env=_string_table(name, "env", raw.get("env", {}), source),
        cwd=_optional_string(name, "cwd", raw.get("cwd"), source),
        url=url,
        headers=_string_table(name, "headers", raw.get("headers", {}), source),
        enabled=_boolean(name, "enabled", raw.get("enabled", True), source),
        allow=None if allow is None else _strings(name, "tools.allow", allow, source),
        deny=_strings(name, "tools.deny", tools.get("deny", []), source),
        timeout=float(timeout),
        network=_boolean(name, "network", raw.get("network", False), source),
    )


def server_table(server: ServerConfig) -> dict[str, Any]:
    """The config table that `parse_server` reads back as `server` (for `hookline mcp add`)."""
    table: dict[str, Any] = {}
    if server.command is not None:
        table["command"] = server.command
        if server.args:
            table["args"] = list(server.args)
        if server.env:
            table["env"] = dict(server.env)
        if server.cwd:
            table["cwd"] = server.cwd
        if server.network:
            table["network"] = True
    else:
        table["url"] = server.url
        if server.headers:
            table["headers"] = dict(server.headers)
    if not server.enabled:
        table["enabled"] = False
    tools: dict[str, Any] = {}
    if server.allow is not None:
        tools["allow"] = list(server.allow)
    if server.deny:
        tools["deny"] = list(server.deny)
    if tools:
        table["tools"] = tools
    if server.timeout != DEFAULT_TIMEOUT:
        table["timeout"] = server.timeout
    return table


def _error(name: str, message: str, source: str) -> SettingsError:
    where = f"[{CONFIG_TABLE}.{name}]" if name else f"[{CONFIG_TABLE}]"
    return SettingsError(f"MCP server {where} in {source}: {message}.",
                         key=f"{CONFIG_TABLE}.{name}" if name else CONFIG_TABLE,
                         source=f"file:{source}")


def _strings(name: str, key: str, value: Any, source: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _error(name, f"{key} must be a list of strings", source)
    return tuple(value)


def _string_table(name: str, key: str, value: Any, source: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise _error(name, f"{key} must be a table of strings", source)
    return dict(value)


def _optional_string(name: str, key: str, value: Any, source: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _error(name, f"{key} must be a string", source)
    return value


def _boolean(name: str, key: str, value: Any, source: str) -> bool:
    if not isinstance(value, bool):
        raise _error(name, f"{key} must be true or false", source)
    return value
