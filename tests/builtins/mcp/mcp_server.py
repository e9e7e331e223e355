"""A real MCP server for the tests, built with the SDK's MCPServer (FastMCP of mcp 1.x).

    python mcp_server.py stdio               # over stdin and stdout
    python mcp_server.py stdio-stay          # the same, then it stays when stdin closes
    python mcp_server.py http PORT TOKEN     # streamable HTTP on 127.0.0.1:PORT/mcp, which
                                             # answers 401 without `Authorization: Bearer TOKEN`
    python mcp_server.py fail                # writes 12 lines on stderr and exits with 1

Over stdio, the environment shapes the server without changing its command (which names
its tool list in hookline's cache): with MCP_GATE=PATH it writes PATH.started at once,
waits until PATH exists, then writes PATH.up and serves; with MCP_EXTRA=1 it has one more
tool, `retired`.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.types import Image
from pydantic import Field

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
                    "0000000d4944415478da63f8cfc0f01f0005000201a5f6e9b40000000049454e44ae426082")

PROCESS = uuid.uuid4().hex
"""This server process, told from a restarted one (a new sandbox may give it the same pid)."""

server = MCPServer("test-server")


@server.tool()
def echo(text: str, times: int = 1) -> str:
    """Repeat the text."""
    return " ".join([text] * times)


@server.tool()
def picture() -> Image:
    """A one-pixel PNG."""
    return Image(data=PNG, format="png")


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def crash_once(marker: str) -> str:
    """Exit at once the first time (leaving `marker`), answer the next time."""
    if not Path(marker).exists():
        Path(marker).write_text(PROCESS)
        os._exit(3)
    return f"recovered in process {PROCESS}"


@server.tool()
def hang() -> str:
    """Never answer."""
    time.sleep(3600)
    return "late"


@server.tool()
def write(path: str, text: str) -> str:
    """Write a file; the sandbox decides where."""
    try:
        Path(path).write_text(text)
    except OSError as exc:
        return f"refused: {exc.strerror}"
    return "written"


@server.tool()
def linger() -> int:
    """Start a process that leaves the server's session (setsid) and sleeps; its pid."""
    import subprocess

    child = subprocess.Popen(["sleep", "3600"], start_new_session=True)
    return child.pid


@server.tool()
def measure(ratio: float, names: list[str], limit: int | None = None) -> str:
    """Arguments of the types the SDK makes anyOf, number and array schemas of; what the
    server received, as JSON."""
    return json.dumps({"ratio": ratio, "names": names, "limit": limit})


@server.tool()
def code(value: Annotated[str, Field(pattern="^[a-z]+$")]) -> str:
    """A schema with a pattern: the kernel's validator cannot enforce it."""
    return value


@server.tool()
def broken() -> str:
    """Its schema is replaced below by one with a type JSON Schema does not have."""
    return "never offered"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `grown` and tell the client the tools changed."""
    server.add_tool(grown)
    await ctx.session.send_tool_list_changed()
    return "grown"


def grown() -> str:
    """Added by `grow`."""
    return "I was added"


def retired() -> str:
    """Offered only with MCP_EXTRA=1."""
    return "still here"


if os.environ.get("MCP_EXTRA") == "1":
    server.add_tool(retired)

server._tool_manager.get_tool("broken").parameters = {
    "type": "object", "properties": {"x": {"type": "bogus"}}}


def guarded(app: Any, token: str) -> Any:
    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or [])
        if scope["type"] == "http" and headers.get(b"authorization") != f"Bearer {token}".encode():
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)
    return asgi


def gate(path: str) -> None:
    Path(f"{path}.started").write_text(str(os.getpid()))
    while not Path(path).exists():
        time.sleep(0.05)
    Path(f"{path}.up").write_text(str(os.getpid()))


def fail() -> None:
    for step in range(1, 12):
        print(f"step {step:02d} of the start", file=sys.stderr)
    print("error: cannot reach postgresql://admin:hunter2@db.example/x", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
    if sys.argv[1] == "fail":
        fail()
    elif sys.argv[1].startswith("stdio"):
        if os.environ.get("MCP_GATE"):
            gate(os.environ["MCP_GATE"])
        server.run("stdio")
        if sys.argv[1] == "stdio-stay":  # a server that outlives its client unless ended
            time.sleep(3600)
    else:
        import uvicorn

        port, token = int(sys.argv[2]), sys.argv[3]
        uvicorn.run(guarded(server.streamable_http_app(), token), host="127.0.0.1", port=port,
                    log_level="warning")
