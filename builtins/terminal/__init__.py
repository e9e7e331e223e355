"""What a person sees of a turn in a terminal: a line per tool call and its result, file
changes as diffs, Markdown replies, token usage and cost, and how full the context is
(docs/cli.md). Used by the cli channel and by `hookline run` and `chat`.

Names are imported on first use (`tool_notes` is standard library only: the command line
reads it at start-up)."""

from __future__ import annotations

from hookline.kernel._lazy import LazyExports as _LazyExports

_PUBLIC = {
    "markdown_view": ("markdown_text", "render_markdown"),
    "tool_notes": ("call_line", "is_terminal", "result_lines", "retry_status", "terminal_text",
                   "tool_notes", "turn_note"),
    "tool_view": ("FILE_TOOLS", "OUTPUT_LINES", "FileChanges", "ToolView", "colour_allowed",
                  "render_diff", "wants_colour"),
    "usage": ("UsageTotals", "meter_line"),
}
"""Module (relative to this package) -> the public names it defines."""

_exports = _LazyExports(globals(), _PUBLIC)
__getattr__ = _exports.getattr
__dir__ = _exports.dir
