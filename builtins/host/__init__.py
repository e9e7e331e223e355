"""The host the tools act on: the local environment, regular files, processes and their
table, background shells, the builtin tools, and the Landlock sandbox with the filtered
environment every tool process gets (docs/security.md).

Names are imported on first use."""

from __future__ import annotations

from hookline.kernel._lazy import LazyExports as _LazyExports

_PUBLIC = {
    "environment": ("LocalEnvironment",),
    "files": ("FileTooLarge", "LineSlice", "ReadBudget", "file_start", "is_inside",
              "open_regular_file", "open_single_link", "read_file", "read_file_lines",
              "read_line_slice", "write_file"),
    "commands": ("CommandResult", "run_command"),
    "processes": ("KILL_WAIT", "POSIX", "STOP_GRACE", "LocalProcess", "open_local_process",
                  "stop_processes"),
    "background": ("BackgroundInfo", "BackgroundProcesses"),
    "records": ("OWNER_ENV", "ProcessRecord", "end_leftovers", "open_record"),
    "tools": ("MAX_OUTPUT", "MAX_READ_CHARS", "builtin_tools"),
    "sandbox": ("Confinement", "SandboxPolicy", "check_exposure", "private_temp_root"),
    "protection": ("MadeWatch", "in_repository", "protected_paths", "to_protect",
                   "watch_for"),
    "toolenv": ("DEFAULT_DROP", "EnvironmentPolicy"),
    "instructions": ("AGENTS_FILE", "MAX_AGENTS_BYTES", "MAX_AGENTS_TOTAL",
                     "WorkspaceInstructions", "agents_places", "read_agents_files"),
}
"""Module (relative to this package) -> the public names it defines."""

_exports = _LazyExports(globals(), _PUBLIC)
__getattr__ = _exports.getattr
__dir__ = _exports.dir
