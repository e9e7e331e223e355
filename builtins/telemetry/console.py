"""`hookline run --trace`: the turn's spans as an indented tree on stderr, no collector.

The quickest way for a plugin author to see what ran: every hook dispatch with its
implementations and the one that answered, each model call with its tokens, each tool
call with its outcome, and how long each took.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TextIO

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import StatusCode

from .setup import Telemetry

__all__ = ["ConsoleTrace"]


class SpanTree(SpanProcessor):
    """Keeps every finished span, in the order they end."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class ConsoleTrace:
    """Telemetry installed on a framework for one command, printed when it ends."""

    def __init__(self, framework: Any) -> None:
        self.tree = SpanTree()
        self.telemetry = Telemetry(span_processors=[self.tree])
        self.telemetry.install(framework)

    def finish(self, out: TextIO) -> None:
        """Uninstall, export what other processors hold (`otel` on too), print the tree."""
        self.telemetry.uninstall()
        self.telemetry.shutdown()
        text = format_tree(self.tree.spans)
        out.write(text + "\n" if text else "trace: no spans were recorded\n")
        out.flush()


def format_tree(spans: Sequence[ReadableSpan]) -> str:
    """One line per span, children indented under their parent, in start order."""
    known = {span.context.span_id for span in spans if span.context is not None}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda item: item.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent if parent in known else None, []).append(span)
    lines: list[str] = []

    def walk(span: ReadableSpan, depth: int) -> None:
        duration = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        details = describe(span)
        label = f"{'  ' * depth}{span.name}"
        lines.append(f"{label:<48} {duration:9.3f} ms{'  ' + details if details else ''}")
        if span.context is not None:
            for child in children.get(span.context.span_id, ()):
                walk(child, depth + 1)

    for root in children.get(None, ()):
        walk(root, 0)
    return "\n".join(lines)


def describe(span: ReadableSpan) -> str:
    """The attributes worth a glance: who ran and answered, tokens, outcomes, failures."""
    a: dict[str, Any] = dict(span.attributes or {})
    parts: list[str] = []
    if "hookline.hook.implementations" in a:
        parts.append("[" + ", ".join(str(p) for p in a["hookline.hook.implementations"])
                     + "]")
    if "hookline.hook.answered_by" in a:
        parts.append(f"answered by {a['hookline.hook.answered_by']}")
    if "hookline.hook.failed_plugin" in a:
        parts.append(f"FAILED in {a['hookline.hook.failed_plugin']}")
    if "hookline.session.id" in a:
        parts.append(f"session {a['hookline.session.id']}")
    if "hookline.turn.outcome" in a:
        parts.append(str(a["hookline.turn.outcome"]))
    if "gen_ai.usage.input_tokens" in a:
        parts.append(f"tokens in {a['gen_ai.usage.input_tokens']} "
                     f"out {a.get('gen_ai.usage.output_tokens', 0)}")
    if "gen_ai.response.finish_reasons" in a:
        parts.append("finish " + ",".join(str(r) for r in a["gen_ai.response.finish_reasons"]))
    if "hookline.tool.outcome" in a:
        parts.append(f"{a['hookline.tool.outcome']} (call {a.get('gen_ai.tool.call.id', '')})")
    if "hookline.approval.decision" in a:
        rule = f", {a['hookline.approval.rule']}" if "hookline.approval.rule" in a else ""
        parts.append(f"{a['hookline.approval.decision']} by {a['hookline.approval.by']}{rule}")
    if span.status.status_code is StatusCode.ERROR and span.status.description:
        parts.append(f"error: {span.status.description}")
    return " ".join(parts)
