"""The cost of the shell sandbox: one `shell` tool call with and without it.

The runs call the builtin `shell` tool the way a turn does (through a `LocalEnvironment`
in the tool context), side by side in one process, interleaved so that machine noise hits
them alike: `off` (no Landlock, the environment still filtered: anyio's own processes)
against the default `workspace-write` (processes started by the sandbox's confined thread,
their pipes and exit awaited by hookline). A third row starts processes the sandboxed way
but with the Landlock call left out, which separates the cost of Landlock itself from
that of the process layer. Figures are medians. Not a test: the goal line says PASS/MISS
without changing the exit status.

Goal: a sandboxed `shell` call costs at most 1.2x an unsandboxed one.

    python benchmarks/bench_sandbox.py [--calls N] [--command 'true']
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from hookline.builtins.host import landlock
from hookline.builtins.host.environment import LocalEnvironment
from hookline.builtins.host.sandbox import SandboxPolicy
from hookline.builtins.host.tools import builtin_tools
from hookline.kernel.tools import ToolContext

GOAL_RATIO = 1.2
UNCONFINED_THREAD = "the same, Landlock left out"


async def measure(calls: int, command: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        workspace, home = Path(folder, "workspace"), Path(folder, "home")
        workspace.mkdir()
        home.mkdir()
        [shell] = [tool for tool in builtin_tools() if tool.name == "shell"]
        policy = {"off": "off", "workspace-write": "workspace-write",
                  UNCONFINED_THREAD: "workspace-write"}
        modes = {mode: LocalEnvironment(workspace, sandbox=SandboxPolicy(
            mode=policy[mode], hidden=(str(home),))) for mode in policy}
        contexts = {mode: ToolContext(tape=None, run_id="bench", state={
            "_runtime_environment": env}) for mode, env in modes.items()}
        samples: dict[str, list[float]] = {mode: [] for mode in modes}
        for mode in modes:  # warm up: the ruleset and the private folder are made once
            confine = landlock.Ruleset.confine
            if mode == UNCONFINED_THREAD:  # its spawner thread skips the Landlock call
                landlock.Ruleset.confine = lambda self: None  # type: ignore[method-assign]
            try:
                await shell.handler(command=command, context=contexts[mode])
            finally:
                landlock.Ruleset.confine = confine  # type: ignore[method-assign]
        for _ in range(calls):
            for mode, context in contexts.items():
                start = time.perf_counter()
                await shell.handler(command=command, context=context)
                samples[mode].append(time.perf_counter() - start)
        for env in modes.values():
            await env.close()
    return {mode: statistics.median(values) * 1000 for mode, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--command", default="true")
    args = parser.parse_args()
    figures = anyio.run(measure, args.calls, args.command)
    off, confined = figures["off"], figures["workspace-write"]
    ratio = confined / off
    print(f"shell {args.command!r}, median of {args.calls} calls each")
    print(f"  sandbox off                  {off:8.3f} ms")
    print(f"  sandbox workspace-write      {confined:8.3f} ms")
    print(f"  {UNCONFINED_THREAD:28} {figures[UNCONFINED_THREAD]:8.3f} ms")
    print(f"Landlock itself: {confined / figures[UNCONFINED_THREAD]:.2f}x")
    verdict = "PASS" if ratio <= GOAL_RATIO else "MISS"
    print(f"ratio {ratio:.2f}x (goal <= {GOAL_RATIO}x): {verdict}")


if __name__ == "__main__":
    main()
