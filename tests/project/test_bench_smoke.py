"""Smoke tests: the benchmarks still run end to end.

Timings are never asserted: they depend on the machine and would make the suite flaky.
What can rot silently is the script itself (API renames, a broken table), so run it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run_benchmark(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *args],
        capture_output=True,
        text=True,
        timeout=300,
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


def test_bench_otel_quick_runs() -> None:
    done = run_benchmark("bench_otel.py", "--quick")
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["turn", "otel", "off", "us", "otel", "on", "us", "ratio"]
    assert lines[1].startswith("offline model + fs_write") and len(lines[1].split()) == 7
    assert lines[2].startswith("kernel only, 5 plugins")
    assert lines[-1].startswith("goal: offline-model turn with otel <= 1.5x without: ")


def test_bench_fs_read_tiny_runs() -> None:
    done = run_benchmark("bench_fs_read.py", "--text-mib", "4")
    lines = done.stdout.splitlines()
    assert any(line.startswith("file ") and "fs.read MB" in line and "whole MB" in line
               for line in lines), done.stdout
    assert sum(line.startswith(("sparse.bin", "text.txt")) for line in lines) == 4
    assert lines[-1].startswith("goal: fs.read under 50 MB extra and 1 s: ")


def test_bench_session_memory_quick_runs() -> None:
    done = run_benchmark("bench_session_memory.py", "--quick")
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[2:5]}
    assert list(rows) == ["bounded", "unbounded", "refused"], done.stdout
    # before, peak, after, expired are megabytes; cached is before/after/expired.
    assert [row[5].split("/")[2] for row in rows.values()] == ["0", "220", "0"], done.stdout


def test_bench_session_length_tiny_runs() -> None:
    done = run_benchmark("bench_session_length.py", "--turns", "40", "--repeats", "1")
    lines = done.stdout.splitlines()
    assert lines[0].startswith("context window: ") and lines[1].split() == ["turn", "median", "ms"]
    assert [line.split()[0] for line in lines[2:4]] == ["10", "40"]
    assert all(float(line.split()[1]) > 0 for line in lines[2:4])
    assert lines[4].startswith("goal: turn 40 <= 1.5x turn 10: ")
    assert ("PASS" in lines[4]) != ("MISS" in lines[4])


def test_bench_import_tiny_runs() -> None:
    done = run_benchmark("bench_import.py", "--runs", "1")
    rows = {line.rsplit(None, 2)[0]: line.split()[-2:] for line in done.stdout.splitlines()
            if line.startswith(("dispatch core ", "hookline.kernel "))}
    assert list(rows) == ["dispatch core", "hookline.kernel"], done.stdout
    core_modules, kernel_modules = (int(rows[name][0]) for name in rows)
    assert 0 < core_modules < kernel_modules, done.stdout
    assert "heaviest modules of dispatch core" in done.stdout
    assert "  hookline.kernel._dispatch" in done.stdout
    verdicts = [line for line in done.stdout.splitlines() if line.startswith(("PASS", "MISS"))]
    assert [line.split()[1] for line in verdicts] == ["dispatch", "hookline.kernel"], verdicts


@pytest.mark.slow
def test_bench_cli_tiny_runs() -> None:
    done = run_benchmark("bench_cli.py", "--runs", "1", "--no-bub")
    lines = done.stdout.splitlines()
    assert lines[2].split() == ["command", "median", "ms", "vs", "python", "vs", "bub", "--help"]
    rows = {line[:20].strip(): line[20:].split() for line in lines[3:7]}
    assert list(rows) == ["python -c pass", "hookline --help", "hookline --version",
                          "hookline run hello"], done.stdout
    assert all(float(row[0]) > 0 and row[1].endswith("x") and row[2] == "-"
               for row in rows.values()), done.stdout
    assert "no goal verdicts" in done.stdout, done.stdout
    # The MCP SDK is installed with the test extras: the side-by-side MCP rows and verdict.
    assert [line[:20].strip() for line in lines[7:9]] == ["run hello (config)",
                                                         "run hello (MCP)"], done.stdout
    assert any(line[6:].startswith("run hello (MCP) <= 1.1x run hello (config): ")
               for line in lines), done.stdout


@pytest.mark.slow
def test_bench_replicas_tiny_runs(postgres_server: str) -> None:
    from postgres_support import unavailable

    if not postgres_server:
        unavailable("no PostgreSQL server for bench_replicas.py")
    done = run_benchmark("bench_replicas.py", "--seconds", "0.5", "--warmup", "1",
                         "--clients", "4", "--sessions", "2", "--postgres-url", postgres_server)
    lines = done.stdout.splitlines()
    header = next((n for n, line in enumerate(lines) if line.startswith("set-up")), None)
    assert header is not None, done.stdout
    names = [line[:24].strip() for line in lines[header + 1:header + 5]]
    assert names == ["floor (bare hypercorn)", "sqlite, 1 gateway", "postgres, 1 gateway",
                     "postgres, 2 replicas"], done.stdout
    rows = [line.split() for line in lines[header + 1:header + 5]]
    assert all(row[-2] == "0" for row in rows), done.stdout  # errors
    # On a loaded machine a set-up may answer no turn within half a second; each that did
    # has its CPU a turn, and the run as a whole answered some.
    answered = [row for row in rows[1:] if float(row[-8]) > 0]  # turns/s
    assert answered and all(float(row[-1]) > 0 for row in answered), done.stdout
    whole, streamed = (lines[header + n].split() for n in (5, 6))
    assert whole[:4] == ["sqlite,", "20", "deltas,", "whole"] and whole[-2] == "0", done.stdout
    assert streamed[:4] == ["sqlite,", "20", "deltas,", "SSE"] and streamed[-2] == "0", \
        done.stdout
    assert "20.0 text deltas a reply" in done.stdout, done.stdout


@pytest.mark.slow
def test_bench_sandbox_quick_runs() -> None:
    done = run_benchmark("bench_sandbox.py", "--calls", "3", "--starts", "2")
    for label in ("sandbox off", "sandbox workspace-write", "sandbox without namespaces",
                  "first command of a session", "MCP start-up sandboxed / off:"):
        assert label in done.stdout, done.stdout
    assert done.stdout.count("PASS") + done.stdout.count("MISS") == 1, done.stdout


def test_bench_context_tiny_runs() -> None:
    done = run_benchmark("bench_context.py", "--long", "60", "--steps", "3", "--repeats", "1")
    lines = done.stdout.splitlines()
    assert lines[0].startswith("context window: ") and lines[1].split() == [
        "run", "entries", "median", "ms"], done.stdout
    assert [line.split()[0] for line in lines[2:4]] == ["20", "60"], done.stdout
    assert all(float(line.split()[1]) > 0 for line in lines[2:4])
    assert lines[4].startswith("goal: a read at 60 entries <= 1.3x one at 20: ")
    assert ("PASS" in lines[4]) != ("MISS" in lines[4])


def test_bench_health_tiny_runs() -> None:
    done = run_benchmark("bench_health.py", "--turns", "3", "--pollers", "2")
    assert "(0 not 200)" in done.stdout, done.stdout
    assert done.stdout.count("PASS") + done.stdout.count("MISS") == 1, done.stdout


def test_bench_bub_turn_runs_or_says_where_bub_is_needed() -> None:
    import importlib.util

    done = subprocess.run([sys.executable, str(BENCHMARKS / "bench_bub_turn.py"), "--quick"],
                          capture_output=True, text=True, timeout=300, cwd=BENCHMARKS.parent,
                          check=False)
    if importlib.util.find_spec("bub") is None:  # CI runs it again where Bub is installed
        assert done.returncode == 1
        assert "Bub is not installed here" in done.stderr and "run_on_bub.py" in done.stderr
        return
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split() == ["plugins", "hookline", "us", "Bub", "us",
                                                   "ratio"]
    assert done.stdout.splitlines()[-1].startswith("goal: a hookline turn <= 0.25x")
