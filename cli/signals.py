"""Ending the process on SIGINT and SIGTERM when the event loop cannot: `run`, `chat` and
the gateway each take the signals in a task, which a plugin's sync hook that blocks (an
HTTP call without a timeout, a `time.sleep`) keeps from running, so no signal would ever
be taken and only SIGKILL, which leaves background processes running, could stop them.

`watch_held_loop` adds a plain signal handler beside the task's: a signal the task has
not taken `HELD_SECONDS` after it came means the loop is held, and the process ends at
once, as a second signal would end it: background process groups killed, one line,
status 128 + the signal number.
"""

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TextIO

__all__ = ["HELD_SECONDS", "force_exit", "held_note", "kill_background_groups",
           "watch_held_loop"]

HELD_SECONDS = 3.0
"""How long a signal may wait for the event loop before the process ends without it."""

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def held_note(signum: int) -> str:
    """What a forced exit for a held loop says (each command frames it its own way)."""
    return (f"{signal.Signals(signum).name} received, but the event loop is held (a "
            f"plugin's hook that blocks?)")


def kill_background_groups(framework: Any) -> None:
    """SIGKILL the process groups of the builtin plugin's background processes (its
    lifespan registry), which a forced exit would otherwise leave running."""
    from hookline.builtins import builtin_services
    from hookline.builtins.host import POSIX

    builtin = builtin_services(framework)
    if not POSIX or builtin is None:
        return
    for info in builtin.processes.list():
        if info.running:  # not reaped yet, so the group id is still this one's
            with contextlib.suppress(OSError):
                os.killpg(info.pid, signal.SIGKILL)


def force_exit(framework: Any, signum: int, line: str, stream: TextIO | None = None) -> None:
    """End the process now with status 128 + `signum`: background process groups first,
    then `line` on `stream` (stderr by default) and flushed output.

    Writing may block (a full pipe, a stream lock held by a blocked thread), so a backstop
    timer exits without output one second later whatever happens here."""
    code = 128 + signum
    backstop = threading.Timer(1.0, os._exit, (code,))
    backstop.daemon = True
    backstop.start()
    with contextlib.suppress(Exception):  # best effort: the exit below must happen
        kill_background_groups(framework)
    with contextlib.suppress(Exception):
        print(line, file=stream or sys.stderr)
    for output in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            output.flush()
    os._exit(code)


@contextlib.contextmanager
def watch_held_loop(framework: Any, line: Callable[[int], str],
                    stream: TextIO | None = None) -> Iterator[Callable[[], None]]:
    """While the block runs (inside the task's signal receiver): a SIGINT or SIGTERM that
    the task has not taken `HELD_SECONDS` after it came ends the process (`force_exit`,
    with `line(signum)`). Yields `taken`, which the task calls for each signal it takes.

    The handler runs on the main thread between two bytecodes, also while a blocking
    call there waits (Python retries it after the handler), and only arms a timer: the
    timer's thread ends the process, whatever the main thread is doing then."""
    waiting: list[threading.Timer] = []
    previous: dict[int, Any] = {signum: signal.getsignal(signum) for signum in SIGNALS}

    def taken() -> None:
        while waiting:
            waiting.pop().cancel()

    def on_signal(signum: int, frame: Any) -> None:
        if not waiting:
            timer = threading.Timer(HELD_SECONDS, force_exit,
                                    (framework, signum, line(signum), stream))
            timer.daemon = True
            waiting.append(timer)
            timer.start()
        handler = previous[signum]
        if callable(handler):  # the event loop's own (it is told through its wake-up fd)
            handler(signum, frame)

    for signum in SIGNALS:
        signal.signal(signum, on_signal)
    try:
        yield taken
    finally:
        taken()
        for number, handler in previous.items():
            if signal.getsignal(number) is on_signal:
                signal.signal(number, handler)
