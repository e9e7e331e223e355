"""An MCP server that starts slowly, for benchmarks/bench_cli.py: it sleeps 1.5 s, as a
server fetched or compiled at its start would wait, then serves one tool over stdio with
the official SDK's MCPServer."""

from __future__ import annotations

import time

time.sleep(1.5)

from mcp.server.mcpserver import MCPServer  # noqa: E402  (after the slow start)

server = MCPServer("slow")


@server.tool()
def echo(text: str) -> str:
    """Repeat the text."""
    return text


if __name__ == "__main__":
    server.run("stdio")
