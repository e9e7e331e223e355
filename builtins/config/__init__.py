"""hookline settings: a config file in the hookline home, overridden by `HOOKLINE_*`
environment variables. docs/configuration.md lists every setting and its rules; this
package does not restate them.

Each setting is written once, as a field of `Settings` (table.py): its name, type and
default, with how a value is parsed and what an error says in the field's metadata; its
environment variable is `HOOKLINE_` + the key upper-cased. The other modules each do one
job: parsers.py checks values, load.py resolves the file and the environment,
file.py reads and writes the config file, toml.py is the small TOML writer.
"""

from __future__ import annotations

from .file import (
    MAX_CONFIG_BYTES,
    default_home,
    merge_config,
    read_config_file,
    update_config,
    write_config,
)
from .load import load_settings, parse_setting, settings_from_config
from .parsers import (
    API_FORMATS,
    BUSY_SESSION_ACTIONS,
    MIN_HTTP_TOKEN_LENGTH,
    SANDBOX_MODES,
    TOOL_ENV_MODES,
    ModelPrice,
)
from .table import (
    DEFAULT_HTTP_BODY_TIMEOUT,
    DEFAULT_HTTP_HOST,
    DEFAULT_HTTP_PORT,
    DEFAULT_HTTP_TIMEOUT,
    DEFAULT_MAX_STEPS,
    Settings,
    SettingsError,
)
from .toml import dumps_toml

__all__ = [
    "API_FORMATS",
    "BUSY_SESSION_ACTIONS",
    "DEFAULT_HTTP_BODY_TIMEOUT",
    "DEFAULT_HTTP_HOST",
    "DEFAULT_HTTP_PORT",
    "DEFAULT_HTTP_TIMEOUT",
    "DEFAULT_MAX_STEPS",
    "MAX_CONFIG_BYTES",
    "MIN_HTTP_TOKEN_LENGTH",
    "SANDBOX_MODES",
    "TOOL_ENV_MODES",
    "ModelPrice",
    "Settings",
    "SettingsError",
    "default_home",
    "dumps_toml",
    "load_settings",
    "merge_config",
    "parse_setting",
    "read_config_file",
    "settings_from_config",
    "update_config",
    "write_config",
]
