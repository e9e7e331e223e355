"""Memory and time of `fs.read` on huge files, against reading the whole file.

`fs.read` streams: it stops at the end of the slice or at 100,000 characters, then counts
lines for at most 8 MiB more. The comparison column reads the file whole, decodes it and
splits it into lines, which is what `fs.read` did before. Each figure comes from a fresh
subprocess: wall time of the one call, and its peak memory above the process's baseline
(getrusage). Not a test: it prints figures; the goal line says whether `fs.read` stays
under the limits the issue names (50 MB extra, 1 s) for the 1 GiB cases.

    python benchmarks/bench_fs_read.py [--quick] [--text-mib N] [--no-whole]

`--quick` uses 64 MiB files (for the smoke test); `--no-whole` skips the whole-file
column, which needs several times the file's size in memory.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

MEMORY_GOAL_MB = 50.0
TIME_GOAL_S = 1.0

MEASURE = textwrap.dedent('''
    import asyncio, json, resource, sys, time
    from hookline.builtins.host.environment import LocalEnvironment
    from hookline.builtins.host.tools import builtin_tools
    from hookline.kernel.tools import ToolContext

    workspace, mode, path, limit = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    limit = int(limit) if limit != "-" else None
    tools = {tool.name: tool for tool in builtin_tools()}
    context = ToolContext(state={"_runtime_workspace": workspace})
    env = LocalEnvironment(workspace)

    async def streamed():
        arguments = {"path": path} if limit is None else {"path": path, "limit": limit}
        return await tools["fs.read"].invoke(arguments, context)

    async def whole():  # the previous fs.read: the whole file, decoded, split
        text = (await env.read_bytes(path)).decode("utf-8", "replace")
        lines = text.splitlines(keepends=True)
        return "".join(lines if limit is None else lines[:limit])[:100_000]

    async def main():
        await tools["fs.read"].invoke({"path": "warm.txt"}, context)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        await (streamed() if mode == "fs.read" else whole())
        seconds = time.perf_counter() - start
        extra = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(json.dumps({"seconds": seconds, "extra_mb": extra / 1024}))

    asyncio.run(main())
''')


def make_files(root: Path, size: int) -> None:
    (root / "warm.txt").write_text("warm\n")
    with open(root / "sparse.bin", "wb") as handle:
        handle.truncate(size)
    line = b"the quick brown fox jumps over the lazy dog, line after line after line\n"
    block = line * (1024 * 1024 // len(line))
    with open(root / "text.txt", "wb") as handle:
        while handle.tell() + len(block) <= size:
            handle.write(block)


def measure(root: Path, mode: str, path: str, limit: int | None) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(root), mode, path, str(limit or "-")],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{mode} {path} failed:\n{done.stderr}")
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64 MiB files")
    parser.add_argument("--text-mib", type=int, default=None, help="file size in MiB")
    parser.add_argument("--no-whole", action="store_true", help="skip the whole-file column")
    options = parser.parse_args()
    mib = options.text_mib or (64 if options.quick else 1024)
    cases = [("sparse.bin", 1), ("sparse.bin", None), ("text.txt", 2), ("text.txt", None)]
    with tempfile.TemporaryDirectory(prefix="hookline-bench-") as folder:
        root = Path(folder)
        make_files(root, mib * 1024 * 1024)
        print(f"files of {mib} MiB (sparse.bin: sparse, all zero bytes; text.txt: written)")
        print(f"{'file':<11} {'lines':>6} | {'fs.read s':>9} {'fs.read MB':>10} | "
              f"{'whole s':>8} {'whole MB':>9}")
        worst_time = worst_memory = 0.0
        for path, limit in cases:
            streamed = measure(root, "fs.read", path, limit)
            worst_time = max(worst_time, streamed["seconds"])
            worst_memory = max(worst_memory, streamed["extra_mb"])
            if options.no_whole:
                whole = "-".rjust(8) + " " + "-".rjust(9)
            else:
                figures = measure(root, "whole", path, limit)
                whole = f"{figures['seconds']:>8.3f} {figures['extra_mb']:>9.1f}"
            print(f"{path:<11} {limit or 'all':>6} | {streamed['seconds']:>9.3f} "
                  f"{streamed['extra_mb']:>10.1f} | {whole}")
        met = worst_time < TIME_GOAL_S and worst_memory < MEMORY_GOAL_MB
        print(f"goal: fs.read under {MEMORY_GOAL_MB:g} MB extra and {TIME_GOAL_S:g} s: "
              f"{'PASS' if met else 'MISS'} (worst {worst_memory:.1f} MB, {worst_time:.3f} s)")


if __name__ == "__main__":
    main()
