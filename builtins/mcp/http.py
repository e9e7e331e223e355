"""A streamable HTTP MCP server: the SDK's client transport, with the server's headers,
and an HTTP error status (401 first) named in the one line that says the server failed.
Launching one starts nothing here: its session is opened when a turn needs it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio

from hookline.kernel.errors import ErrorKind, HooklineError

from ..privacy.redact import redact_credentials
from .config import ServerConfig

__all__ = ["RemoteServer", "launch_http_server", "open_http_server"]

_STATUS_HINTS = {
    401: "the server wants credentials: set headers (Authorization = \"Bearer ...\")",
    403: "the server refused these credentials: check headers",
    404: "there is no MCP endpoint at this URL: check url (often it ends in /mcp)",
}


@contextlib.asynccontextmanager
async def open_http_server(config: ServerConfig) -> AsyncIterator[tuple[Any, Any]]:
    """The read and write streams of a session with the server at `config.url`."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    assert config.url is not None
    statuses: list[int] = []

    async def seen(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            statuses.append(response.status_code)

    client = create_mcp_http_client(
        headers=dict(config.headers),
        timeout=httpx2.Timeout(config.timeout, read=max(config.timeout, 300.0)))
    client.event_hooks = {"response": [seen]}
    try:
        async with client, streamable_http_client(config.url, http_client=client) as streams:
            yield streams
    except Exception as exc:
        if not statuses:
            raise
        status = statuses[0]
        hint = _STATUS_HINTS.get(status, "see the server's own log")
        raise HooklineError(ErrorKind.config, (
            f"MCP server {config.name!r} answered HTTP {status} at "
            f"{redact_credentials(config.url)}: {hint} in [mcp_servers.{config.name}] of "
            f"config.toml")) from exc


class RemoteServer:
    """An HTTP server as a connection launches it (`connection.Launched`)."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.ended = anyio.Event()
        """Never set: there is no process to see end."""

    def streams(self) -> contextlib.AbstractAsyncContextManager[tuple[Any, Any]]:
        return open_http_server(self.config)

    async def exit_note(self) -> str:
        return "its connection closed"

    def stderr_tail(self) -> str:
        return ""


@contextlib.asynccontextmanager
async def launch_http_server(config: ServerConfig) -> AsyncIterator[RemoteServer]:
    yield RemoteServer(config)
