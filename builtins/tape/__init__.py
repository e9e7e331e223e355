"""Session tapes: the Tape API, the fork store of a run, context building for the model,
archives, the tape tools, and sessions as the user sees them (docs/tapes.md).

Names are imported on first use."""

from __future__ import annotations

from hookline.kernel._lazy import LazyExports as _LazyExports

_PUBLIC = {
    "tape": ("BOOTSTRAP_ANCHOR", "Tape"),
    "naming": ("session_tape_name", "should_merge_back"),
    "summary": ("AnchorInfo", "TapeInfo"),
    "fork": ("COMMIT_OBSERVER", "ForkStore", "TapeRecordError", "observed_commit"),
    "context": ("RESUMES", "STEERED", "ContextMessages", "answered_calls",
                "messages_from_entries", "starts_turn"),
    "kept": ("KEPT_CONTEXTS", "KEPT_ENTRIES", "KeptContext", "kept_context"),
    "archive": ("archive_session", "delete_session", "file_safe", "write_archive"),
    "spill": ("SPILL_EVENT", "SPILL_READ_TOOLS", "SPILL_SIDECAR", "SpillSidecar", "find_spill",
              "spill_result"),
    "tools": ("SEARCH_LIMIT_MAX", "SPILL_READ_MAX", "spill_tools", "tape_tools"),
    "sessions": ("CURRENT_SESSIONS_FILE", "DEFAULT_SESSION", "MAX_CURRENT_SESSIONS", "MAX_TITLE",
                 "TITLE_EVENT", "SessionError", "SessionMatch", "SessionSummary",
                 "checked_title", "current_session", "find_session", "last_turns",
                 "list_sessions", "local_date", "new_session_id", "one_line", "rename_session",
                 "search_sessions", "set_current_session", "transcript"),
}
"""Module (relative to this package) -> the public names it defines."""

_exports = _LazyExports(globals(), _PUBLIC)
__getattr__ = _exports.getattr
__dir__ = _exports.dir
