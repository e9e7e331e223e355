"""Smoke tests: the benchmarks still run end to end.

Timings are never asserted: they depend on the machine and would make the suite flaky.
What can rot silently is the script itself (API renames, a broken table), so run it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def run_benchmark(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=BENCHMARKS.parent,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_bench_dispatch_quick_runs() -> None:
    done = run_benchmark("bench_dispatch.py", "--quick")
    header = next(
        (line for line in done.stdout.splitlines() if line.startswith("impls")), ""
    )
    for column in ("kind", "hookline us", "plain us", "pluggy us", "ratio vs plain",
                   "ratio vs pluggy"):
        assert column in header, done.stdout
    for kind in ("call_first", "call_many", "call_first_sync", "call_many_sync"):
        assert f" {kind} " in done.stdout
    assert done.stdout.count("PASS") + done.stdout.count("MISS") == 3, done.stdout


def test_bench_session_length_tiny_runs() -> None:
    done = run_benchmark("bench_session_length.py", "--turns", "40", "--repeats", "1")
    lines = done.stdout.splitlines()
    assert lines[0].startswith("context window: ") and lines[1].split() == ["turn", "median", "ms"]
    assert [line.split()[0] for line in lines[2:4]] == ["10", "40"]
    assert all(float(line.split()[1]) > 0 for line in lines[2:4])
    assert lines[4].startswith("goal: turn 40 <= 1.5x turn 10: ")
    assert ("PASS" in lines[4]) != ("MISS" in lines[4])
