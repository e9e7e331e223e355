"""Turn time against session length: the offline model, the real SQLite store, one session.

Runs N turns of one session through ``process_inbound`` (the builtin plugin, the offline
model, a SQLite tape store in a temporary folder, ``synchronous=FULL`` as by default)
and prints the median turn time around turn 10 and around turn N side by side. A turn's
cost should depend on its context, not on how long the session already is. Not a test:
it prints figures; the goal line says whether the late turns stay within the goal.

    python benchmarks/bench_session_length.py [--turns 1500] [--window 10]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from hookline.builtins.plugin import BuiltinPlugin
from hookline.builtins.settings import Settings
from hookline.kernel.framework import Framework

GOAL = 1.5  # the turn at the end of the session may cost at most 1.5x an early turn


async def run_session(home: Path, turns: int) -> list[float]:
    """Seconds per turn, for turns 1..turns of one session."""
    workspace = home / "workspace"
    workspace.mkdir()
    framework = Framework(workspace)
    framework.registry.register(BuiltinPlugin(framework, settings=Settings(home=home)),
                                name="builtin")
    times: list[float] = []
    async with framework.running():
        for n in range(1, turns + 1):
            started = time.perf_counter()
            result = await framework.process_inbound(
                {"content": f"turn {n}: how long is this session?", "session_id": "bench"})
            times.append(time.perf_counter() - started)
            if "[offline model]" not in result.model_output:
                raise SystemExit(f"turn {n}: unexpected reply {result.model_output!r}")
    return times


def median_around(times: list[float], turn: int, window: int) -> float:
    """Median of the `window` turns ending at `turn` (1-based), in milliseconds."""
    start = max(0, turn - window)
    return statistics.median(times[start:turn]) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1500, help="session length (default 1500)")
    parser.add_argument("--window", type=int, default=10,
                        help="turns per median (default 10)")
    args = parser.parse_args()
    if args.turns < 20:
        parser.error("--turns must be at least 20")
    with tempfile.TemporaryDirectory() as folder:
        times = anyio.run(run_session, Path(folder), args.turns)
    early = median_around(times, 10, args.window)
    late = median_around(times, args.turns, args.window)
    print(f"{'turn':>6} {'median ms':>10}")
    print(f"{10:>6} {early:>10.2f}")
    print(f"{args.turns:>6} {late:>10.2f}")
    ratio = late / early
    verdict = "PASS" if ratio <= GOAL else "MISS"
    print(f"goal: turn {args.turns} <= {GOAL}x turn 10: {verdict} ({ratio:.2f}x)")


if __name__ == "__main__":
    main()
