"""`hookline run --json`: the turn as JSON lines on stdout, one event per line, for
scripts (the schema is documented in docs/cli.md, "JSON output"; `codex exec --json` is
the model). Each object has `type` and `version`; stdout carries nothing else, and
warnings, the `error:` line and `--usage` stay on stderr."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Iterator
from typing import Any, NoReturn, TextIO

from hookline.kernel.events import RunStarted
from hookline.kernel.streaming import StreamEvent

from .output import StatusLine, TurnPrinter, error_text, fail, json_text, replies

__all__ = ["JSON_VERSION", "JsonPrinter", "stdout_for_json"]

JSON_VERSION = 1
"""The schema's version: raised when a field changes meaning or goes away (new fields
and new event types may come without it)."""


@contextlib.contextmanager
def stdout_for_json() -> Iterator[TextIO]:
    """stdout for the JSON lines alone, while the block runs: a stream of its own on a
    copy of stdout's file, and file descriptor 1 pointed at stderr, so that what a
    plugin's child process or its `os.write(1, ...)` prints goes there, not among the
    objects (Python's own `print` is redirected apart). Put back after. The process's
    stdout as it is when it is no stream on descriptor 1 (a capture, in a test)."""
    try:
        sys.stdout.flush()
        if sys.stdout.fileno() != 1:
            raise io.UnsupportedOperation
        copy = os.dup(1)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        yield sys.stdout
        return
    try:
        os.dup2(sys.stderr.fileno(), 1)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        os.close(copy)
        yield sys.stdout
        return
    out = os.fdopen(copy, "w", encoding=sys.stdout.encoding, errors=sys.stdout.errors,
                    closefd=False)
    try:
        yield out
    finally:
        with contextlib.suppress(OSError, ValueError):
            out.flush()
        os.dup2(copy, 1)
        os.close(copy)


class JsonPrinter(TurnPrinter):
    """The router of `run --json`: each event the turn streams as one JSON object (text
    deltas only with `stream`), then the reply; a failure as an `error` object before the
    usual `error:` line."""

    def __init__(self, stream: bool, out: Any = None, **options: Any) -> None:
        super().__init__(stream, out, StatusLine(enabled=False), **options)
        self.started = False

    def run_started(self, event: RunStarted) -> None:
        """The `start` object, once, when the agent starts the turn's run: the session and
        the model, before anything else is said (a script can note the session even if
        the turn never ends)."""
        if not self.started:
            self.started = True
            self.emit("start", session_id=(event.state or {}).get("session_id"),
                      model=event.model)

    def emit(self, kind: str, **fields: Any) -> None:
        self.out.write(json_text({"type": kind, "version": JSON_VERSION, **fields},
                                 self.out) + "\n")
        self.out.flush()

    async def show(self, event: StreamEvent) -> None:
        data = event.data
        if event.kind == "text" and self.stream and data.get("delta"):
            self.emit("text", delta=str(data["delta"]))
        elif event.kind == "tool_call":
            for call in data.get("tool_calls") or []:
                self.emit("tool_call", id=call.get("id"), name=call.get("name"),
                          arguments=_arguments(call.get("arguments")))
        elif event.kind == "tool_result":
            for record in data.get("tool_results") or []:
                failed = record.get("is_error")
                self.emit("tool_result", id=record.get("call_id"), name=record.get("name"),
                          outcome=record.get("outcome") or ("failed" if failed else "ran"),
                          output=record.get("output"), error=record.get("error"))
        elif event.kind == "usage":
            from hookline.builtins.agent import token_counts

            counts = token_counts(data.get("usage"))
            if counts is not None:
                self.emit("usage", model=data.get("model"), **counts)
        elif event.kind == "retry":
            self.emit("retry", **{key: data.get(key)
                                  for key in ("reason", "wait", "attempt", "attempts")})
        elif event.kind == "compaction":
            self.emit("compaction", **{key: data.get(key)
                                       for key in ("reason", "tokens_before", "tokens_after",
                                                   "summary_chars")})

    def print_reply(self, result: Any) -> None:
        for content in replies(result) or [""]:  # an empty reply is said as one
            self.emit("reply", content=content, session_id=result.session_id)

    def fail(self, error: BaseException, status: int = 1) -> NoReturn:
        self.emit("error", message=error_text(error))
        fail(error, status)


def _arguments(arguments: Any) -> Any:
    """A call's arguments as JSON (an object), or the model's text when it sent no JSON."""
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return arguments
