"""Memory of a long-running host over many distinct sessions: does it come back?

Each case runs in a fresh child process: a Framework with the builtin plugin (offline
model, SQLite tape store in a temporary hookline home) inside one ``running()`` scope, as
a gateway keeps it, and turns through ``Framework.process_inbound``, one new session id
per turn. It prints the resident set size (VmRSS) before the turns, at its peak (VmHWM)
and after them, then after the idle expiry has passed, with the number of cached
environments at each point. Cases, side by side:

- ``bounded``: the default environment cache (256 environments, 15 minutes idle);
- ``unbounded``: the same turns with the bounds lifted, as the cache behaved before;
- ``refused``: turns whose session id is 500 KB long, refused by the session id cap.

    python benchmarks/bench_session_memory.py [--turns 5000] [--quick]

Not a test: it prints figures, it does not judge them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CASES = ("bounded", "unbounded", "refused")


def rss_mb(field: str = "VmRSS") -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_case(case: str, turns: int) -> dict[str, float]:
    """One case in this process (the child): returns its figures."""
    import asyncio
    import contextlib
    import gc
    import logging
    import os
    import tempfile

    os.environ["HOOKLINE_HOME"] = tempfile.mkdtemp(prefix="hookline-bench-")
    os.environ.pop("HOOKLINE_MODEL", None)
    logging.disable(logging.WARNING)  # refused turns log a warning each

    from hookline.kernel import Framework
    from hookline.kernel.errors import HooklineError
    from hookline.kernel.framework import DEFAULT_ENVIRONMENT_IDLE_SECONDS

    async def main() -> dict[str, float]:
        framework = Framework(tempfile.mkdtemp(prefix="hookline-bench-ws-"))
        framework.load_hooks()
        if case == "unbounded":
            framework.environments.max_size = 10**9
            framework.environments.idle_seconds = 10.0**12
        async with framework.running():
            for number in range(20):  # warm up: imports, store, caches
                await framework.process_inbound({"content": "hi", "session_id": f"w{number}"})
            gc.collect()
            figures = {"before": rss_mb(), "cached_before": len(framework.environments)}
            started = time.perf_counter()
            for number in range(turns):
                if case == "refused":
                    session = f"{number:08d}" + "x" * 500_000
                    with contextlib.suppress(HooklineError):  # refused: over the cap
                        await framework.process_inbound({"content": "hi", "session_id": session})
                else:
                    await framework.process_inbound({"content": "hi",
                                                     "session_id": f"session-{number:08d}"})
            figures["seconds"] = time.perf_counter() - started
            gc.collect()
            figures["peak"] = rss_mb("VmHWM")
            figures["after"] = rss_mb()
            figures["cached_after"] = len(framework.environments)
            cache = framework.environments
            clock = cache.clock
            # The default idle time passes (the unbounded case keeps everything).
            cache.clock = lambda: clock() + DEFAULT_ENVIRONMENT_IDLE_SECONDS + 1
            await framework.close_idle_environments()
            gc.collect()
            figures["expired"] = rss_mb()
            figures["cached_expired"] = len(framework.environments)
        return figures

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--quick", action="store_true", help="200 turns per case")
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:  # the child
        print(json.dumps(run_case(args.case, args.turns)))
        return
    turns = 200 if args.quick else args.turns
    print(f"{turns} turns, one new session each, in one running() scope (RSS in MB)")
    print(f"{'case':<10} {'before':>8} {'peak':>8} {'after':>8} {'expired':>8} "
          f"{'cached':>16} {'turns/s':>8}")
    for case in CASES:
        count = min(turns, 500) if case == "refused" else turns
        child = subprocess.run([sys.executable, __file__, "--case", case, "--turns", str(count)],
                               capture_output=True, text=True, check=True)
        f = json.loads(child.stdout.strip().splitlines()[-1])
        cached = f"{f['cached_before']:.0f}/{f['cached_after']:.0f}/{f['cached_expired']:.0f}"
        print(f"{case:<10} {f['before']:>8.1f} {f['peak']:>8.1f} {f['after']:>8.1f} "
              f"{f['expired']:>8.1f} {cached:>16} {count / f['seconds']:>8.0f}")
    print("cached: environments in the cache before / after the turns / after the idle "
          "expiry; refused: 500 KB session ids, at most 500 turns")


if __name__ == "__main__":
    main()
