"""Cost of OpenTelemetry on a turn: `otel` off against on, same process, interleaved.

Two frameworks with the builtin plugin, the offline model and their own SQLite store in a
temporary folder: one plain, one with telemetry installed (a span per hook dispatch, the
model and tool spans, metrics), its spans going through the SDK's batch processor to an
exporter that drops them (the export itself is a collector's cost, not the turn's). Each
turn calls one real tool (`fs_write`), so a turn is two model calls and a tool call.
Also the kernel alone (bench_turn's 5 trivial plugins, no agent, no store): there a span
costs more than the dispatch it wraps, which is why telemetry swaps plans rather than
checking a flag. Best of several repeats. Not a test: it prints figures and a goal line.

    python benchmarks/bench_otel.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from hookline.builtins.config import Settings
from hookline.builtins.plugin import BuiltinPlugin
from hookline.builtins.telemetry.setup import Telemetry
from hookline.kernel.framework.core import Framework

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_turn import build as build_trivial  # the kernel-only turn
from bench_turn import per_turn

GOAL = 1.5  # an offline-model turn with otel on: at most 1.5x the turn without it
TOOL = "/tool fs_write " + json.dumps({"path": "bench.txt", "content": "x"})


class Dropping(SpanExporter):
    """Accepts every batch and keeps nothing."""

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def telemetry() -> Telemetry:
    return Telemetry(span_processors=[BatchSpanProcessor(Dropping())])


def builtin_framework(root: Path, name: str) -> Framework:
    home, workspace = root / f"{name}-home", root / f"{name}-ws"
    workspace.mkdir()
    framework = Framework(workspace)
    framework.registry.register(BuiltinPlugin(framework, settings=Settings(home=home)),
                                name="builtin")
    return framework


async def compare(plain: Framework, traced: Framework, message: str, turns: int,
                  repeats: int) -> tuple[float, float]:
    """Best microseconds per turn of each framework, measured alternately."""
    handle = telemetry()
    handle.install(traced)
    try:
        async with plain.running(), traced.running():
            def turn_of(framework: Framework) -> Callable[[], Awaitable[Any]]:
                return lambda: framework.process_inbound(
                    {"content": message, "channel": "bench", "session_id": "bench"})

            await turn_of(plain)()
            await turn_of(traced)()
            best_off = best_on = float("inf")
            for _ in range(repeats):
                best_off = min(best_off, await per_turn(turn_of(plain), turns))
                best_on = min(best_on, await per_turn(turn_of(traced), turns))
    finally:
        handle.uninstall()
        handle.shutdown()
    return best_off, best_on


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few iterations (smoke test)")
    args = parser.parse_args()
    turns, repeats = (5, 1) if args.quick else (60, 5)
    kernel_turns = 50 if args.quick else 2000
    print(f"{'turn':<28} {'otel off us':>12} {'otel on us':>11} {'ratio':>6}")
    with tempfile.TemporaryDirectory(prefix="bench-otel-") as folder:
        root = Path(folder)
        off, on = anyio.run(compare, builtin_framework(root, "plain"),
                            builtin_framework(root, "traced"), TOOL, turns, repeats)
    ratio = on / off
    print(f"{'offline model + fs_write':<28} {off:>12.1f} {on:>11.1f} {ratio:>6.2f}")
    (plain, _), (traced, _) = build_trivial(5), build_trivial(5)
    k_off, k_on = anyio.run(compare, plain, traced, "hi", kernel_turns, repeats)
    print(f"{'kernel only, 5 plugins':<28} {k_off:>12.1f} {k_on:>11.1f} {k_on / k_off:>6.2f}")
    verdict = "PASS" if ratio <= GOAL else "MISS"
    print(f"goal: offline-model turn with otel <= {GOAL}x without: {verdict} ({ratio:.2f}x)")


if __name__ == "__main__":
    main()
