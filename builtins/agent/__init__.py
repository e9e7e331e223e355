"""The agent loop: model steps, tool calls and interception as one event stream, with the
spill sidecar, the steering inbox, the notes on how tool calls ran, and what the terminal
shows of a turn (tool lines, diffs, token usage) (docs/builtins.md).

Names are imported on first use (`tool_notes` is standard library only: the command line
reads it at start-up)."""

from __future__ import annotations

from hookline.kernel._lazy import LazyExports as _LazyExports

_PUBLIC = {
    "loop": ("Agent", "AgentConfig"),
    "markdown_view": ("markdown_text", "render_markdown"),
    "spill": ("SPILL_EVENT", "SPILL_READ_TOOLS", "SPILL_SIDECAR", "SpillSidecar", "find_spill",
              "spill_result"),
    "steering": ("DEFAULT_KEY", "InMemorySteeringInbox", "steering_key"),
    "tool_notes": ("call_line", "is_terminal", "result_lines", "terminal_text", "tool_notes",
                   "turn_note"),
    "tool_view": ("FILE_TOOLS", "OUTPUT_LINES", "FileChanges", "ToolView", "colour_allowed",
                  "render_diff", "wants_colour"),
    "usage": ("UsageTotals", "add_usage", "meter_line", "token_counts"),
}
"""Module (relative to this package) -> the public names it defines."""

_exports = _LazyExports(globals(), _PUBLIC)
__getattr__ = _exports.getattr
__dir__ = _exports.dir
