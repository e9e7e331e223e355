"""hookline settings: a config file in the hookline home, overridden by `HOOKLINE_*`
environment variables. docs/configuration.md lists every setting and its rules; this
package does not restate them.

Each setting is written once, as a field of `Settings` (table.py): its name, type and
default, with how a value is parsed and what an error says in the field's metadata; its
environment variable is `HOOKLINE_` + the key upper-cased. The other modules each do one
job: parsers.py checks values, load.py resolves the file and the environment,
file.py reads and writes the config file, toml.py is the small TOML writer, limits.py
holds the size limits every channel enforces. Names are imported on first use.
"""

from __future__ import annotations

from hookline.kernel._lazy import LazyExports as _LazyExports

_PUBLIC = {
    "file": ("MAX_CONFIG_BYTES", "config_lock", "default_home", "merge_config", "parse_toml",
             "read_config_file", "update_config", "write_config"),
    "limits": ("CONTEXT_WINDOW", "MAX_EDIT_BYTES", "MAX_REQUEST_TOOLS", "MAX_SESSION_ID_LENGTH",
               "SESSION_FIELDS", "check_session_fields", "session_id_problem"),
    "load": ("load_settings", "parse_setting", "settings_from_config"),
    "parsers": ("API_FORMATS", "APPROVAL_POLICIES", "MIN_HTTP_TOKEN_LENGTH", "SANDBOX_MODES",
                "TOOL_ENV_MODES", "ModelPrice"),
    "table": ("DEFAULT_DENY_READ", "DEFAULT_HTTP_BODY_TIMEOUT", "DEFAULT_HTTP_HOST",
              "DEFAULT_HTTP_PORT", "DEFAULT_HTTP_TIMEOUT", "DEFAULT_MAX_FILE_BYTES",
              "DEFAULT_MAX_PROCESSES", "DEFAULT_MAX_STEPS", "DEFAULT_PROTECT", "Settings",
              "SettingsError", "misplaced_settings", "setting_env"),
    "toml": ("dumps_toml", "rewritten"),
}
"""Module (relative to this package) -> the public names it defines."""

_exports = _LazyExports(globals(), _PUBLIC)
__getattr__ = _exports.getattr
__dir__ = _exports.dir
