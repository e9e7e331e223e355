"""One model step's context read against the length of the run: a real SQLite store.

Two sessions share one SQLite tape store in a temporary folder, each with the same short
history and the builtin context window. Each opens a run (`Tape.fork`) and records tool
steps (a `tool_call` with its `tool_result`) until the short run holds 20 entries and
the long one 500. Then, alternately, each run records one more step and reads its
context (`Tape.read_model_messages`, what the agent loop does before every model call); only
the read is timed. Printed side by side: the median read at both run lengths and their
ratio. A step should cost what it adds, not what the run already holds. Not a test: it
prints figures; the goal line says whether the long run stays within the goal.

    python benchmarks/bench_context.py [--short 20] [--long 500] [--steps 10] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from hookline.builtins.config.limits import CONTEXT_WINDOW
from hookline.builtins.store import SQLiteTapeStore
from hookline.builtins.tape.tape import Tape
from hookline.kernel.tape import TapeContext

GOAL = 1.3  # a read late in a long run may cost at most 1.3x one early in a short run
HISTORY_TURNS = 10  # turns of each session before the runs: a user and an assistant message
OUTPUT = "line of tool output\n" * 20  # about 400 characters per tool result


async def record_step(tape: Tape, n: int) -> None:
    """One tool step: the model's call and the tool's result, two entries."""
    call_id = f"call_{n}"
    await tape.append("tool_call", {"calls": [
        {"id": call_id, "name": "bash", "arguments": f'{{"cmd": "echo {n}"}}'}]})
    await tape.append("tool_result", {"results": [
        {"call_id": call_id, "name": "bash", "output": OUTPUT, "is_error": False}]})


async def history(tape: Tape) -> None:
    await tape.ensure_bootstrap_anchor()
    for n in range(HISTORY_TURNS):
        await tape.append("message", {"role": "user", "content": f"question {n}"})
        await tape.append("message", {"role": "assistant", "content": f"answer {n}"})


async def timed_read(tape: Tape) -> float:
    started = time.perf_counter()
    messages = await tape.read_model_messages()  # as the agent loop reads it
    elapsed = time.perf_counter() - started
    if not messages:
        raise SystemExit(f"{tape.name}: the context read returned no messages")
    return elapsed


async def measure(folder: Path, short: int, long: int, steps: int) -> tuple[float, float]:
    """Median milliseconds of a context read in the short run and in the long one."""
    with SQLiteTapeStore(folder / "tapes.db") as store:
        base = Tape(store, "bench", TapeContext(window=CONTEXT_WINDOW))
        tapes = [base.session_tape(session, folder) for session in ("short", "long")]
        for tape in tapes:
            await history(tape)
        async with tapes[0].fork() as short_run, tapes[1].fork() as long_run:
            for run, size in ((short_run, short), (long_run, long)):
                for n in range(size // 2):
                    await record_step(run, n)
            short_times: list[float] = []
            long_times: list[float] = []
            for k in range(steps):
                for run, times in ((short_run, short_times), (long_run, long_times)):
                    await record_step(run, long + k)
                    times.append(await timed_read(run))
    return statistics.median(short_times) * 1000, statistics.median(long_times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", type=int, default=20, help="entries of the short run")
    parser.add_argument("--long", type=int, default=500, help="entries of the long run")
    parser.add_argument("--steps", type=int, default=10,
                        help="steps measured in each run (default 10)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="runs; the best median of each run length counts (default 5)")
    args = parser.parse_args()
    if not 2 <= args.short < args.long or args.steps < 1 or args.repeats < 1:
        parser.error("needs 2 <= --short < --long, --steps >= 1 and --repeats >= 1")
    best_short = best_long = float("inf")
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as folder:
            short_ms, long_ms = anyio.run(measure, Path(folder), args.short, args.long,
                                          args.steps)
        best_short, best_long = min(best_short, short_ms), min(best_long, long_ms)
    print(f"context window: {CONTEXT_WINDOW} entries; history: {2 * HISTORY_TURNS + 1} entries")
    print(f"{'run entries':>12} {'median ms':>10}")
    print(f"{args.short:>12} {best_short:>10.3f}")
    print(f"{args.long:>12} {best_long:>10.3f}")
    ratio = best_long / best_short
    verdict = "PASS" if ratio <= GOAL else "MISS"
    print(f"goal: a read at {args.long} entries <= {GOAL}x one at {args.short}: "
          f"{verdict} ({ratio:.2f}x)")


if __name__ == "__main__":
    main()
