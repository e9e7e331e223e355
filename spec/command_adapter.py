"""An adapter for a kernel in another process, written in any language: JSON lines over
the child's stdin and stdout (the protocol: docs/conformance-command.md).

    python -m spec --adapter-command "python3.12 kernel_host.py" --area dispatch

The runner starts the command (split as a shell would, run without one) and says hello;
then each call of the kernel protocol (``runner.KernelUnderTest``) is one request and one
reply. A plugin travels as the fixture's own description and the child builds it, so
nothing of Python crosses the pipe. Each reply brings back what the runner checks
in process: the result or the exception (by type name), the calls the implementations
saw, the log records and the awaitables they made; they are replayed here (the calls into
the fixture's transcript, the records into ``logging``, the awaitables as coroutines in
the same state), so the runner's checks apply unchanged. There is no framework protocol:
framework fixtures are skipped, as for any kernel-only adapter.

A child that cannot start or answer hello is a usage error. One that dies, writes a line
that is not a reply, or does not answer before the fixture's time is up raises
``CommandError``, which the runner reports as an ERROR (the harness failed, not the
kernel); the child is stopped, and the next fixture starts a new one.
"""

from __future__ import annotations

import builtins
import collections
import json
import logging
import queue
import shlex
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from contextlib import suppress
from typing import TYPE_CHECKING, Any, NoReturn, cast

from .fixture_plugins import Transcript

if TYPE_CHECKING:
    from .runner import Adapter

PROTOCOL = 1
"""The version of the JSON-lines protocol this runner speaks."""

ASYNC_CALLS = frozenset({"call_first", "call_many", "notify_error"})
SYNC_CALLS = frozenset({"call_first_sync", "call_many_sync", "notify_error_sync"})

_STDERR_LINES = 20
"""How many of the child's last stderr lines an error message quotes."""

_SHARE_OF_TIMEOUT = 0.8
"""The share of the fixture's --timeout a fixture's requests may take: the rest lets the
runner say which request hung (an ERROR) before the fixture itself times out."""


class CommandError(BaseException):
    """The child broke the protocol: it died, wrote a line that is not a reply, or did not
    answer in time. A ``BaseException``, so that the runner does not take it for an
    exception the kernel raised: the fixture is an ERROR, not a FAIL."""


# -- values on the wire ---------------------------------------------------------------------


def encode(value: Any) -> Any:
    """A value in the fixtures' tagged encoding (``{"$none": true}``, ``{"$exception":
    type, "message": text}``); anything else that is not JSON data cannot travel."""
    if value is None:
        return {"$none": True}
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, BaseException):
        return {"$exception": type(value).__name__, "message": exception_message(value)}
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: encode(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [encode(item) for item in value]
    raise CommandError(f"cannot send {type(value).__name__} {value!r} to the adapter "
                       f"command: only JSON data, None and exceptions travel")


def exception_message(error: BaseException) -> str:
    """The text an exception was made with (``KeyError('x')`` gives ``x``, not ``'x'``)."""
    if len(error.args) == 1 and isinstance(error.args[0], str):
        return error.args[0]
    return str(error)


def decode(value: Any) -> Any:
    """The Python value of an encoded one (``null`` is also None)."""
    if isinstance(value, dict):
        if value.get("$none") is True:
            return None
        if "$exception" in value:
            return rebuild_exception({"type": value["$exception"],
                                      "message": value.get("message", "")})
        tag = next((key for key in value if key.startswith("$")), None)
        if tag is not None:
            raise CommandError(f"the adapter command sent the tag {tag}: only $none and "
                               f"$exception are values on the wire")
        return {key: decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode(item) for item in value]
    return value


_EXCEPTIONS = {name: cls for name, cls in vars(builtins).items()
               if isinstance(cls, type) and issubclass(cls, Exception)}
_MADE: dict[tuple[str, ...], type[Exception]] = {}


def exception_type(names: list[str]) -> type[Exception]:
    """An exception class named ``names[0]`` whose ancestors have the other names (nearest
    first), so that a fixture expecting a base type (``ValueError``) matches a kernel's
    own subclass. Python's built-in types are used where a name is one of them."""
    chain = tuple(str(name) for name in names)
    if chain in _MADE:
        return _MADE[chain]
    known = next((i for i, name in enumerate(chain) if name in _EXCEPTIONS), len(chain))
    cls: type[Exception] = _EXCEPTIONS[chain[known]] if known < len(chain) else Exception
    for name in reversed(chain[:known]):
        if not name.isidentifier():
            raise CommandError(f"the adapter command named an exception type {name!r}")
        cls = type(name, (cls,), {"__module__": "adapter_command"})
    _MADE[chain] = cls
    return cls


def rebuild_exception(error: dict[str, Any]) -> Exception:
    """The exception an ``error`` object describes (type, bases, message, notes, kind)."""
    if not isinstance(error, dict) or not isinstance(error.get("type"), str):
        raise CommandError(f"the adapter command sent an error without a type: {error!r}")
    bases = error.get("bases", [])
    exc = exception_type([error["type"], *(bases if isinstance(bases, list) else [])])(
        str(error.get("message", "")))
    for note in error.get("notes", []) or []:
        exc.add_note(str(note))
    if "kind" in error:
        exc.kind = error["kind"]  # type: ignore[attr-defined]
    return exc


# -- the child process ----------------------------------------------------------------------


class _Child:
    """One run of the command: requests go to its stdin, replies are read from its stdout
    by a thread of their own (so that waiting for one can time out), stderr is kept for
    error messages."""

    def __init__(self, argv: list[str], command: str) -> None:
        self.command = command
        try:
            self.process = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            raise CommandError(f"cannot start the adapter command `{command}`: {exc}") from None
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        self.next_id = 0
        for target, stream in ((self._read_stdout, self.process.stdout),
                               (self._read_stderr, self.process.stderr)):
            threading.Thread(target=target, args=(stream,), daemon=True,
                             name=f"adapter command {target.__name__}").start()

    def _read_stdout(self, stream: Any) -> None:
        for line in iter(stream.readline, b""):
            self.lines.put(line)
        self.lines.put(None)

    def _read_stderr(self, stream: Any) -> None:
        for line in iter(stream.readline, b""):
            self.stderr.append(line.decode("utf-8", "replace").rstrip("\n"))

    def alive(self) -> bool:
        return self.process.poll() is None

    def request(self, op: str, fields: dict[str, Any], wait: float,
                limit: str = "") -> dict[str, Any]:
        """Send one request and read its reply; any breach of the protocol is a
        ``CommandError`` (and stops the child)."""
        self.next_id += 1
        message = {"id": self.next_id, "op": op, **fields}
        try:
            line = json.dumps(message, allow_nan=False, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise CommandError(f"cannot send {op!r} to the adapter command: {exc}") from None
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(line.encode("utf-8") + b"\n")
            self.process.stdin.flush()
        except (OSError, ValueError):  # a closed pipe, or a closed file
            self._fail(f"could not be sent {op!r}")
        try:
            raw = self.lines.get(timeout=max(wait, 0.0))
        except queue.Empty:
            self._fail(f"did not answer {op!r} within {max(wait, 0.0):.3g} s{limit}")
        if raw is None:
            with suppress(subprocess.TimeoutExpired):
                self.process.wait(1.0)
            self._fail(f"{_ending(self.process.poll())} instead of answering {op!r}")
        try:
            reply = json.loads(raw)
        except ValueError:
            self._fail(f"answered {op!r} with a line that is not JSON: {_clip(raw)}")
        if not isinstance(reply, dict):
            self._fail(f"answered {op!r} with JSON that is not an object: {_clip(raw)}")
        if reply.get("id") != self.next_id:
            self._fail(f"answered request {self.next_id} ({op!r}) with the id "
                       f"{reply.get('id')!r}")
        if "failure" in reply:
            self._fail(f"could not do {op!r}: {reply['failure']}")
        return reply

    def _fail(self, what: str) -> NoReturn:
        """Stop the child at once and raise what went wrong, with its last stderr lines."""
        self.process.kill()
        self.process.wait()
        time.sleep(0.05)  # the stderr reader's last lines
        tail = "; its stderr ended with: " + " | ".join(self.stderr) if self.stderr else ""
        raise CommandError(f"the adapter command `{self.command}` {what}{tail}")

    def stop(self, grace: float = 2.0) -> None:
        """End of input is the child's signal to exit; one that lingers is killed."""
        with suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _ending(status: int | None) -> str:
    if status is None:
        return "closed its stdout"
    return f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"


def _clip(raw: bytes, limit: int = 120) -> str:
    text = raw.decode("utf-8", "replace").rstrip("\n")
    return repr(text if len(text) <= limit else text[:limit] + "...")


# -- the adapter ----------------------------------------------------------------------------


class RemotePlugin:
    """A fixture plugin as it travels: its description, built by the child."""

    def __init__(self, description: dict[str, Any], transcript: Transcript) -> None:
        self.description = description
        self.transcript = transcript

    def __repr__(self) -> str:
        return f"<plugin {self.description.get('name')!r}, built by the adapter command>"


class Implementation:
    """An implementation the child reports, as the runner reads one (``__spec_tag__``)."""

    def __init__(self, plugin: str, function: str) -> None:
        self.__spec_tag__ = (plugin, function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("an implementation of the adapter command runs in the child")

    def __repr__(self) -> str:
        return f"<implementation {self.__spec_tag__[0]}.{self.__spec_tag__[1]}>"


class CommandAdapter:
    """``runner.Adapter`` for a kernel behind a command: the kernel protocol only."""

    protocol = 1

    def __init__(self, command: str, timeout: float = 60.0, suite: str = "") -> None:
        self.command = command
        self.timeout = timeout
        self.suite = suite
        try:
            self.argv = shlex.split(command)
        except ValueError as exc:  # an unbalanced quote: the command line is the problem
            raise CommandError(f"the adapter command {command!r} cannot be split into "
                               f"words: {exc}") from None
        if not self.argv:
            raise CommandError("the adapter command is empty")
        self.deadline: float | None = None
        self.child: _Child | None = None
        self.started: list[_Child] = []
        self.lock = threading.RLock()
        weakref.finalize(self, _stop_all, self.started)
        hello = self._start()
        self.name = str(hello["name"])
        self.supported = {str(item) for item in hello.get("supports", []) or []}

    def _start(self) -> dict[str, Any]:
        """A new child, greeted: it must speak this runner's protocol."""
        self.started[:] = [child for child in self.started if child.alive()]
        child = self.child = _Child(self.argv, self.command)
        self.started.append(child)
        hello = self.request(child, "hello", {"protocol": PROTOCOL, "suite": self.suite})
        if hello.get("protocol") != PROTOCOL:
            speaks = hello.get("protocol")
            child.stop()
            self.child = None
            upgrade = (": upgrade the suite" if isinstance(speaks, int) and speaks > PROTOCOL
                       else "")
            raise CommandError(f"the adapter command `{self.command}` speaks protocol "
                               f"{speaks!r}; this runner speaks {PROTOCOL}{upgrade}")
        if not isinstance(hello.get("name"), str) or not hello["name"] or "op" in hello:
            child.stop()
            self.child = None
            raise CommandError(f"the adapter command `{self.command}` answered hello without "
                               f"its kernel's name (an echo of the request?): {hello}")
        return hello

    def request(self, child: _Child, op: str, fields: dict[str, Any]) -> dict[str, Any]:
        """One exchange, within what is left of the fixture's time (or the whole
        ``timeout`` outside a fixture); a failed child is forgotten, to be started anew."""
        with self.lock:
            if child is not self.child:
                raise CommandError(f"the adapter command `{self.command}` was stopped after "
                                   f"an earlier failure")
            if self.deadline is None:
                wait, limit = self.timeout, " (--timeout)"
            else:
                wait, limit = self.deadline - time.monotonic(), " (what was left of the " \
                    f"{_SHARE_OF_TIMEOUT:.0%} of --timeout a fixture's requests may take)"
            try:
                return child.request(op, fields, wait, limit)
            except CommandError:
                if self.child is child:
                    self.child = None
                raise

    def supports(self, requirement: str) -> bool:
        return requirement in self.supported

    def mark(self, function: Callable[..., Any], options: dict[str, Any]) -> Callable[..., Any]:
        """Unused: the child builds and marks the plugins (``remote_plugin``)."""
        return function

    def remote_plugin(self, description: dict[str, Any], transcript: Transcript) -> RemotePlugin:
        """What ``fixture_plugins.build_plugin`` returns for this adapter: the plugin as
        described, for the child to build."""
        return RemotePlugin(description, transcript)

    def new_kernel(self) -> CommandKernel:
        with self.lock:  # a fixture left running after its TIMEOUT may still hold it
            self.deadline = time.monotonic() + self.timeout * _SHARE_OF_TIMEOUT
            if self.child is None or not self.child.alive():
                self._start()
            child = self.child
            assert child is not None
            reply = self.request(child, "new_kernel", {})
        if "kernel" not in reply:
            child.stop()
            self.child = None
            raise CommandError(f"the adapter command `{self.command}` answered new_kernel "
                               f"without a kernel id: {reply!r}")
        return CommandKernel(self, child, reply["kernel"])

    def close(self) -> None:
        """Let the child go (end of its input), killing it if it lingers."""
        if self.child is not None:
            self.child.stop()
            self.child = None


def start(command: str, timeout: float = 60.0, suite: str = "") -> Adapter:
    """The adapter for ``command``, its child started and greeted (``CommandError`` if
    it cannot be)."""
    return cast("Adapter", CommandAdapter(command, timeout, suite))


def _stop_all(children: list[_Child]) -> None:
    """At exit, or when the adapter is gone: no child outlives the runner."""
    for child in children:
        child.stop()


class CommandKernel:
    """``runner.KernelUnderTest`` over the pipe; each reply's calls, log records and
    awaitables are replayed before its result is returned or its error raised."""

    def __init__(self, adapter: CommandAdapter, child: _Child, kernel_id: Any) -> None:
        self.adapter = adapter
        self.child = child
        self.id = kernel_id
        self.transcript = Transcript(adapter)

    def _ask(self, op: str, **fields: Any) -> dict[str, Any]:
        reply = self.adapter.request(self.child, op, {"kernel": self.id, **fields})
        try:
            self._replay(reply)
        except (AttributeError, TypeError, ValueError) as exc:
            raise CommandError(f"the adapter command answered {op!r} with a malformed "
                               f"calls, logs or awaitables list: {exc}") from None
        if reply.get("error") is not None:
            exc = rebuild_exception(reply["error"])
            if reply["error"].get("from_implementation"):
                self.transcript.raised.append(exc)
            raise exc
        return reply

    def _replay(self, reply: dict[str, Any]) -> None:
        for record in reply.get("logs", []) or []:
            logger = str(record.get("logger") or "")
            level = record.get("level", "WARNING")
            if not isinstance(level, int):
                level = logging.getLevelNamesMapping().get(str(level).upper(), logging.WARNING)
            # handle(), not log(): the child already decided the record is emitted.
            logging.getLogger(logger).handle(logging.LogRecord(
                logger or "root", level, "<adapter command>", 0, str(record.get("message", "")),
                None, None))
        for call in reply.get("calls", []) or []:
            self.transcript.record(decode(call))
        for made in reply.get("awaitables", []) or []:
            self.transcript.coroutines.append(_mirror(made))

    def register(self, plugin: object, name: str) -> None:
        if not isinstance(plugin, RemotePlugin):
            raise CommandError(f"{plugin!r} was not built for the adapter command")
        self.transcript = plugin.transcript
        self._ask("register", name=name, plugin=plugin.description)

    def unregister(self, name: str) -> None:
        self._ask("unregister", name=name)

    def plugin_names(self) -> list[str]:
        return [str(name) for name in self._ask("plugin_names").get("names", [])]

    def execution_order(self, hook: str) -> list[Callable[..., Any]]:
        return self._impls("execution_order", hook)

    def stored_order(self, hook: str) -> list[Callable[..., Any]]:
        return self._impls("stored_order", hook)

    def _impls(self, op: str, hook: str) -> list[Callable[..., Any]]:
        pairs = self._ask(op, hook=hook).get("impls", [])
        if not all(isinstance(pair, list) and len(pair) == 2 for pair in pairs):
            raise CommandError(f"the adapter command answered {op!r} with {pairs!r}: "
                               f"expected [plugin, function] pairs")
        return [Implementation(str(plugin), str(function)) for plugin, function in pairs]

    def unknown_hooks(self) -> list[dict[str, Any]]:
        return [dict(entry) for entry in self._ask("unknown_hooks").get("unknown", [])]

    def dispatch(self, call: str, hook: str, kwargs: dict[str, Any]) -> Any:
        if call not in ASYNC_CALLS | SYNC_CALLS:
            raise ValueError(f"unknown dispatch call {call!r}")
        if call in SYNC_CALLS:
            return self._dispatch(call, hook, kwargs)
        return self._dispatch_later(call, hook, kwargs)

    async def _dispatch_later(self, call: str, hook: str, kwargs: dict[str, Any]) -> Any:
        """An async call: the exchange happens when the runner awaits it."""
        return self._dispatch(call, hook, kwargs)

    def _dispatch(self, call: str, hook: str, kwargs: dict[str, Any]) -> Any:
        sent = encode(kwargs)
        reply = self._ask("dispatch", call=call, hook=hook, args=sent)
        after = reply.get("args")
        if isinstance(after, dict):
            # What the implementations changed in the arguments, for ``args_after``.
            for key, value in after.items():
                if sent.get(key) != value:
                    kwargs[key] = decode(value)
        if "result" not in reply:
            raise CommandError(f"the adapter command answered {call} {hook} without a "
                               f"result")
        return decode(reply["result"])


async def _awaitable() -> None:
    """What a mirrored awaitable runs: nothing; only its state matters."""


def _mirror(made: dict[str, Any]) -> Coroutine[Any, Any, None]:
    """A coroutine in the state the child reports for an awaitable an implementation made:
    closed, or left pending (never awaited nor closed), as the runner checks them."""
    coroutine = _awaitable()
    if isinstance(made.get("name"), str):
        coroutine.__qualname__ = made["name"]  # type: ignore[attr-defined]
    if made.get("state") == "closed":
        coroutine.close()
    return coroutine
