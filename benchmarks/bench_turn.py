"""Framework overhead of one ``process_inbound`` turn, against a plain function pipeline.

Each of N trivial plugins implements every turn hook; the plain pipeline calls the
same functions, in the same order, with the same arguments, by hand. Both run inside
one event loop in one process, interleaved, best of several repeats. Not a test: it
prints figures, it does not judge them beyond the stated goal line.

    python benchmarks/bench_turn.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from typing import Any

from hookline.kernel import Framework, hookimpl
from hookline.kernel.prompt import to_content, to_legacy_prompt
from hookline.kernel.turn import TurnResult

GOAL = 2.0  # overhead goal at 5 plugins: framework turn <= 2x the plain pipeline
AIM = 1.5  # where it should go next


class TrivialPlugin:
    """Implements every turn hook and does (almost) nothing, so dispatch dominates."""

    @hookimpl
    def resolve_session(self, message):
        return None

    @hookimpl
    def load_state(self, message, session_id):
        return None

    @hookimpl
    def build_prompt(self, message, session_id, state):
        return None

    @hookimpl
    def run_model(self, prompt, session_id, state):
        return None

    @hookimpl
    def save_state(self, session_id, state, message, model_output):
        return None

    @hookimpl
    def render_outbound(self, message, session_id, state, model_output):
        return None

    @hookimpl
    def dispatch_outbound(self, message):
        return None


class Answering(TrivialPlugin):
    """The one plugin whose run_model answers (registered last, so it runs first)."""

    @hookimpl
    def run_model(self, prompt, session_id, state):
        return "ok"


def build(n: int) -> tuple[Framework, list[TrivialPlugin]]:
    framework = Framework()
    plugins: list[TrivialPlugin] = [TrivialPlugin() for _ in range(n - 1)] + [Answering()]
    for index, plugin in enumerate(plugins):
        framework.registry.register(plugin, name=f"p{index}")
    return framework, plugins[::-1]  # execution order: newest first


async def plain_turn(plugins: list[TrivialPlugin], inbound: dict[str, Any]) -> TurnResult:
    """What a hand-written pipeline does for the same plugins, with no framework."""
    session_id = None
    for p in plugins:
        session_id = p.resolve_session(message=inbound)
        if session_id is not None:
            break
    session_id = session_id or f"{inbound.get('channel', 'default')}:default"
    inbound["session_id"] = session_id
    state: dict[str, Any] = {"_runtime_workspace": "/w", "_runtime_steering_inbox": None}
    for fragment in reversed([p.load_state(message=inbound, session_id=session_id)
                              for p in plugins]):
        if isinstance(fragment, dict):
            state.update(fragment)
    prompt = None
    for p in plugins:
        prompt = p.build_prompt(message=inbound, session_id=session_id, state=state)
        if prompt is not None:
            break
    prompt = to_content(prompt or inbound["content"])
    legacy = to_legacy_prompt(prompt)
    output = ""
    try:
        for p in plugins:
            output = p.run_model(prompt=legacy, session_id=session_id, state=state)
            if output is not None:
                break
    finally:
        for p in plugins:
            p.save_state(session_id=session_id, state=state, message=inbound,
                         model_output=output)
    outbounds = [b for p in plugins
                 if (b := p.render_outbound(message=inbound, session_id=session_id,
                                            state=state, model_output=output)) is not None]
    outbounds = outbounds or [{"content": output, "session_id": session_id}]
    for outbound in outbounds:
        for p in plugins:
            p.dispatch_outbound(message=outbound)
    return TurnResult(session_id, prompt, output, outbounds, state)


async def per_turn(turn: Callable[[], Any], turns: int) -> float:
    start = time.perf_counter()
    for _ in range(turns):
        await turn()
    return (time.perf_counter() - start) / turns * 1e6


async def measure(n: int, turns: int, repeats: int) -> tuple[float, float]:
    framework, plugins = build(n)

    async def framework_turn() -> TurnResult:
        return await framework.process_inbound({"content": "hi", "channel": "bench"})

    async def hand_turn() -> TurnResult:
        return await plain_turn(plugins, {"content": "hi", "channel": "bench"})

    assert (await framework_turn()).model_output == (await hand_turn()).model_output == "ok"
    best_fw = best_plain = float("inf")
    async with framework.running():
        for _ in range(repeats):
            best_fw = min(best_fw, await per_turn(framework_turn, turns))
            best_plain = min(best_plain, await per_turn(hand_turn, turns))
    return best_fw, best_plain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few iterations (smoke test)")
    args = parser.parse_args()
    turns, repeats = (50, 2) if args.quick else (3000, 7)
    print(f"{'plugins':>7} {'framework us':>13} {'plain us':>9} {'ratio':>6}")
    ratios = {}
    for n in (1, 5, 20):
        fw, plain = asyncio.run(measure(n, turns, repeats))
        ratios[n] = fw / plain
        print(f"{n:>7} {fw:>13.2f} {plain:>9.2f} {ratios[n]:>6.2f}")
    verdict = "PASS" if ratios[5] <= GOAL else "MISS"
    aim = "reached" if ratios[5] <= AIM else "not yet"
    print(f"goal: framework turn <= {GOAL}x plain pipeline at 5 plugins: "
          f"{verdict} ({ratios[5]:.2f}x); aim {AIM}x: {aim}")


if __name__ == "__main__":
    main()
