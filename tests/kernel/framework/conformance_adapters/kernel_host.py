"""A kernel in a process of its own, for ``--adapter-command``: it speaks the conformance
suite's JSON-lines protocol (docs/conformance-command.md) on stdin and stdout.

The kernel is the dispatch core, a copy of kernel/_dispatch imported under another name
(``--core MODULE``; by default this script copies the repository's into a temporary
folder), driven as spec/dispatch_adapter.py drives it in process. It builds the plugins
from their fixture descriptions with the suite's own fixture_plugins.py. hookline itself
is never imported, and any Python 3.11+ runs it: the test runs it on another version than
the runner's when there is one.

    python -m spec --adapter-command "python3.12 tests/.../kernel_host.py" --area dispatch

``--fail-on-hook HOOK:exit|garbage|hang`` makes it break the protocol at the first
dispatch of HOOK, as a broken kernel host would, for the tests of the runner's errors.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import importlib
import inspect
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[4]
PROTOCOL = 1

sys.modules["hookline"] = None  # type: ignore[assignment]  # the copy, never hookline
try:
    import spec  # noqa: F401  (the suite package: the repository root on PYTHONPATH)
except ImportError:
    sys.path.append(str(ROOT))

from spec.dispatch_adapter import DispatchAdapter, DispatchKernel  # noqa: E402
from spec.fixture_plugins import Transcript, build_plugin  # noqa: E402
from spec.fixture_values import decode  # noqa: E402
from spec.framework_steps import Tags  # noqa: E402


def encode(value: Any) -> Any:
    """The fixtures' tagged encoding of a value (None and exceptions are tagged)."""
    if value is None:
        return {"$none": True}
    if isinstance(value, BaseException):
        return {"$exception": type(value).__name__, "message": message_of(value)}
    if isinstance(value, dict):
        return {str(key): encode(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [encode(item) for item in value]
    if isinstance(value, bool | int | float | str):
        return value
    return {"$exception": "TypeError", "message": f"cannot encode {value!r}"}


def message_of(error: BaseException) -> str:
    """What the exception was made with (KeyError's argument, not its quoted str)."""
    if len(error.args) == 1 and isinstance(error.args[0], str):
        return error.args[0]
    return str(error)


class WireTranscript(Transcript):
    """The implementations' calls, kept encoded for the reply (not described)."""

    def record(self, entry: dict[str, Any]) -> None:
        self.calls.append(encode(entry))


class LogRecords(logging.Handler):
    """The records a request makes, at WARNING or above (all the runner reads)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[dict[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append({"logger": record.name, "level": record.levelname,
                             "message": record.getMessage()})


class Kernel:
    """One kernel of the protocol: the core's registry and runtime, and the plugins
    built for it (one object per fixture plugin name, so registering it again is the
    same object)."""

    def __init__(self, adapter: DispatchAdapter) -> None:
        self.adapter = adapter
        self.kernel: DispatchKernel = adapter.new_kernel()
        self.transcript = WireTranscript(adapter)
        self.tags = Tags(adapter, self.transcript.record,
                         lambda value, args: decode(value, self.tags, args))
        self.plugins: dict[str, object] = {}

    def plugin(self, description: dict[str, Any]) -> object:
        name = description["name"]
        if name not in self.plugins:
            self.plugins[name] = build_plugin(description, self.adapter.mark,
                                              self.transcript, self.tags)
        return self.plugins[name]


def impls(functions: list[Any]) -> list[list[str]]:
    """[plugin, function] of each implementation, read as the runner reads them."""
    pairs = []
    for function in functions:
        tag = getattr(inspect.unwrap(getattr(function, "__func__", function)),
                      "__spec_tag__", ("?", getattr(function, "__name__", "?")))
        pairs.append(list(tag))
    return pairs


class Host:
    def __init__(self, core: Any, fail_on: tuple[str, str] | None) -> None:
        self.adapter = DispatchAdapter(core)
        self.kernels: dict[str, Kernel] = {}
        self.fail_on = fail_on
        self.logs = LogRecords()
        root = logging.getLogger()
        root.addHandler(self.logs)
        root.setLevel(logging.WARNING)

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "hello":
            version = ".".join(map(str, sys.version_info[:3]))
            return {"protocol": PROTOCOL, "name": f"dispatch-core on Python {version}",
                    "supports": []}
        if op == "new_kernel":
            self.kernels.clear()  # the runner uses only the newest kernel
            kernel_id = f"k{request['id']}"
            self.kernels[kernel_id] = Kernel(self.adapter)
            return {"kernel": kernel_id}
        kernel = self.kernels.get(request.get("kernel", ""))
        if kernel is None:
            return {"failure": f"no kernel {request.get('kernel')!r} for {op!r}"}
        transcript = kernel.transcript
        transcript.calls.clear()
        transcript.raised.clear()
        made = len(transcript.coroutines)
        self.logs.records.clear()
        reply: dict[str, Any] = {}
        try:
            reply = self.perform(op, request, kernel)
        except Exception as exc:
            reply = {"error": {
                "type": type(exc).__name__,
                "bases": [cls.__name__ for cls in type(exc).__mro__[1:]
                          if cls not in (BaseException, object)],
                "message": message_of(exc),
                "from_implementation": any(exc is raised for raised in transcript.raised),
                "notes": [str(note) for note in getattr(exc, "__notes__", [])],
            }}
        reply["calls"] = list(transcript.calls)
        reply["logs"] = list(self.logs.records)
        reply["awaitables"] = [
            {"state": "closed" if inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED
             else "pending"}
            for coroutine in transcript.coroutines[made:]]
        return reply

    def perform(self, op: Any, request: dict[str, Any], kernel: Kernel) -> dict[str, Any]:
        core = kernel.kernel
        if op == "register":
            core.register(kernel.plugin(request["plugin"]), request["name"])
            return {}
        if op == "unregister":
            core.unregister(request["name"])
            return {}
        if op == "plugin_names":
            return {"names": core.plugin_names()}
        if op == "execution_order":
            return {"impls": impls(core.execution_order(request["hook"]))}
        if op == "stored_order":
            return {"impls": impls(core.stored_order(request["hook"]))}
        if op == "unknown_hooks":
            return {"unknown": core.unknown_hooks()}
        if op == "dispatch":
            self.misbehave(request["hook"])
            args = decode(request.get("args", {}))
            result = core.dispatch(request["call"], request["hook"], args)
            if not request["call"].endswith("_sync"):
                result = asyncio.run(_awaited(result))
            return {"result": encode(result), "args": encode(args)}
        return {"failure": f"unknown op {op!r}"}

    def misbehave(self, hook: str) -> None:
        """Break the protocol as asked (``--fail-on-hook``)."""
        if self.fail_on is None or self.fail_on[0] != hook:
            return
        how = self.fail_on[1]
        print(f"kernel_host: told to {how} at the first dispatch of {hook}", file=sys.stderr,
              flush=True)
        if how == "exit":
            os._exit(3)
        if how == "garbage":
            wire.write("this is not JSON\n")
            wire.flush()
        if how == "hang":
            time.sleep(3600)


async def _awaited(result: Any) -> Any:
    return await result


def copied_core() -> str:
    """The repository's kernel/_dispatch, copied into a temporary folder as ``hostcore``."""
    folder = Path(tempfile.mkdtemp(prefix="kernel-host-"))
    atexit.register(shutil.rmtree, folder, True)
    shutil.copytree(ROOT / "kernel" / "_dispatch", folder / "hostcore",
                    ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, str(folder))
    return "hostcore"


wire = sys.stdout


def main() -> int:
    global wire
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--core", default=None,
                        help="import name of a copy of kernel/_dispatch (default: copy it)")
    parser.add_argument("--fail-on-hook", default=None, metavar="HOOK:HOW")
    args = parser.parse_args()
    wire, sys.stdout = sys.stdout, sys.stderr  # stray prints must not break the protocol
    core = importlib.import_module(args.core or copied_core())
    fail_on = tuple(args.fail_on_hook.split(":", 1)) if args.fail_on_hook else None
    host = Host(core, fail_on)  # type: ignore[arg-type]
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            reply: dict[str, Any] = {"failure": f"not JSON: {line[:80]!r}"}
            request = {}
        else:
            try:
                reply = host.handle(request)
            except Exception as exc:  # a fault of this host, not of the kernel
                reply = {"failure": f"{type(exc).__name__}: {exc}"}
        wire.write(json.dumps({"id": request.get("id"), **reply}) + "\n")
        wire.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
