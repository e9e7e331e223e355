"""What hookline keeps from others: private files and folders (0700/0600) and the redaction
of credentials and paths from text that leaves the process (docs/security.md).

Names are imported on first use."""

from __future__ import annotations

from hookline.kernel._lazy import LazyExports as _LazyExports

_PUBLIC = {
    "files": ("HOME_ENV", "PRIVATE_DIR_MODE", "PRIVATE_FILE_MODE", "create_private_file",
              "make_private_dir", "process_umask", "replacing_private_file", "secure_home",
              "secure_store", "shared_secret_problem", "tighten", "write_private_file"),
    "redact": ("redact_command_line", "redact_credentials", "redact_paths", "replace_values",
               "url_secrets"),
}
"""Module (relative to this package) -> the public names it defines."""

_exports = _LazyExports(globals(), _PUBLIC)
__getattr__ = _exports.getattr
__dir__ = _exports.dir
