"""One ``process_inbound`` turn through hookline's framework against Bub 0.6's, in one
process, with the same trivial plugins on every turn hook (as in ``bench_turn.py``).

Needs Bub installed beside hookline (Bub 0.6 needs Python 3.12; ``python -m spec.run_on_bub
--install`` and ``python -m spec.run_bub_plugins --install`` make such an environment). Both
frameworks run interleaved in one event loop, best of several repeats. Not a test: it
prints figures.

    python benchmarks/bench_bub_turn.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench_turn import per_turn  # this folder is the script's first import path

GOAL = 0.25  # a hookline turn costs at most a quarter of Bub's at 5 plugins


def plugin_class(mark: Callable[[Any], Any], answer: str | None) -> type:
    """A plugin implementing every turn hook under `mark` (each framework's hookimpl);
    its run_model returns `answer`."""

    class Trivial:
        @mark
        def resolve_session(self, message):  # type: ignore[no-untyped-def]
            return None

        @mark
        def load_state(self, message, session_id):  # type: ignore[no-untyped-def]
            return None

        @mark
        def build_prompt(self, message, session_id, state):  # type: ignore[no-untyped-def]
            return None

        @mark
        def run_model(self, prompt, session_id, state):  # type: ignore[no-untyped-def]
            return answer

        @mark
        def save_state(self, session_id, state, message, model_output):  # type: ignore[no-untyped-def]
            return None

        @mark
        def render_outbound(self, message, session_id, state, model_output):  # type: ignore[no-untyped-def]
            return None

        @mark
        def dispatch_outbound(self, message):  # type: ignore[no-untyped-def]
            return None

    return Trivial


def plugins(mark: Callable[[Any], Any], n: int) -> list[object]:
    """n - 1 silent plugins, then the answering one (registered last, so it runs first)."""
    return [plugin_class(mark, None)() for _ in range(n - 1)] + [plugin_class(mark, "ok")()]


def hookline_framework(n: int) -> Any:
    from hookline.kernel import Framework, hookimpl

    framework = Framework()
    for index, plugin in enumerate(plugins(hookimpl, n)):
        framework.registry.register(plugin, name=f"p{index}")
    return framework


def bub_framework(n: int, config: Path) -> Any:
    from bub.framework import BubFramework
    from bub.hooks import hookimpl

    framework = BubFramework(config_file=config)
    for index, plugin in enumerate(plugins(hookimpl, n)):
        framework.plugin_manager.register(plugin, name=f"p{index}")
    return framework


async def measure(n: int, turns: int, repeats: int, config: Path) -> tuple[float, float]:
    ours, theirs = hookline_framework(n), bub_framework(n, config)

    def turn_of(framework: Any) -> Callable[[], Awaitable[Any]]:
        return lambda: framework.process_inbound({"content": "hi", "channel": "bench"})

    ours_turn, bub_turn = turn_of(ours), turn_of(theirs)
    assert (await ours_turn()).model_output == (await bub_turn()).model_output == "ok"
    best_ours = best_bub = float("inf")
    async with ours.running(), theirs.running():
        for _ in range(repeats):
            best_ours = min(best_ours, await per_turn(ours_turn, turns))
            best_bub = min(best_bub, await per_turn(bub_turn, turns))
    return best_ours, best_bub


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few iterations (smoke test)")
    args = parser.parse_args()
    try:
        import bub.framework  # noqa: F401
    except ImportError:
        sys.exit("Bub is not installed here: run this in an environment with Bub 0.6 "
                 "(Python 3.12; see spec/run_on_bub.py --install)")
    turns, repeats = (50, 2) if args.quick else (2000, 7)
    import logging

    logging.disable(logging.WARNING)  # the frameworks' notes are not what is measured
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "config.yml"
        config.write_text("{}\n")
        print(f"{'plugins':>7} {'hookline us':>12} {'Bub us':>9} {'ratio':>6}")
        ratios = {}
        for n in (1, 5, 20):
            ours, theirs = asyncio.run(measure(n, turns, repeats, config))
            ratios[n] = ours / theirs
            print(f"{n:>7} {ours:>12.2f} {theirs:>9.2f} {ratios[n]:>6.2f}")
    verdict = "PASS" if ratios[5] <= GOAL else "MISS"
    print(f"goal: a hookline turn <= {GOAL}x a Bub turn at 5 plugins: "
          f"{verdict} ({ratios[5]:.2f}x)")


if __name__ == "__main__":
    main()
