"""The MCP tests' frameworks: the builtin plugin answering through a loopback OpenAI
server, with the test MCP server (mcp_server.py) configured over stdio or HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from openai_server import RecordedRequest, Reply

from hookline.builtins.config import Settings
from hookline.builtins.plugin import BuiltinPlugin
from hookline.kernel import Framework

SERVER = str(Path(__file__).with_name("mcp_server.py"))
SPEC = "openai-compatible:test-model"
KEY = "sk-mcp"


def stdio_server(**table: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [SERVER, "stdio"], **table}


def build(workspace: Path, api_base: str, servers: dict[str, Any], *plugins: object,
          **settings: Any) -> tuple[Framework, BuiltinPlugin]:
    """The builtin plugin with `servers` as its `[mcp_servers]`, then `plugins`."""
    home = workspace.parent / "home"
    framework = Framework(workspace)
    builtin = BuiltinPlugin(framework, settings=Settings(
        home=home, model=SPEC, api_key=KEY, api_base=api_base,
        extra={"mcp_servers": servers}, **settings))
    framework.registry.register(builtin, name="builtin")
    for index, plugin in enumerate(plugins):
        framework.registry.register(plugin, name=f"{type(plugin).__name__.lower()}-{index}")
    return framework, builtin


async def turn(framework: Framework, content: str) -> Any:
    return await framework.process_inbound({"content": content, "session_id": "mcp:chat"},
                                           stream_output=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def http_server(token: str) -> Iterator[str]:
    """The test MCP server over streamable HTTP on 127.0.0.1; yields its URL."""
    port = free_port()
    process = subprocess.Popen([sys.executable, SERVER, "http", str(port), token])
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the test MCP HTTP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def server_pids() -> list[int]:
    """Live processes below this one running the test MCP server."""
    from hookline.builtins.host.proctable import descendants, process_table

    found = []
    for info in descendants(process_table(), os.getpid()):
        try:
            command = Path(f"/proc/{info.pid}/cmdline").read_bytes()
        except OSError:
            continue
        if not info.zombie and b"mcp_server.py" in command:
            found.append(info.pid)
    return found


def call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> Reply:
    return Reply(tool_calls=[{"id": call_id, "name": name, "arguments": arguments}])


def tool_output(request: RecordedRequest, call_id: str = "call_1") -> str:
    (message,) = [m for m in request.messages
                  if m["role"] == "tool" and m.get("tool_call_id") == call_id]
    return str(message["content"])
