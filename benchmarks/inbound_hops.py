"""How far an inbound message travels before it reaches the store: module entries along
the way, counted on the real path (the builtin plugin, the channel manager, the SQLite
store, the offline model).

A channel hands one message to the channel manager (`ChannelManager.receive`, what every
channel calls); from then until the first function of the tape stores runs (a module of
`hookline.builtins.store` other than `budget`, the turn's deadline), in any thread, every
call from a function of one hookline module into a function of another counts as one
module entry. Not a test: it prints the count, the modules and the entries in order, so
two versions can be compared in one sitting (docs/architecture.md).

    python benchmarks/inbound_hops.py [-v]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
from types import FrameType
from typing import Any

STORE = "hookline.builtins.store"
DEADLINE = "hookline.builtins.store.budget"


class Hops:
    """Module entries seen between `start()` and the first call into the store."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, str]] = []
        self.recording = False
        self.done = threading.Event()

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or not self.recording or self.done.is_set():
            return
        callee = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        if not callee.startswith("hookline.") or callee == caller:
            return
        self.entries.append((caller, f"{callee}.{frame.f_code.co_name}"))
        if callee.startswith(STORE) and callee != DEADLINE:
            self.done.set()
            self.recording = False


async def one_message(hops: Hops) -> None:
    from hookline.builtins.channels import ChannelManager
    from hookline.kernel import Framework
    from hookline.kernel.channels import Channel

    class Probe(Channel):
        name = "probe"

        async def start(self, stop_event: Any) -> None:
            return None

        async def stop(self) -> None:
            return None

    framework = Framework(workspace=tempfile.mkdtemp(prefix="hops-workspace-"))
    framework.load_hooks()
    manager = ChannelManager(framework, {"probe": Probe()})
    stop = asyncio.Event()
    async with framework.running():
        task = asyncio.ensure_future(manager.run(stop))
        await asyncio.sleep(0.2)  # the manager is bound and running
        hops.recording = True
        await manager.receive({"channel": "probe", "chat_id": "c", "content": "hello"})
        await asyncio.to_thread(hops.done.wait, 30)
        stop.set()
        await task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="list every entry")
    args = parser.parse_args()
    os.environ["HOOKLINE_HOME"] = tempfile.mkdtemp(prefix="hops-home-")
    os.environ.pop("HOOKLINE_MODEL", None)  # the offline model
    hops = Hops()
    threading.setprofile(hops.profile)
    sys.setprofile(hops.profile)
    try:
        asyncio.run(one_message(hops))
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    modules = sorted({callee.rsplit(".", 1)[0] for _, callee in hops.entries})
    print(f"{len(hops.entries)} module entries across {len(modules)} modules before the "
          f"store ({hops.entries[-1][1] if hops.entries else 'not reached'})")
    print("modules:", ", ".join(module.removeprefix("hookline.") for module in modules))
    if args.verbose:
        for caller, callee in hops.entries:
            print(f"  {caller.removeprefix('hookline.')} -> {callee.removeprefix('hookline.')}")


if __name__ == "__main__":
    main()
