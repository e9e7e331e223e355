"""hookline settings: a config file in the hookline home, overridden by environment variables.

Home directory: `HOOKLINE_HOME`, default `~/.hookline`. Config file: `<home>/config.toml`
(optional). Every setting can be given in the file (key) or the environment (variable);
the environment wins. An empty environment variable counts as unset.

Settings (file key / environment variable: value; default):

- model / HOOKLINE_MODEL: `provider:model`, `offline` or `scripted:<path>`; offline.
- fallback_models / HOOKLINE_FALLBACK_MODELS: list of specs (comma separated in the
  environment), offered as alternatives; none.
- api_key / HOOKLINE_API_KEY: key for the provider; republic's REPUBLIC_<PROVIDER>_API_KEY.
- api_key_env / HOOKLINE_API_KEY_ENV: the name of an environment variable holding the key,
  read when the model is opened and used when api_key is unset (so the file need not hold
  the secret); an empty or unset variable is then an error; none.
- api_base / HOOKLINE_API_BASE: http(s) URL of the provider endpoint; the provider's.
- api_format / HOOKLINE_API_FORMAT: chat, responses, messages or gemini; the provider's.
- max_steps / HOOKLINE_MAX_STEPS: positive integer, model calls per run; 20.
- max_tokens / HOOKLINE_MAX_TOKENS: positive integer, output tokens per call; the provider's.
- tape_store / HOOKLINE_TAPE_STORE: path of the SQLite tape store, or a `postgresql://`
  (or `postgres://`) URL of a PostgreSQL database shared by gateway replicas (needs
  `pip install 'hookline[postgres]'`); `<home>/tapes.db`.
- stream / HOOKLINE_STREAM: true/false, show replies as they arrive; true.
- http_host / HOOKLINE_HTTP_HOST: address the `http` channel listens on; 127.0.0.1.
- http_port / HOOKLINE_HTTP_PORT: its TCP port, 0 to 65535 (0: any free port); 8787.
- http_timeout / HOOKLINE_HTTP_TIMEOUT: positive number of seconds an HTTP request waits
  for its reply before answering 504; 300.
- http_body_timeout / HOOKLINE_HTTP_BODY_TIMEOUT: positive number of seconds a client has
  to send a whole request body before answering 408; 30.
- http_busy_session / HOOKLINE_HTTP_BUSY_SESSION: what the `http` channel does with a
  message for a session whose turn is still running: follow_up (run it next), process
  (run it now, concurrently), steer (feed it into the running turn) or drop; follow_up.
- http_token / HOOKLINE_HTTP_TOKEN: the bearer token HTTP clients must send (at least 32
  printable characters, no spaces); a random one kept in `<home>/http_token` (mode 0600).
- http_auth / HOOKLINE_HTTP_AUTH: true/false, require the token; true. False is refused on
  a non-loopback address and warned about at every start.
- http_allow_remote / HOOKLINE_HTTP_ALLOW_REMOTE: true/false, allow `http_host` to be a
  non-loopback address; false.
- http_allowed_hosts / HOOKLINE_HTTP_ALLOWED_HOSTS: extra names accepted in the `Host`
  header besides the bound address, localhost, 127.0.0.1 and ::1; none.
- http_allowed_origins / HOOKLINE_HTTP_ALLOWED_ORIGINS: browser origins
  (`scheme://host[:port]`) allowed to call the API; none (every request with an `Origin`
  header is refused).
- http_certfile, http_keyfile / HOOKLINE_HTTP_CERTFILE, HOOKLINE_HTTP_KEYFILE: PEM
  certificate chain and private key; with both, the `http` channel serves HTTPS; none.
- channels / HOOKLINE_CHANNELS: channels `hookline gateway` runs: `all` (every channel
  that is not an interface), or a comma list of names (a list in the file); `!name`
  excludes one; all.
- model_aliases / HOOKLINE_MODEL_ALIASES: short names for model specs (a table in the
  file, `name=spec,...` in the environment), usable wherever a model is named; none.
- sandbox / HOOKLINE_SANDBOX: how shell commands are confined (Landlock): read-only,
  workspace-write or off; workspace-write.
- sandbox_network / HOOKLINE_SANDBOX_NETWORK: true/false, let sandboxed commands open TCP
  connections and bind ports; false.
- http_allow_unsandboxed / HOOKLINE_HTTP_ALLOW_UNSANDBOXED: true/false, let a gateway bound
  beyond loopback run with sandbox = off; false.
- tool_env / HOOKLINE_TOOL_ENV: the environment tool processes get: filtered (secrets and
  hookline's own variables removed) or inherit (everything, warned at start); filtered.
- tool_env_keep, tool_env_drop / HOOKLINE_TOOL_ENV_KEEP, HOOKLINE_TOOL_ENV_DROP: name
  patterns (`fnmatch`, any case) a filtered environment keeps even though they look like
  secrets, or drops besides the built-in ones; none.

Booleans accept true/false, yes/no, on/off, 1/0. Lists are comma separated in the
environment. A relative path (`tape_store`, `http_certfile`, `http_keyfile`) is relative to
the home directory in the file and to the working directory in the environment.

The config file must be a regular file of at most 1 MiB (`MAX_CONFIG_BYTES`): a FIFO, a
device or a larger file is refused with a `SettingsError` rather than read; so is one that
group or others can read holding a secret (see `hookline.builtins.private`).

Tables in the config file other than the keys above (for example `[plugins.myplugin]`) are
kept in `Settings.extra` for plugins; an unknown plain key is an error (typos should not
be silently ignored). Invalid values raise `SettingsError`, naming the key, where it came
from, the bad value and the fix.

`settings_from_config(data, environ, home)` resolves a config not yet written (what
`hookline onboard` is about to save) with the same rules, and `parse_setting(key, value)`
checks one value, so callers validate answers without repeating the rules here.

`write_config(path, data)` writes such a file (a small TOML writer for tables of strings,
integers, floats, booleans and lists); `update_config(path, updates)` merges into it
(`merge_config` is that merge, in memory).
"""

from __future__ import annotations

import copy
import difflib
import math
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hookline.kernel.streaming import ErrorKind, HooklineError

from ..private import shared_secret_problem, write_private_file
from ..redact import redact_credentials
from ..storeurl import StoreURL, is_postgres_url

__all__ = [
    "API_FORMATS",
    "BUSY_SESSION_ACTIONS",
    "DEFAULT_HTTP_BODY_TIMEOUT",
    "DEFAULT_HTTP_HOST",
    "DEFAULT_HTTP_PORT",
    "DEFAULT_HTTP_TIMEOUT",
    "DEFAULT_MAX_STEPS",
    "MIN_HTTP_TOKEN_LENGTH",
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

DEFAULT_MAX_STEPS = 20
DEFAULT_HTTP_HOST = "127.0.0.1"
DEFAULT_HTTP_PORT = 8787
DEFAULT_HTTP_TIMEOUT = 300.0
DEFAULT_HTTP_BODY_TIMEOUT = 30.0
MIN_HTTP_TOKEN_LENGTH = 32
BUSY_SESSION_ACTIONS = ("follow_up", "process", "steer", "drop")
SANDBOX_MODES = ("workspace-write", "read-only", "off")
TOOL_ENV_MODES = ("filtered", "inherit")
"""Admission actions the `http_busy_session` setting can name."""
API_FORMATS = ("chat", "responses", "messages", "gemini")
"""Chat wire formats republic 0.6 speaks (`api_format`)."""

_HOME_ENV = "HOOKLINE_HOME"
MAX_CONFIG_BYTES = 1 << 20
"""A larger config file is refused rather than read."""
_CONFIG_NAME = "config.toml"
_TAPES_NAME = "tapes.db"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class SettingsError(HooklineError):
    """An invalid setting (kind `config`); `key`, `source` and `value` say which."""

    def __init__(self, message: str, *, key: str = "", source: str = "", value: Any = None) -> None:
        details = {"key": key, "source": source, "value": _shown(value, key)} if key else None
        super().__init__(ErrorKind.config, message, details)
        self.key = key
        self.source = source
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_settings_error, (self.message, self.key, self.source, self.value))


def _rebuild_settings_error(message: str, key: str, source: str, value: Any) -> SettingsError:
    return SettingsError(message, key=key, source=source, value=value)


@dataclass(frozen=True)
class Settings:
    """Resolved settings (see the module docstring for keys, variables and defaults).

    `sources` tells where each value came from: `default`, `env:<VARIABLE>` or
    `file:<path>`. `extra` holds the config file's other tables, for plugins.
    """

    home: Path
    model: str | None = None
    fallback_models: tuple[str, ...] = ()
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str | None = None
    api_base: str | None = None
    api_format: str | None = None
    max_steps: int = DEFAULT_MAX_STEPS
    max_tokens: int | None = None
    tape_store: Path | str | None = None
    stream: bool = True
    http_host: str = DEFAULT_HTTP_HOST
    http_port: int = DEFAULT_HTTP_PORT
    http_timeout: float = DEFAULT_HTTP_TIMEOUT
    http_body_timeout: float = DEFAULT_HTTP_BODY_TIMEOUT
    http_busy_session: str = "follow_up"
    http_token: str | None = field(default=None, repr=False)
    http_auth: bool = True
    http_allow_remote: bool = False
    http_allowed_hosts: tuple[str, ...] = ()
    http_allowed_origins: tuple[str, ...] = ()
    http_certfile: Path | None = None
    http_keyfile: Path | None = None
    channels: str = "all"
    model_aliases: Mapping[str, str] = field(default_factory=dict)
    sandbox: str = "workspace-write"
    sandbox_network: bool = False
    http_allow_unsandboxed: bool = False
    tool_env: str = "filtered"
    tool_env_keep: tuple[str, ...] = ()
    tool_env_drop: tuple[str, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "home", Path(self.home))
        if self.tape_store is None:
            object.__setattr__(self, "tape_store", self.home / _TAPES_NAME)
        object.__setattr__(self, "fallback_models", tuple(self.fallback_models))
        object.__setattr__(self, "http_allowed_hosts", tuple(self.http_allowed_hosts))
        object.__setattr__(self, "http_allowed_origins", tuple(self.http_allowed_origins))
        object.__setattr__(self, "tool_env_keep", tuple(self.tool_env_keep))
        object.__setattr__(self, "tool_env_drop", tuple(self.tool_env_drop))

    @property
    def config_path(self) -> Path:
        return self.home / _CONFIG_NAME

    @property
    def models(self) -> list[str]:
        """The configured model then the fallbacks, without duplicates (empty if none)."""
        ordered = [self.model, *self.fallback_models] if self.model else list(self.fallback_models)
        return list(dict.fromkeys(self.resolve_model(spec) for spec in ordered if spec))

    @property
    def model_spec(self) -> str:
        """The model to use: the configured one (an alias resolved), else `offline`."""
        return self.resolve_model(self.model or "offline")

    def resolve_model(self, name: str) -> str:
        """The spec an alias of `model_aliases` stands for; any other name as it is."""
        return self.model_aliases.get(name, name)

    def resolved_api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """`api_key`, else the variable `api_key_env` names (read now, not at load time, so
        a key exported later is seen); None when neither is set. A named variable that is
        empty is an error: silently sending no key would fail later, less clearly."""
        if self.api_key:
            return self.api_key
        if not self.api_key_env:
            return None
        env = os.environ if environ is None else environ
        value = env.get(self.api_key_env, "").strip()
        if not value:
            source = self.sources.get("api_key_env", "default")
            raise SettingsError(
                f"api_key_env names the environment variable {self.api_key_env}, which is "
                f"empty or unset (api_key_env from {source.partition(':')[2] or source}). "
                f"Fix: export {self.api_key_env}=<your key>, or set api_key "
                f"(HOOKLINE_API_KEY), or remove api_key_env.",
                key="api_key_env",
                source=source,
                value=self.api_key_env,
            )
        return value


def default_home(environ: Mapping[str, str] | None = None) -> Path:
    """`HOOKLINE_HOME` when set, else `~/.hookline`."""
    env = os.environ if environ is None else environ
    value = env.get(_HOME_ENV, "").strip()
    return Path(value).expanduser().absolute() if value else Path.home() / ".hookline"


# Value parsers: each takes the raw value (a string from the environment, any TOML value
# from the file) and returns the parsed value or raises _Invalid.


class _Invalid(Exception):
    pass


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise _Invalid
    return value.strip()


_ALIAS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
"""A model alias: a bare name, which no `provider:model` spec can be."""


def _model_spec(value: Any) -> str:
    spec = _text(value)
    if spec == "offline" or spec.startswith("offline:"):
        return spec
    provider, sep, model = spec.partition(":")
    if not sep or not provider.strip() or not model.strip() or " " in spec:
        raise _Invalid
    return spec


def _aliases(value: Any) -> dict[str, str]:
    if isinstance(value, str):  # the environment: name=spec,name=spec
        pairs = [item.partition("=") for item in value.split(",") if item.strip()]
        if not all(sep for _, sep, _ in pairs):
            raise _Invalid
        value = {name.strip(): spec.strip() for name, _, spec in pairs}
    if not isinstance(value, dict):
        raise _Invalid
    aliases = {}
    for name, spec in value.items():
        if not isinstance(name, str) or not _ALIAS.fullmatch(name) or name == "offline":
            raise _Invalid
        aliases[name] = _model_spec(spec)  # a spec, never another alias
    return aliases


def _known_aliases(data: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    """The aliases the file and the environment define, read before the model settings
    that may use them (a bad table is reported by the settings loop itself)."""
    raw = env.get("HOOKLINE_MODEL_ALIASES", "").strip() or data.get("model_aliases")
    try:
        return _aliases(raw) if raw else {}
    except _Invalid:
        return {}


def _with_aliases(spec: _Spec, aliases: Mapping[str, str]) -> Callable[[Any], Any]:
    """`spec.parse`, where the model settings also accept a name of `model_aliases`."""
    def model(value: Any) -> str:
        return value.strip() if isinstance(value, str) and value.strip() in aliases \
            else _model_spec(value)

    if spec.key == "model":
        return model
    if spec.key == "fallback_models":
        return lambda value: _list_of(value, model)
    return spec.parse


def _list_of(value: Any, parse: Callable[[Any], str]) -> tuple[str, ...]:
    """A comma-separated string or a list: blank items skipped, each parsed, repeats
    dropped (the first one kept)."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise _Invalid
    return tuple(dict.fromkeys(parse(item) for item in items
                               if not (isinstance(item, str) and not item.strip())))


def _model_list(value: Any) -> tuple[str, ...]:
    return _list_of(value, _model_spec)


def _url(value: Any) -> str:
    url = _text(value)
    if not re.match(r"^https?://[^/\s]+", url):
        raise _Invalid
    return url.rstrip("/")


def _env_name(value: Any) -> str:
    name = _text(value)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise _Invalid
    return name


def _api_format(value: Any) -> str:
    name = _text(value).lower()
    if name not in API_FORMATS:
        raise _Invalid
    return name


def _integer(value: Any, digits: str) -> int:
    """An integer (never a boolean), or a string matching the `digits` pattern."""
    if isinstance(value, bool):
        raise _Invalid
    if isinstance(value, str) and re.fullmatch(digits, value):
        value = int(value)
    if not isinstance(value, int):
        raise _Invalid
    return value


def _positive_int(value: Any) -> int:
    number = _integer(value, r"\s*\+?\d+\s*")
    if number <= 0:
        raise _Invalid
    return number


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    raise _Invalid


def _host(value: Any) -> str:
    host = _text(value)
    if host.startswith("[") and host.endswith("]"):  # a bracketed IPv6 address
        host = host[1:-1]
    # A name, an IPv4 or an IPv6 address; a single colon would be a port, which has its
    # own setting.
    if host.count(":") == 1 or not re.fullmatch(r"[A-Za-z0-9._%:-]+", host):
        raise _Invalid
    return host


def _port(value: Any) -> int:
    number = _integer(value, r"\s*\d+\s*")
    if not 0 <= number <= 65535:
        raise _Invalid
    return number


def _seconds(value: Any) -> float:
    if isinstance(value, bool):
        raise _Invalid
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise _Invalid from None
    if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise _Invalid
    return float(value)


def _admit_action(value: Any) -> str:
    action = _text(value).lower().replace("-", "_")
    if action not in BUSY_SESSION_ACTIONS:
        raise _Invalid
    return action


def _token(value: Any) -> str:
    token = _text(value)
    if len(token) < MIN_HTTP_TOKEN_LENGTH or not re.fullmatch(r"[!-~]+", token):
        raise _Invalid
    return token


def _host_list(value: Any) -> tuple[str, ...]:
    return _list_of(value, lambda item: _host(item).lower().rstrip("."))


def _origin(value: Any) -> str:
    origin = _text(value).lower().rstrip("/")
    if not re.fullmatch(r"https?://(\[[0-9a-f:.]+\]|[a-z0-9._-]+)(:\d{1,5})?", origin):
        raise _Invalid
    return origin


def _origin_list(value: Any) -> tuple[str, ...]:
    return _list_of(value, _origin)


def _channel_names(value: Any) -> str:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise _Invalid
    names = [item.strip() for item in items if item.strip()]
    if not names or not all(re.fullmatch(r"!?[A-Za-z0-9_.-]+", name) for name in names):
        raise _Invalid
    return ",".join(dict.fromkeys(names))


def _choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        chosen = _text(value).lower().replace("_", "-")
        if chosen not in choices:
            raise _Invalid
        return chosen
    return parse


def _env_pattern_list(value: Any) -> tuple[str, ...]:
    def pattern(item: Any) -> str:
        text = _text(item)
        if not re.fullmatch(r"[A-Za-z0-9_*?\[\]!-]+", text):
            raise _Invalid
        return text
    return _list_of(value, pattern)


def _path(value: Any) -> Path:
    text = _text(value)
    if not text:
        raise _Invalid
    return Path(text).expanduser()


def _tape_store(value: Any) -> Path | StoreURL:
    """A PostgreSQL URL stays a string (a Path would fold its `//`); anything else is the
    SQLite file's path."""
    if is_postgres_url(value):
        return StoreURL(_text(value))
    return _path(value)


@dataclass(frozen=True)
class _Spec:
    key: str
    env: str
    parse: Callable[[Any], Any]
    expected: str
    env_example: str
    file_example: str


_SPECS = (
    _Spec(
        "model",
        "HOOKLINE_MODEL",
        _model_spec,
        "a model spec 'provider:model' (or 'offline', 'scripted:<path>', or a name of "
        "model_aliases)",
        "openai:gpt-4o-mini",
        '"openai:gpt-4o-mini"',
    ),
    _Spec(
        "fallback_models",
        "HOOKLINE_FALLBACK_MODELS",
        _model_list,
        "a list of 'provider:model' specs (comma separated in the environment)",
        "openai:gpt-4o-mini,anthropic:claude-3-5-haiku-latest",
        '["openai:gpt-4o-mini"]',
    ),
    _Spec("api_key", "HOOKLINE_API_KEY", _text, "a string", "<your key>", '"<your key>"'),
    _Spec(
        "api_key_env",
        "HOOKLINE_API_KEY_ENV",
        _env_name,
        "the name of an environment variable (letters, digits and _, not starting with a digit)",
        "OPENAI_API_KEY",
        '"OPENAI_API_KEY"',
    ),
    _Spec(
        "api_base",
        "HOOKLINE_API_BASE",
        _url,
        "an http:// or https:// URL",
        "http://localhost:11434/v1",
        '"http://localhost:11434/v1"',
    ),
    _Spec(
        "api_format",
        "HOOKLINE_API_FORMAT",
        _api_format,
        f"one of {', '.join(API_FORMATS)}",
        "chat",
        '"chat"',
    ),
    _Spec(
        "max_steps",
        "HOOKLINE_MAX_STEPS",
        _positive_int,
        "a positive integer",
        str(DEFAULT_MAX_STEPS),
        str(DEFAULT_MAX_STEPS),
    ),
    _Spec("max_tokens", "HOOKLINE_MAX_TOKENS", _positive_int, "a positive integer", "4096", "4096"),
    _Spec(
        "tape_store",
        "HOOKLINE_TAPE_STORE",
        _tape_store,
        "a file path or a postgresql:// URL",
        "~/.hookline/tapes.db",
        '"tapes.db"',
    ),
    _Spec("stream", "HOOKLINE_STREAM", _boolean, "true or false", "false", "false"),
    _Spec(
        "http_host",
        "HOOKLINE_HTTP_HOST",
        _host,
        "a host name or IP address (no scheme, no port)",
        DEFAULT_HTTP_HOST,
        f'"{DEFAULT_HTTP_HOST}"',
    ),
    _Spec(
        "http_port",
        "HOOKLINE_HTTP_PORT",
        _port,
        "a TCP port from 0 to 65535 (0: any free port)",
        str(DEFAULT_HTTP_PORT),
        str(DEFAULT_HTTP_PORT),
    ),
    _Spec(
        "http_timeout",
        "HOOKLINE_HTTP_TIMEOUT",
        _seconds,
        "a positive number of seconds",
        "300",
        "300",
    ),
    _Spec(
        "http_body_timeout",
        "HOOKLINE_HTTP_BODY_TIMEOUT",
        _seconds,
        "a positive number of seconds",
        "30",
        "30",
    ),
    _Spec(
        "http_busy_session",
        "HOOKLINE_HTTP_BUSY_SESSION",
        _admit_action,
        f"one of {', '.join(BUSY_SESSION_ACTIONS)}",
        "process",
        '"process"',
    ),
    _Spec(
        "http_token",
        "HOOKLINE_HTTP_TOKEN",
        _token,
        f"at least {MIN_HTTP_TOKEN_LENGTH} printable characters without spaces (make one with "
        "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`)",
        "<a long random string>",
        '"<a long random string>"',
    ),
    _Spec("http_auth", "HOOKLINE_HTTP_AUTH", _boolean, "true or false", "true", "true"),
    _Spec(
        "http_allow_remote",
        "HOOKLINE_HTTP_ALLOW_REMOTE",
        _boolean,
        "true or false",
        "false",
        "false",
    ),
    _Spec(
        "http_allowed_hosts",
        "HOOKLINE_HTTP_ALLOWED_HOSTS",
        _host_list,
        "a list of host names or IP addresses (comma separated in the environment)",
        "hookline.example.org",
        '["hookline.example.org"]',
    ),
    _Spec(
        "http_allowed_origins",
        "HOOKLINE_HTTP_ALLOWED_ORIGINS",
        _origin_list,
        "a list of origins 'scheme://host[:port]' (comma separated in the environment)",
        "https://app.example.org",
        '["https://app.example.org"]',
    ),
    _Spec("http_certfile", "HOOKLINE_HTTP_CERTFILE", _path, "a file path", "cert.pem",
          '"cert.pem"'),
    _Spec("http_keyfile", "HOOKLINE_HTTP_KEYFILE", _path, "a file path", "key.pem",
          '"key.pem"'),
    _Spec(
        "channels",
        "HOOKLINE_CHANNELS",
        _channel_names,
        "'all' or channel names, '!name' to exclude one (comma separated in the environment)",
        "all,!cli",
        '["http"]',
    ),
    _Spec("model_aliases", "HOOKLINE_MODEL_ALIASES", _aliases,
          "a table of names to model specs (name=spec,name=spec in the environment)",
          "fast=openai:gpt-4o-mini", '{ fast = "openai:gpt-4o-mini" }'),
    _Spec("sandbox", "HOOKLINE_SANDBOX", _choice(*SANDBOX_MODES),
          f"one of {', '.join(SANDBOX_MODES)}", "read-only", '"read-only"'),
    _Spec("sandbox_network", "HOOKLINE_SANDBOX_NETWORK", _boolean, "true or false", "true",
          "true"),
    _Spec("http_allow_unsandboxed", "HOOKLINE_HTTP_ALLOW_UNSANDBOXED", _boolean,
          "true or false", "true", "true"),
    _Spec("tool_env", "HOOKLINE_TOOL_ENV", _choice(*TOOL_ENV_MODES),
          f"one of {', '.join(TOOL_ENV_MODES)}", "inherit", '"inherit"'),
    _Spec("tool_env_keep", "HOOKLINE_TOOL_ENV_KEEP", _env_pattern_list,
          "a list of variable name patterns such as GH_TOKEN or MY_*_KEY (comma separated in "
          "the environment)", "GH_TOKEN", '["GH_TOKEN"]'),
    _Spec("tool_env_drop", "HOOKLINE_TOOL_ENV_DROP", _env_pattern_list,
          "a list of variable name patterns such as INTERNAL_* (comma separated in the "
          "environment)", "INTERNAL_*", '["INTERNAL_*"]'),
)
_BY_KEY = {spec.key: spec for spec in _SPECS}
_BLANK_MEANS_UNSET = frozenset({"model", "fallback_models", "api_key", "api_key_env", "api_base",
                                "api_format", "http_token"})
_SECRETS = frozenset({"api_key", "http_token"})
"""Settings whose values are never shown in an error message."""
_PATHS = frozenset({"tape_store", "http_certfile", "http_keyfile"})


def _shown(value: Any, key: str = "") -> str:
    if key in _SECRETS:
        return f"<hidden, {len(str(value))} characters>"
    text = repr(redact_credentials(value) if isinstance(value, str) else value)
    return text if len(text) <= 80 else text[:77] + "..."


def _env_error(spec: _Spec, value: str) -> SettingsError:
    return SettingsError(
        f"{spec.env} must be {spec.expected}, got {_shown(value, spec.key)} "
        f"(from the environment variable {spec.env}). "
        f"Fix: set {spec.env}={spec.env_example}, or unset it.",
        key=spec.key,
        source=f"env:{spec.env}",
        value=value,
    )


def _file_error(spec: _Spec, value: Any, path: Path) -> SettingsError:
    return SettingsError(
        f"{spec.key} must be {spec.expected}, got {_shown(value, spec.key)} (from {path}). "
        f"Fix: write {spec.key} = {spec.file_example} in {path}, or remove the line "
        f"(the environment variable {spec.env} overrides it).",
        key=spec.key,
        source=f"file:{path}",
        value=value,
    )


def _unreadable_config(path: Path, exc: OSError) -> SettingsError:
    return SettingsError(
        f"Cannot read the config file {path}: {exc.strerror or exc}. "
        f"Fix its permissions, or set {_HOME_ENV} to another directory.",
        key="config",
        source=f"file:{path}",
    )


def read_config_file(path: Path) -> dict[str, Any]:
    """The config file's tables ({} when there is none); SettingsError, naming the file
    and the fix, when it cannot be read or is not TOML, is not a regular file (a FIFO
    would block every command) or is over `MAX_CONFIG_BYTES`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise _unreadable_config(path, exc) from exc
    try:
        info = os.fstat(fd)
        problem = ("is not a regular file" if not stat.S_ISREG(info.st_mode) else
                   f"is over {MAX_CONFIG_BYTES} bytes" if info.st_size > MAX_CONFIG_BYTES
                   else None)
        if problem:
            raise SettingsError(
                f"The config file {path} {problem}. Replace it with a TOML file, or set "
                f"{_HOME_ENV} to another directory.", key="config", source=f"file:{path}")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise _unreadable_config(path, exc) from exc
    finally:
        os.close(fd)
    import tomllib  # only with a config file to parse

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SettingsError(
            f"The config file {path} is not valid TOML: {exc}. "
            "Fix the file (see the hookline settings documentation) or remove it.",
            key="config",
            source=f"file:{path}",
        ) from exc
    if shared := shared_secret_problem(path, info.st_mode, data):  # as libpq's .pgpass
        raise SettingsError(shared, key="config", source=f"file:{path}")
    return data


def load_settings(
    environ: Mapping[str, str] | None = None, home: str | os.PathLike[str] | None = None
) -> Settings:
    """Read `<home>/config.toml`, then apply `HOOKLINE_*` variables from `environ`.

    `environ` defaults to `os.environ`; `home` overrides `HOOKLINE_HOME`.
    """
    env = os.environ if environ is None else environ
    home_path = Path(home).expanduser().absolute() if home is not None else default_home(env)
    return settings_from_config(read_config_file(home_path / _CONFIG_NAME), env, home_path)


def settings_from_config(
    data: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    home: str | os.PathLike[str] | None = None,
) -> Settings:
    """The settings `data` would give as `<home>/config.toml`, with `environ` applied:
    what `load_settings` does after reading the file, for a config not written yet."""
    env = os.environ if environ is None else environ
    home_path = Path(home).expanduser().absolute() if home is not None else default_home(env)
    config_path = home_path / _CONFIG_NAME

    values: dict[str, Any] = {}
    sources: dict[str, str] = {spec.key: "default" for spec in _SPECS}
    extra: dict[str, Any] = {}
    aliases = _known_aliases(data, env)
    for key, raw in data.items():
        spec = _BY_KEY.get(key)
        if spec is None:
            if isinstance(raw, dict):
                extra[key] = raw
                continue
            close = difflib.get_close_matches(key, list(_BY_KEY), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise SettingsError(
                f"Unknown setting {key!r} in {config_path}.{hint} "
                f"Known settings: {', '.join(_BY_KEY)}. Fix: rename or remove it.",
                key=key,
                source=f"file:{config_path}",
                value=raw,
            )
        if spec.key in _BLANK_MEANS_UNSET and isinstance(raw, str) and not raw.strip():
            continue
        try:
            parsed = _with_aliases(spec, aliases)(raw)
        except _Invalid:
            raise _file_error(spec, raw, config_path) from None
        if spec.key in _PATHS and isinstance(parsed, Path) and not parsed.is_absolute():
            parsed = home_path / parsed
        values[spec.key] = parsed
        sources[spec.key] = f"file:{config_path}"

    for spec in _SPECS:
        raw_env = env.get(spec.env)
        if raw_env is None or not raw_env.strip():
            continue
        try:
            parsed = _with_aliases(spec, aliases)(raw_env)
        except _Invalid:
            raise _env_error(spec, raw_env) from None
        if spec.key in _PATHS and isinstance(parsed, Path):
            parsed = parsed.absolute()
        values[spec.key] = parsed
        sources[spec.key] = f"env:{spec.env}"

    _check_tls_pair(values, sources)
    return Settings(home=home_path, sources=sources, extra=extra, **values)


def parse_setting(key: str, value: Any) -> Any:
    """One setting's value parsed as the file would be (a relative path stays relative),
    or a SettingsError saying what the key expects; for checking an answer on its own."""
    spec = _BY_KEY.get(key)
    if spec is None:
        raise SettingsError(f"Unknown setting {key!r}. Known settings: {', '.join(_BY_KEY)}.",
                            key=key, source="value", value=value)
    try:
        return spec.parse(value)
    except _Invalid:
        raise SettingsError(f"{key} must be {spec.expected}, got {_shown(value, key)}",
                            key=key, source="value", value=value) from None


def _check_tls_pair(values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
    """A certificate without its key (or the reverse) is a half-done TLS setup: refuse it
    rather than silently serve plain HTTP."""
    given = [key for key in ("http_certfile", "http_keyfile") if key in values]
    if len(given) == 1:
        missing = "http_keyfile" if given[0] == "http_certfile" else "http_certfile"
        raise SettingsError(
            f"{given[0]} is set ({sources[given[0]]}) but {missing} is not: HTTPS needs both "
            f"the certificate chain and its private key. Fix: set {missing} (or "
            f"HOOKLINE_{missing.upper()}), or remove {given[0]}.",
            key=missing,
            source=sources[given[0]],
        )


# A small TOML writer ----------------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {
    "\\": "\\\\",
    '"': '\\"',
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def _toml_string(text: str) -> str:
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _toml_key(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(f"TOML keys must be strings, got {type(key).__name__}: {key!r}")
    return key if _BARE_KEY.fullmatch(key) else _toml_string(key)


def _toml_value(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise ValueError(f"{where}: integer {value} does not fit TOML's 64-bit range")
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list | tuple):
        items = [
            _toml_value(item, f"{where}[{i}]") for i, item in enumerate(value) if item is not None
        ]
        return "[" + ", ".join(items) + "]"
    if isinstance(value, Mapping):
        pairs = [
            f"{_toml_key(k)} = {_toml_value(v, f'{where}.{k}')}"
            for k, v in value.items()
            if v is not None
        ]
        return "{ " + ", ".join(pairs) + " }" if pairs else "{}"
    raise TypeError(
        f"{where}: cannot write {type(value).__name__} to TOML "
        "(supported: str, int, float, bool, list, table)"
    )


def _write_table(lines: list[str], path: tuple[str, ...], table: Mapping[str, Any]) -> None:
    scalars = [(k, v) for k, v in table.items() if v is not None and not isinstance(v, Mapping)]
    tables = [(k, v) for k, v in table.items() if isinstance(v, Mapping)]
    if path and (scalars or not tables):
        if lines:
            lines.append("")
        lines.append("[" + ".".join(_toml_key(part) for part in path) + "]")
    for key, value in scalars:
        where = ".".join((*path, key)) if isinstance(key, str) else repr(key)
        lines.append(f"{_toml_key(key)} = {_toml_value(value, where)}")
    for key, value in tables:
        _toml_key(key)
        _write_table(lines, (*path, key), value)


def dumps_toml(data: Mapping[str, Any]) -> str:
    """TOML text for `data`: nested tables of str/int/float/bool/list; None values are left out."""
    if not isinstance(data, Mapping):
        raise TypeError(f"TOML documents are tables, got {type(data).__name__}")
    lines: list[str] = []
    _write_table(lines, (), data)
    return "\n".join(lines) + "\n" if lines else ""


def write_config(path: str | os.PathLike[str], data: Mapping[str, Any]) -> Path:
    """Write `data` as TOML to `path` atomically, readable by the owner only (it may hold keys)."""
    target = Path(path).expanduser()
    write_private_file(target, dumps_toml(data))
    return target


def merge_config(data: Mapping[str, Any], updates: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `data` with `updates` merged in: tables merge key by key, None removes a
    key, anything else replaces. `data` is left as it was."""
    merged = copy.deepcopy(dict(data))

    def merge(base: dict[str, Any], changes: Mapping[str, Any]) -> None:
        for key, value in changes.items():
            if value is None:
                base.pop(key, None)
            elif isinstance(value, Mapping) and isinstance(base.get(key), dict):
                merge(base[key], value)
            else:
                base[key] = copy.deepcopy(dict(value)) if isinstance(value, Mapping) else value

    merge(merged, updates)
    return merged


def update_config(path: str | os.PathLike[str], updates: Mapping[str, Any]) -> dict[str, Any]:
    """Merge `updates` into the config file at `path` (None removes a key); returns the result."""
    target = Path(path).expanduser()
    data = merge_config(read_config_file(target), updates)
    write_config(target, data)
    return data
