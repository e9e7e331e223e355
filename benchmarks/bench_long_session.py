"""A long session against a loopback OpenAI-compatible server over real HTTP: 40 turns of
about 20 KB replies, four of them reading a large file, on a model whose context window
is 32,000 tokens. The same session runs twice in one process: as hookline did before the
token budget (no compaction, the 100-entry window; the server answers everything, and a
turn with a request longer than the window counts as failed, as the model would refuse
it) and as it does now (context_window = 32000; the server refuses a longer request as a
provider does). Not a test: it prints the figures of docs/context.md and the goals.

Tokens are counted as the request body's characters over 4 (the server cannot tokenise).
"prefix kept" is, for each pair of consecutive requests between compactions, the share
of the later request that repeats the earlier one from its start (what a prompt cache
can serve), and "previous kept" the share of the earlier request found whole at the
start of the later one (whether requests only grow). "input no cache serves" is the
input tokens of the session less, for each request (summaries included), what it repeats
of the request before it from its start.

    python benchmarks/bench_long_session.py [--turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from openai_server import OpenAIServer, RecordedRequest, Reply  # noqa: E402

from hookline.builtins.agent.compaction import COMPACTION_PROMPT  # noqa: E402
from hookline.builtins.config import Settings  # noqa: E402
from hookline.builtins.plugin import BuiltinPlugin  # noqa: E402
from hookline.kernel import Framework, TapeContext, hookimpl  # noqa: E402

WINDOW = 32_000
TOOL_TURNS = frozenset({5, 15, 25, 35})
GOALS = {"largest": WINDOW * 0.8, "total_ratio": 0.35, "prefix": 0.90, "failed": 0}


def tokens(request: RecordedRequest) -> int:
    return len(request.raw) // 4


def is_summary(request: RecordedRequest) -> bool:
    """The prompt is the summary call's system message (the conversation sent as a text)
    or starts its last message (the conversation's own request repeated)."""
    messages = request.messages
    return bool(messages) and any(str(message.get("content")).startswith(COMPACTION_PROMPT)
                                  for message in (messages[0], messages[-1]))


class Model:
    """The server's answers: a 20 KB reply, a file read on the tool turns, a summary for a
    summary call, and a refusal for a request longer than the window."""

    def __init__(self, refuse: bool) -> None:
        self.turn = 0
        self.refuse = refuse
        self.too_long: set[int] = set()
        """Turns that sent a request longer than the window."""

    def __call__(self, request: RecordedRequest) -> Reply:
        if tokens(request) > WINDOW:
            self.too_long.add(self.turn)
        if self.refuse and tokens(request) > WINDOW:
            return Reply.failure(400, f"This model's maximum context length is {WINDOW} "
                                      f"tokens. However, your messages resulted in "
                                      f"{tokens(request)} tokens.")
        usage = {"prompt_tokens": len(request.raw) // 4, "completion_tokens": 100}
        if is_summary(request):
            return Reply(text="Summary of the session so far. " * 60, usage=usage)
        last = request.messages[-1]
        if last.get("role") == "user" and self.turn in TOOL_TURNS:
            return Reply(tool_calls=[{"name": "fs_read", "arguments": {"path": "big.txt"}}],
                         usage=usage)
        return Reply(text=f"Answer {self.turn}: " + "lorem ipsum dolor sit amet " * 740,
                     usage=usage)


class OldWindow:
    """The context before the token budget: the last 100 entries, sliding."""

    @hookimpl
    def build_tape_context(self) -> TapeContext:
        return TapeContext(window=100)


async def session(turns: int, compaction: bool) -> dict[str, Any]:
    model = Model(refuse=compaction)
    with tempfile.TemporaryDirectory() as tmp, OpenAIServer(responder=model) as server:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        (workspace / "big.txt").write_text("a line of a large file\n" * 2500)
        settings = Settings(home=Path(tmp) / "home", model="openai-compatible:test-model",
                            api_base=server.base_url, api_key="sk-bench",
                            context_window=WINDOW, compaction=compaction)
        framework = Framework(workspace)
        framework.registry.register(BuiltinPlugin(framework, settings=settings),
                                    name="builtin")
        if not compaction:
            framework.registry.register(OldWindow(), name="old-window")
        failed = 0
        async with framework.running():
            for number in range(turns):
                model.turn = number
                result = await framework.process_inbound(
                    {"content": f"question {number}", "session_id": "bench"})
                failed += not result.model_output.strip()
        requests = list(server.requests)
    sizes = [tokens(request) for request in requests]
    shares, kept = [], []
    served = 0
    for before, after in itertools.pairwise(requests):
        earlier, later = prompt_parts(before), prompt_parts(after)
        same = common_start(earlier, later)
        served += same
        if is_summary(before) or is_summary(after):
            continue
        shares.append(same / sum(map(len, later)))
        kept.append(same / sum(map(len, earlier)))
    if not compaction:
        failed = len(model.too_long)
    return {"largest": max(sizes), "total": sum(sizes), "calls": len(requests),
            "prefix": sum(shares) / max(1, len(shares)),
            "kept": sum(kept) / max(1, len(kept)), "failed": failed,
            "summaries": sum(map(is_summary, requests)),
            "unserved": sum(sizes) - served // 4}


def prompt_parts(request: RecordedRequest) -> list[str]:
    """The request as a provider's cache sees it, in order: the tools, then each message."""
    return [json.dumps(request.tools), *(json.dumps(message) for message in request.messages)]


def common_start(earlier: list[str], later: list[str]) -> int:
    """The characters of the parts two requests share from their start."""
    same = 0
    for first, second in zip(earlier, later, strict=False):
        if first != second:
            break
        same += len(first)
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=40)
    turns = parser.parse_args().turns
    before = asyncio.run(session(turns, compaction=False))
    after = asyncio.run(session(turns, compaction=True))
    ratio = after["total"] / before["total"]
    print(f"{turns} turns, context_window = {WINDOW}, tokens = characters / 4")
    print(f"{'':32}{'before':>14}{'now':>14}   goal")
    print(f"{'largest request (tokens)':32}{before['largest']:>14,}{after['largest']:>14,}"
          f"   <= {GOALS['largest']:,.0f}")
    print(f"{'total input (tokens)':32}{before['total']:>14,}{after['total']:>14,}"
          f"   ratio {ratio:.2f} <= {GOALS['total_ratio']}")
    print(f"{'prefix kept, mean share':32}{before['prefix']:>14.0%}{after['prefix']:>14.0%}"
          f"   >= {GOALS['prefix']:.0%}")
    print(f"{'previous kept, mean share':32}{before['kept']:>14.0%}{after['kept']:>14.0%}")
    print(f"{'input no cache serves (tokens)':32}{before['unserved']:>14,}"
          f"{after['unserved']:>14,}")
    print(f"{'turns failed':32}{before['failed']:>14}{after['failed']:>14}   0")
    calls = f"{after['calls']} ({after['summaries']})"
    print(f"{'model calls (summaries)':32}{before['calls']:>14}{calls:>14}")
    met = (after["largest"] <= GOALS["largest"] and ratio <= GOALS["total_ratio"]
           and after["prefix"] >= GOALS["prefix"] and after["failed"] == 0)
    print("goals met" if met else "goals NOT met")


if __name__ == "__main__":
    main()
