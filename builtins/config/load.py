"""Resolving settings: the config file's values, then the environment's over them, each
parsed by its row of the table; a bad value is a `SettingsError` naming the key, where it
came from, the value and the fix."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .file import default_home, read_config_file
from .parsers import Invalid, list_of, model_spec
from .parsers import aliases as alias_table
from .table import (
    BY_KEY,
    CONFIG_NAME,
    SPECS,
    Settings,
    SettingsError,
    Spec,
    misplaced_settings,
    shown,
)

__all__ = ["load_settings", "parse_setting", "settings_from_config"]


def _known_aliases(data: Mapping[str, Any], env: Mapping[str, str],
                   config_path: Path) -> dict[str, str]:
    """The aliases the file and the environment define, read before the model settings
    that may use them: a bad table is named as such, not as a model naming a good one."""
    spec = BY_KEY["model_aliases"]
    from_env = env.get(spec.env, "").strip()
    raw = from_env or data.get("model_aliases")
    try:
        return alias_table(raw) if raw else {}
    except Invalid as exc:
        if from_env:
            raise _env_error(spec, from_env, exc.near) from None
        raise _file_error(spec, raw, config_path, exc.near) from None


def _with_aliases(spec: Spec, aliases: Mapping[str, str]) -> Callable[[Any], Any]:
    """`spec.parse`, where the model settings also accept a name of `model_aliases`."""
    def model(value: Any) -> str:
        return value.strip() if isinstance(value, str) and value.strip() in aliases \
            else model_spec(value)

    if spec.key == "model":
        return model
    if spec.key == "fallback_models":
        return lambda value: list_of(value, model)
    return spec.parse


def _env_error(spec: Spec, value: str, near: str = "") -> SettingsError:
    meant = f" Did you mean {near!r}?" if near else ""
    return SettingsError(
        f"{spec.env} must be {spec.expected}, got {shown(value, spec.key)} "
        f"(from the environment variable {spec.env}).{meant} "
        f"Fix: set {spec.env}={near or spec.env_example}, or unset it.",
        key=spec.key,
        source=f"env:{spec.env}",
        value=value,
    )


def _file_error(spec: Spec, value: Any, path: Path, near: str = "") -> SettingsError:
    # A table setting ([model_aliases]) holding a setting's name: a line written below it.
    below = misplaced_settings(value) if isinstance(value, dict) else ""
    example = f'"{near}"' if near else spec.file_example
    fix = (f"Fix: {below.removeprefix('; ')}." if below else
           f"Fix: write {spec.key} = {example} in {path}, or remove the line "
           f"(the environment variable {spec.env} overrides it).")
    meant = f"Did you mean {near!r}? " if near else ""
    return SettingsError(
        f"{spec.key} must be {spec.expected}, got {shown(value, spec.key)} (from {path}). "
        f"{meant}{fix}",
        key=spec.key,
        source=f"file:{path}",
        value=value,
    )


def load_settings(
    environ: Mapping[str, str] | None = None, home: str | os.PathLike[str] | None = None
) -> Settings:
    """Read `<home>/config.toml`, then apply `HOOKLINE_*` variables from `environ`.

    `environ` defaults to `os.environ`; `home` overrides `HOOKLINE_HOME`.
    """
    env = os.environ if environ is None else environ
    home_path = Path(home).expanduser().absolute() if home is not None else default_home(env)
    return settings_from_config(read_config_file(home_path / CONFIG_NAME), env, home_path)


def settings_from_config(
    data: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    home: str | os.PathLike[str] | None = None,
) -> Settings:
    """The settings `data` would give as `<home>/config.toml`, with `environ` applied:
    what `load_settings` does after reading the file, for a config not written yet."""
    env = os.environ if environ is None else environ
    home_path = Path(home).expanduser().absolute() if home is not None else default_home(env)
    config_path = home_path / CONFIG_NAME

    values: dict[str, Any] = {}
    sources: dict[str, str] = {spec.key: "default" for spec in SPECS}
    extra: dict[str, Any] = {}
    aliases = _known_aliases(data, env, config_path)
    for key, raw in data.items():
        spec = BY_KEY.get(key)
        if spec is None:
            if isinstance(raw, dict) or _array_of_tables(raw):  # [mcp_servers], [[rules]]
                extra[key] = raw
                continue
            import difflib  # only for a key that is not a setting

            close = difflib.get_close_matches(key, list(BY_KEY), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise SettingsError(
                f"Unknown setting {key!r} in {config_path}.{hint} "
                f"Known settings: {', '.join(BY_KEY)}. Fix: rename or remove it.",
                key=key,
                source=f"file:{config_path}",
                value=raw,
            )
        if spec.blank_unset and isinstance(raw, str) and not raw.strip():
            continue
        try:
            parsed = _with_aliases(spec, aliases)(raw)
        except Invalid as exc:
            raise _file_error(spec, raw, config_path, exc.near) from None
        if spec.path and isinstance(parsed, Path) and not parsed.is_absolute():
            parsed = home_path / parsed
        values[spec.key] = parsed
        sources[spec.key] = f"file:{config_path}"

    for spec in SPECS:
        raw_env = env.get(spec.env)
        if raw_env is None or not raw_env.strip():
            continue
        try:
            parsed = _with_aliases(spec, aliases)(raw_env)
        except Invalid as exc:
            raise _env_error(spec, raw_env, exc.near) from None
        if spec.path and isinstance(parsed, Path):
            parsed = parsed.absolute()
        values[spec.key] = parsed
        sources[spec.key] = f"env:{spec.env}"

    _check_tls_pair(values, sources)
    return Settings(home=home_path, sources=sources, extra=extra, **values)


def parse_setting(key: str, value: Any) -> Any:
    """One setting's value parsed as the file would be (a relative path stays relative),
    or a SettingsError saying what the key expects; for checking an answer on its own."""
    spec = BY_KEY.get(key)
    if spec is None:
        raise SettingsError(f"Unknown setting {key!r}. Known settings: {', '.join(BY_KEY)}.",
                            key=key, source="value", value=value)
    try:
        return spec.parse(value)
    except Invalid:
        raise SettingsError(f"{key} must be {spec.expected}, got {shown(value, key)}",
                            key=key, source="value", value=value) from None


def _array_of_tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _check_tls_pair(values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
    """A certificate without its key (or the reverse) is a half-done TLS setup: refuse it
    rather than silently serve plain HTTP."""
    given = [key for key in ("http_certfile", "http_keyfile") if key in values]
    if len(given) == 1:
        missing = "http_keyfile" if given[0] == "http_certfile" else "http_certfile"
        raise SettingsError(
            f"{given[0]} is set ({sources[given[0]]}) but {missing} is not: HTTPS needs both "
            f"the certificate chain and its private key. Fix: set {missing} (or "
            f"{BY_KEY[missing].env}), or remove {given[0]}.",
            key=missing,
            source=sources[given[0]],
        )
