"""Plugin failures as the command line shows them: one line naming plugin, hook and
function, so a user sees which plugin to fix without reading a log.

An agent hook that raises is isolated by the contract (the turn goes on) and logged by the
kernel as `hook.agent_hook_failed`; a turn hook that raises fails the turn. Both reach the
user here as one line; `-v` adds the traceback.
"""

import contextlib
import logging
import os
import traceback
from collections.abc import Iterator
from types import CodeType, TracebackType
from typing import Any

from hookline.kernel import Framework
from hookline.kernel.framework import BUILTIN_NAME, DISABLE_ENV

__all__ = ["AGENT_HOOK_LOG", "innermost", "kernel_warnings", "names_the_builtin",
           "plugin_exit", "plugin_failure_line", "turn_failure_blame", "with_blame"]

AGENT_HOOK_LOG = "hookline.kernel.framework.agent_hooks"
"""The kernel's logger for isolated agent hook failures and ignored results."""
DISPATCH_LOG = "hookline.kernel.runtime"
"""The kernel's logger for isolated observers' failures and skipped awaitables."""


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def kernel_warnings() -> Iterator[list[logging.LogRecord]]:
    """The dispatch's warnings during the block, kept for the caller to say in its own
    words instead of logged: before a command sets up the log, Python would print them
    raw."""
    log, kept = logging.getLogger(DISPATCH_LOG), _Kept()
    log.addHandler(kept)
    propagate, log.propagate = log.propagate, False
    try:
        yield kept.records
    finally:
        log.removeHandler(kept)
        log.propagate = propagate


def plugin_failure_line(record: logging.LogRecord, *, verbose: bool) -> str | None:
    """The line for an agent hook's failure or ignored result, else None."""
    message = str(record.msg)
    args = record.args if isinstance(record.args, tuple) else ()
    if message.startswith("hook.agent_hook_failed") and len(args) >= 2:
        hook, plugin = args[0], args[1]
        error = record.exc_info[1] if record.exc_info else None
        what = f"{type(error).__name__} {error}" if error is not None else "an error"
        line = f"plugin {plugin!r} {hook} failed: {what}{_where(error)}"
        if verbose and record.exc_info and record.exc_info[0] is not None:
            return line + "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
        return line + "; -v for details"
    if message.startswith("hook.agent_hook_bad_return") and len(args) >= 4:
        hook, plugin, got, expected = args[:4]
        note = args[4] if len(args) > 4 else ""
        return (f"plugin {plugin!r} {hook} returned {got}{note} where {expected} is expected: "
                f"ignored")
    return None


def turn_failure_blame(framework: Framework, error: BaseException) -> str | None:
    """`raised by plugin 'p', function 'f' (file:line), hook h` for an error raised inside
    a hook implementation, found from the traceback; None when no implementation is in it."""
    owners: dict[CodeType, Any] = {}
    for hook in framework.registry.hook_names():
        for impl in framework.registry.hook_impls(hook):
            code = getattr(impl.function, "__code__", None)
            if code is not None:
                owners.setdefault(code, impl)
    found: Any = None
    tb: TracebackType | None = error.__traceback__
    while tb is not None:  # outermost to innermost: keep the innermost implementation
        found = owners.get(tb.tb_frame.f_code, found)
        tb = tb.tb_next
    if found is None:
        return None
    fix = (f"; fix the plugin, or run without it: {DISABLE_ENV}={found.plugin_name}"
           if found.plugin_name != BUILTIN_NAME else "")
    return f"raised by {found.describe()}, hook {found.hook_name}{fix}"


def plugin_exit(framework: Framework, ended: SystemExit) -> RuntimeError:
    """A plugin's `sys.exit()` inside a hook, as the turn's failure: the plugin wanted to
    stop, and its code is no status of hookline's."""
    error = RuntimeError(f"a plugin called sys.exit({ended.code!r}) inside a hook: the turn "
                         f"stopped there")
    blame = turn_failure_blame(framework, ended)
    if blame is not None:
        error.add_note(blame)
    return error


def names_the_builtin(note: object) -> bool:
    """A blame note that names hookline's own builtin plugin (no news to the user when the
    error itself says what to fix)."""
    return str(note).startswith(f"raised by plugin {BUILTIN_NAME!r}")


def innermost(error: BaseException) -> BaseException:
    """The single exception inside nested one-member exception groups (task groups)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def with_blame(framework: Framework, error: BaseException) -> BaseException:
    """`error`, its innermost exception noted with the hook implementation that raised it
    when no note names one yet (the kernel notes resource failures itself)."""
    inner = innermost(error)
    notes = getattr(inner, "__notes__", ())
    if not any(str(note).startswith("raised by") for note in notes):
        blame = turn_failure_blame(framework, inner)
        if blame is not None:
            inner.add_note(blame)
    return error


def _where(error: BaseException | None) -> str:
    """` (file.py:12)`: the innermost Python frame of the error, most often the plugin's."""
    if error is None or error.__traceback__ is None:
        return ""
    frame = traceback.extract_tb(error.__traceback__)[-1]
    return f" ({os.path.basename(frame.filename)}:{frame.lineno})"
