"""The cost of the shell sandbox: one `shell` tool call with and without it, and start-ups.

The runs call the builtin `shell` tool the way a turn does (through a `LocalEnvironment`
in the tool context), side by side in one process, interleaved so that machine noise hits
them alike: `off` (no sandbox, the environment still filtered: anyio's own processes)
against the default `workspace-write` (each command started by the environment's sandbox
helper: namespaces, Landlock, seccomp), and the same without namespaces (what a system
that forbids them gets). Then the one-time costs: a helper's start (the first command of a
session pays it), and a stdio MCP server built with the SDK, started until it answers
`initialize`, with and without the sandbox. Figures are medians. Not a test: the goal line
says PASS/MISS without changing the exit status.

Goal: a sandboxed `shell` call costs at most 1.3x an unsandboxed one.

    python benchmarks/bench_sandbox.py [--calls N] [--starts N] [--command 'true']
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from hookline.builtins.host.environment import LocalEnvironment
from hookline.builtins.host.sandbox import SandboxPolicy
from hookline.builtins.host.tools import builtin_tools
from hookline.kernel.tools import ToolContext

GOAL_RATIO = 1.3
MODES = {"off": SandboxPolicy(mode="off"), "workspace-write": SandboxPolicy(),
         "without namespaces": SandboxPolicy(without=("namespaces",))}
MCP_SERVER = """\
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool()
def ping() -> str:
    return "pong"


server.run("stdio")
"""
"""A real stdio server, built with the SDK (the `mcp` extra)."""
INITIALIZE = (b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {'
              b'"protocolVersion": "2025-06-18", "capabilities": {}, '
              b'"clientInfo": {"name": "bench", "version": "1"}}}\n')


def policy(mode: str, home: Path) -> SandboxPolicy:
    base = MODES[mode]
    return SandboxPolicy(mode=base.mode, hidden=(str(home),), without=base.without)


async def shell_calls(folder: Path, calls: int, command: str) -> dict[str, float]:
    workspace, home = folder / "workspace", folder / "home"
    [shell] = [tool for tool in builtin_tools() if tool.name == "shell"]
    environments = {mode: LocalEnvironment(workspace, sandbox=policy(mode, home))
                    for mode in MODES}
    contexts = {mode: ToolContext(tape=None, run_id="bench", state={
        "_runtime_environment": env}) for mode, env in environments.items()}
    samples: dict[str, list[float]] = {mode: [] for mode in MODES}
    for context in contexts.values():  # warm up: each helper starts once
        await shell.handler(command=command, context=context)
    for _ in range(calls):
        for mode, context in contexts.items():
            start = time.perf_counter()
            await shell.handler(command=command, context=context)
            samples[mode].append(time.perf_counter() - start)
    for env in environments.values():
        await env.close()
    return {mode: statistics.median(values) * 1000 for mode, values in samples.items()}


async def first_calls(folder: Path, starts: int) -> dict[str, float]:
    """A fresh environment's first command: the helper's start-up is in it."""
    samples: dict[str, list[float]] = {mode: [] for mode in ("off", "workspace-write")}
    for _ in range(starts):
        for mode in samples:
            env = LocalEnvironment(folder / "workspace", sandbox=policy(mode, folder / "home"))
            start = time.perf_counter()
            await env.run("true")
            samples[mode].append(time.perf_counter() - start)
            await env.close()
    return {mode: statistics.median(values) * 1000 for mode, values in samples.items()}


async def mcp_starts(folder: Path, starts: int) -> dict[str, float]:
    """An SDK stdio server started through the environment until it answers `initialize`."""
    server = folder / "workspace" / "server.py"
    server.write_text(MCP_SERVER)
    samples: dict[str, list[float]] = {mode: [] for mode in ("off", "workspace-write")}
    for _ in range(starts):
        for mode in samples:
            env = LocalEnvironment(folder / "workspace", sandbox=policy(mode, folder / "home"))
            start = time.perf_counter()
            process = await env.spawn([sys.executable, str(server)])
            await process.write_stdin(INITIALIZE)
            answer = await process.stdout.read(65536)
            assert b'"id":1' in answer.replace(b" ", b""), answer
            samples[mode].append(time.perf_counter() - start)
            await env.close()
    return {mode: statistics.median(values) * 1000 for mode, values in samples.items()}


async def measure(calls: int, starts: int, command: str) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(dir="/var/tmp") as name:
        folder = Path(name)
        (folder / "workspace").mkdir()
        (folder / "home").mkdir()
        return {"shell": await shell_calls(folder, calls, command),
                "first": await first_calls(folder, starts),
                "mcp": await mcp_starts(folder, starts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--command", default="true")
    args = parser.parse_args()
    figures = anyio.run(measure, args.calls, args.starts, args.command)
    shell, first, mcp = figures["shell"], figures["first"], figures["mcp"]
    print(f"shell {args.command!r}, median of {args.calls} calls each")
    for mode, value in shell.items():
        print(f"  sandbox {mode:26} {value:8.3f} ms")
    print(f"first command of a session (helper start-up included), median of {args.starts}")
    for mode, value in first.items():
        print(f"  sandbox {mode:26} {value:8.3f} ms")
    print(f"stdio MCP server answering initialize, median of {args.starts}")
    for mode, value in mcp.items():
        print(f"  sandbox {mode:26} {value:8.3f} ms")
    print(f"MCP start-up sandboxed / off: {mcp['workspace-write'] / mcp['off']:.2f}x")
    ratio = shell["workspace-write"] / shell["off"]
    verdict = "PASS" if ratio <= GOAL_RATIO else "MISS"
    print(f"ratio {ratio:.2f}x (goal <= {GOAL_RATIO}x): {verdict}")


if __name__ == "__main__":
    main()
