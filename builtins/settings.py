"""hookline settings, under the name code and plugins import: the package
`hookline.builtins.config` holds them (see docs/configuration.md)."""

from __future__ import annotations

from .config import (
    API_FORMATS,
    BUSY_SESSION_ACTIONS,
    DEFAULT_HTTP_BODY_TIMEOUT,
    DEFAULT_HTTP_HOST,
    DEFAULT_HTTP_PORT,
    DEFAULT_HTTP_TIMEOUT,
    DEFAULT_MAX_STEPS,
    MAX_CONFIG_BYTES,
    MIN_HTTP_TOKEN_LENGTH,
    SANDBOX_MODES,
    TOOL_ENV_MODES,
    Settings,
    SettingsError,
    default_home,
    dumps_toml,
    load_settings,
    merge_config,
    parse_setting,
    read_config_file,
    settings_from_config,
    update_config,
    write_config,
)

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
