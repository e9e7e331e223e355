"""Turn time against session length: the offline model, the real SQLite store.

Two sessions share one store and one ``running()`` scope (the builtin plugin, the
offline model, a SQLite tape store in a temporary folder, ``synchronous=FULL`` as by
default). The long session is first played up to shortly before turn N; then turns of
a new session (turns 1 to 20) and of the long one (up to turn N + 10) alternate, so both
are measured under the same machine load. Printed side by side: the median turn time
around turn 10 and around turn N. A turn's cost should depend on its context, which the
builtin context window bounds, not on how long the session already is. Not a test: it
prints figures; the goal line says whether late turns stay within the goal.

    python benchmarks/bench_session_length.py [--turns 1500] [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from hookline.builtins.config import Settings
from hookline.builtins.config.limits import CONTEXT_WINDOW
from hookline.builtins.plugin import BuiltinPlugin
from hookline.kernel import Framework

GOAL = 1.5  # a turn late in a session may cost at most 1.5x an early turn
MEASURED = 20  # turns measured in each session; the medians take turns 5-14 of them


async def turn(framework: Framework, session: str, n: int) -> float:
    """Seconds for turn `n` of `session`."""
    started = time.perf_counter()
    result = await framework.process_inbound(
        {"content": f"turn {n}: how long is this session?", "session_id": session})
    elapsed = time.perf_counter() - started
    if "[offline model]" not in result.model_output:
        raise SystemExit(f"{session} turn {n}: unexpected reply {result.model_output!r}")
    return elapsed


async def measure(home: Path, turns: int) -> tuple[float, float]:
    """Median milliseconds of turns 5-14 of a new session and of turns N-5..N+4."""
    workspace = home / "workspace"
    workspace.mkdir()
    framework = Framework(workspace)
    framework.registry.register(BuiltinPlugin(framework, settings=Settings(home=home)),
                                name="builtin")
    first_late = turns - MEASURED // 2
    early: list[float] = []
    late: list[float] = []
    async with framework.running():
        for n in range(1, first_late):
            await turn(framework, "long", n)
        for k in range(MEASURED):
            early.append(await turn(framework, "new", k + 1))
            late.append(await turn(framework, "long", first_late + k))
    middle = slice(4, 14)  # turns 5-14 of the new session, N-5..N+4 of the long one
    return statistics.median(early[middle]) * 1000, statistics.median(late[middle]) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1500, help="session length (default 1500)")
    parser.add_argument("--repeats", type=int, default=2,
                        help="runs; the best median of each session counts (default 2)")
    args = parser.parse_args()
    if args.turns < 2 * MEASURED or args.repeats < 1:
        parser.error(f"needs --turns >= {2 * MEASURED} and --repeats >= 1")
    early = late = float("inf")
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as folder:
            new, long = anyio.run(measure, Path(folder), args.turns)
        early, late = min(early, new), min(late, long)
    print(f"context window: {CONTEXT_WINDOW} entries")
    print(f"{'turn':>6} {'median ms':>10}")
    print(f"{10:>6} {early:>10.2f}")
    print(f"{args.turns:>6} {late:>10.2f}")
    ratio = late / early
    verdict = "PASS" if ratio <= GOAL else "MISS"
    print(f"goal: turn {args.turns} <= {GOAL}x turn 10: {verdict} ({ratio:.2f}x)")


if __name__ == "__main__":
    main()
