"""Import time of the dispatch core and of the whole kernel, over a bare interpreter.

Each measurement is a fresh ``python -X importtime -c "import ..."``. The cost of an
import is the sum of the self times of every module it loads that the bare interpreter
had not loaded already: the modules ``-X importtime`` reports after ``site``, which is
where the interpreter's own start-up ends. Bytecode is cached as in an installed package
(in a private ``PYTHONPYCACHEPREFIX`` folder, written by one warm-up run per target), so
compiling sources is not measured. Figures are medians over several runs of each target,
run interleaved so that machine noise hits them alike. Not a test: the goal
lines say PASS/MISS without changing the exit status.

- ``hookline.kernel._dispatch``: what a registry and a runtime cost (goal: 15 ms);
- all of ``hookline.kernel``: every module of the kernel package (goal: 30 ms).

    python benchmarks/bench_import.py [--runs N] [--core MODULE]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pkgutil
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence

CORE_GOAL_MS = 15.0
KERNEL_GOAL_MS = 30.0


def kernel_modules() -> list[str]:
    """Every module of ``hookline.kernel``, found on disk (nothing is imported here)."""
    spec = importlib.util.find_spec("hookline.kernel")
    assert spec is not None and spec.submodule_search_locations is not None
    found = ["hookline.kernel"]
    for info in pkgutil.walk_packages(spec.submodule_search_locations, "hookline.kernel."):
        found.append(info.name)
    return sorted(found)


def importtime(modules: Sequence[str], env: Mapping[str, str]) -> dict[str, int]:
    """Self time (microseconds) of each module imported after start-up, in one run."""
    code = "; ".join(f"__import__({name!r})" for name in modules) or "pass"
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code],
                          capture_output=True, text=True, check=True, env=env)
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    names = [line.split("|")[2].rstrip() for line in lines]
    # The interpreter's own start-up ends with the top-level ``site`` import.
    start = max((i for i, name in enumerate(names) if name.strip() == "site"), default=-1)
    costs: dict[str, int] = {}
    for line in lines[start + 1:]:
        _, self_us, _, name = (part.strip() for part in line.replace(":", "|", 1).split("|"))
        if self_us.isdigit():
            costs[name] = costs.get(name, 0) + int(self_us)
    return costs


def measure(targets: dict[str, list[str]], runs: int) -> dict[str, list[dict[str, int]]]:
    samples: dict[str, list[dict[str, int]]] = {label: [] for label in targets}
    with tempfile.TemporaryDirectory() as cache:
        env = {name: value for name, value in os.environ.items()
               if name != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        for modules in targets.values():
            importtime(modules, env)  # warm-up: writes the bytecode the runs then read
        for _ in range(runs):
            for label, modules in targets.items():
                samples[label].append(importtime(modules, env))
    return samples


def median_ms(samples: list[dict[str, int]]) -> float:
    return statistics.median(sum(run.values()) for run in samples) / 1000.0


def heaviest(samples: list[dict[str, int]], count: int) -> list[tuple[str, float]]:
    """The modules with the largest median self time, in milliseconds."""
    names = {name for run in samples for name in run}
    medians = {name: statistics.median(run.get(name, 0) for run in samples) / 1000.0
               for name in names}
    return sorted(medians.items(), key=lambda item: -item[1])[:count]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh interpreters per target")
    parser.add_argument("--core", default="hookline.kernel._dispatch",
                        help="the dispatch core's module (to measure another layout)")
    parser.add_argument("--top", type=int, default=8, help="heaviest modules to list")
    args = parser.parse_args(argv)

    targets = {"dispatch core": [args.core], "hookline.kernel": kernel_modules()}
    print(f"python {platform.python_version()}; median of {args.runs} fresh interpreters per "
          f"target; cost = self times of the modules loaded beyond a bare interpreter")
    samples = measure(targets, args.runs)
    print()
    print(f"{'target':<18} {'modules':>7} {'median ms':>10}")
    for label, runs in samples.items():
        count = statistics.median(len(run) for run in runs)
        print(f"{label:<18} {count:>7.0f} {median_ms(runs):>10.2f}")
    for label, runs in samples.items():
        print()
        print(f"heaviest modules of {label} (median self ms):")
        for name, ms in heaviest(runs, args.top):
            print(f"  {ms:7.2f}  {name.strip()}")
    print()
    for label, goal in (("dispatch core", CORE_GOAL_MS), ("hookline.kernel", KERNEL_GOAL_MS)):
        value = median_ms(samples[label])
        verdict = "PASS" if value <= goal else "MISS"
        print(f"{verdict}  {label} import <= {goal:g} ms: {value:.2f} ms")
    if args.runs < 5:
        print(f"(--runs {args.runs}: too few runs for the verdicts to mean anything)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
