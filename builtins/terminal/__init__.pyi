"""The public names of this package, for type checkers (which do not see its lazy
imports).

Generated from the table of its ``__init__.py`` by the kernel's ``_generate.py``
(``python -m hookline.kernel._generate hookline.testing hookline.builtins``):
edit the table, never this file.
"""

from .markdown_view import markdown_text as markdown_text
from .markdown_view import render_markdown as render_markdown
from .tool_notes import call_line as call_line
from .tool_notes import is_terminal as is_terminal
from .tool_notes import result_lines as result_lines
from .tool_notes import retry_status as retry_status
from .tool_notes import terminal_text as terminal_text
from .tool_notes import tool_notes as tool_notes
from .tool_notes import turn_note as turn_note
from .tool_view import FILE_TOOLS as FILE_TOOLS
from .tool_view import OUTPUT_LINES as OUTPUT_LINES
from .tool_view import FileChanges as FileChanges
from .tool_view import ToolView as ToolView
from .tool_view import colour_allowed as colour_allowed
from .tool_view import render_diff as render_diff
from .tool_view import wants_colour as wants_colour
from .usage import UsageTotals as UsageTotals
from .usage import meter_line as meter_line
