"""The table of settings: each `Settings` field is one setting, written once.

A field gives the key (its name), the type and the default; `metadata=setting(...)` adds
how a value is parsed, what an error says it should be, the examples a fix suggests, and
the flags (a path, blank meaning unset); `repr=False` marks a secret. The rest is derived:
the environment variable (`HOOKLINE_` + the key upper-cased) and the rows `SPECS` and
`BY_KEY` the loader walks.

Why fields rather than rows that build the class: a dataclass written out is what mypy
and readers see, every attribute with its type, and a class made at run time from rows
would hide them. The docs' settings tables are checked against `SPECS`
(tests/builtins/config/test_settings_docs.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

import hookline.builtins.config.parsers as parse  # the module, not the package's face
from hookline.kernel._identity import ENV_PREFIX
from hookline.kernel.channels import ADMIT_ACTIONS
from hookline.kernel.errors import ErrorKind, HooklineError

from ..privacy.redact import redact_credentials
from .parsers import (
    API_FORMATS,
    APPROVAL_POLICIES,
    MIN_HTTP_TOKEN_LENGTH,
    SANDBOX_LAYERS,
    SANDBOX_MODES,
    TOOL_ENV_MODES,
)

__all__ = [
    "DEFAULT_DENY_READ",
    "DEFAULT_HTTP_BODY_TIMEOUT",
    "DEFAULT_HTTP_HOST",
    "DEFAULT_HTTP_PORT",
    "DEFAULT_HTTP_TIMEOUT",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_PROCESSES",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_PROTECT",
    "Settings",
    "SettingsError",
    "misplaced_settings",
    "setting_env",
]

DEFAULT_MAX_STEPS = 20
DEFAULT_HTTP_HOST = "127.0.0.1"
DEFAULT_HTTP_PORT = 8787
DEFAULT_HTTP_TIMEOUT = 300.0
DEFAULT_HTTP_BODY_TIMEOUT = 30.0
DEFAULT_HTTP_APPROVAL_TIMEOUT = 120.0
TAPES_NAME = "tapes.db"
CONFIG_NAME = "config.toml"
DEFAULT_DENY_READ = ("~/.ssh", "~/.aws", "~/.azure", "~/.config/gcloud", "~/.oci",
                     "~/.config/gh", "~/.config/glab-cli", "~/.netrc", "~/.docker/config.json",
                     "~/.config/containers/auth.json", "~/.kube", "~/.pgpass", "~/.gnupg",
                     "~/.git-credentials", "~/.cache/git/credential", "~/.git-credential-cache",
                     "~/.1password", "~/.bitwarden-ssh-agent.sock", "~/.password-store",
                     "~/.config/op", "~/.npmrc", "~/.pypirc", "~/.cargo/credentials",
                     "~/.cargo/credentials.toml", "~/.gem/credentials",
                     "~/.terraform.d/credentials.tfrc.json", "~/.databrickscfg", "~/.s3cfg",
                     "~/.config/rclone", "~/.vault-token",
                     "~/.local/share/keyrings", "~/.mozilla", "~/.thunderbird",
                     "~/.config/google-chrome", "~/.config/chromium", "~/.bash_history",
                     "~/.zsh_history", "~/.local/share/fish/fish_history", "~/.python_history",
                     "~/.psql_history", "~/.mysql_history")
"""Credentials outside the hookline home that no command may read (`sandbox_deny_read`):
cloud, ssh and forge keys, the sockets of git's credential cache and of password
managers' SSH agents (a folder masked holds the socket made later too), container
registries' logins, password stores, package registries' publishing tokens, keyrings,
browser and mail profiles (cookies, saved passwords) and shell and database histories
(secrets typed on a command line)."""
DEFAULT_PROTECT = (".vscode", ".idea", ".zed", ".helix", ".devcontainer", ".devcontainer.json",
                   ".mcp.json", ".claude/settings.json", ".claude/settings.local.json",
                   ".claude/hooks", ".cursor/mcp.json", ".cursor/hooks.json", ".cursor/hooks",
                   ".gemini/settings.json", ".codex/config.toml", "opencode.json",
                   "opencode.jsonc", ".opencode", ".roo/mcp.json", ".windsurf/hooks.json",
                   ".kiro/settings", ".kiro/hooks", ".kiro/agents", ".warp/.mcp.json")
"""Settings kept read-only in the workspace (`sandbox_protect`) because a program the user
opens there later runs what they name, outside the sandbox: an editor's (an interpreter,
a language server, a task on folder open), a dev container's (`initializeCommand` runs on
the host), other agents' (their hooks, plugins and MCP servers)."""
DEFAULT_MAX_PROCESSES = 4096
"""Processes one sandbox may hold at once (RLIMIT_NPROC)."""
DEFAULT_MAX_FILE_BYTES = 8 * 1024**3
"""Bytes one file a command writes may reach (RLIMIT_FSIZE)."""
_META = "hookline.setting"


class SettingsError(HooklineError):
    """An invalid setting (kind `config`); `key`, `source` and `value` say which."""

    def __init__(self, message: str, *, key: str = "", source: str = "", value: Any = None) -> None:
        details = {"key": key, "source": source, "value": shown(value, key)} if key else None
        super().__init__(ErrorKind.config, message, details)
        self.key = key
        self.source = source
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_settings_error, (self.message, self.key, self.source, self.value))


def _rebuild_settings_error(message: str, key: str, source: str, value: Any) -> SettingsError:
    return SettingsError(message, key=key, source=source, value=value)


def shown(value: Any, key: str = "") -> str:
    """`value` as an error message may show it: a secret only by its length, a URL without
    its password, anything long cut."""
    if key in SECRETS:
        return f"<hidden, {len(str(value))} characters>"
    out = repr(redact_credentials(value) if isinstance(value, str) else value)
    return out if len(out) <= 80 else out[:77] + "..."


def setting(parse: Callable[[Any], Any], expected: str, env_example: str, file_example: str,
            *, path: bool = False, blank_unset: bool = False,
            unset: str = "") -> dict[str, dict[str, Any]]:
    """The metadata that makes a `Settings` field a setting. `parse` checks a raw value;
    `expected` completes "<key> must be ..."; the examples are what a fix suggests writing
    in the environment and in the file. `path`: a relative value is taken from the home
    (file) or the working directory (environment). `blank_unset`: a blank string in the
    file counts as unset. `unset`: the one value that applies when the default is None
    (what the docs show as the default), if there is one. A field with `repr=False` is a
    secret: never shown in an error message either."""
    return {_META: {"parse": parse, "expected": expected, "env_example": env_example,
                    "file_example": file_example, "path": path, "blank_unset": blank_unset,
                    "unset": unset}}


@dataclass(frozen=True)
class Settings:
    """Resolved settings (docs/configuration.md lists the keys, variables and defaults).

    `sources` tells where each value came from: `default`, `env:<VARIABLE>` or
    `file:<path>`. `extra` holds the config file's other tables, for plugins.
    """

    home: Path
    model: str | None = field(default=None, metadata=setting(
        parse.model_spec,
        "a model spec 'provider:model' (or 'offline', 'scripted:<path>', or a name of "
        "model_aliases)", "openai:gpt-4o-mini", '"openai:gpt-4o-mini"',
        blank_unset=True, unset="offline"))
    fallback_models: tuple[str, ...] = field(default=(), metadata=setting(
        parse.model_list, "a list of 'provider:model' specs (comma separated in the "
        "environment)", "openai:gpt-4o-mini,anthropic:claude-3-5-haiku-latest",
        '["openai:gpt-4o-mini"]', blank_unset=True))
    api_key: str | None = field(default=None, repr=False, metadata=setting(
        parse.text, "a string", "<your key>", '"<your key>"', blank_unset=True))
    api_key_env: str | None = field(default=None, metadata=setting(
        parse.env_name, "the name of an environment variable (letters, digits and _, "
        "not starting with a digit)", "OPENAI_API_KEY", '"OPENAI_API_KEY"', blank_unset=True))
    api_base: str | None = field(default=None, metadata=setting(
        parse.http_url, "an http:// or https:// URL", "http://localhost:11434/v1",
        '"http://localhost:11434/v1"', blank_unset=True))
    api_format: str | None = field(default=None, metadata=setting(
        parse.api_format, f"one of {', '.join(API_FORMATS)}", "chat", '"chat"',
        blank_unset=True))
    max_steps: int = field(default=DEFAULT_MAX_STEPS, metadata=setting(
        parse.positive_int, "a positive integer", str(DEFAULT_MAX_STEPS),
        str(DEFAULT_MAX_STEPS)))
    max_tokens: int | None = field(default=None, metadata=setting(
        parse.positive_int, "a positive integer", "4096", "4096"))
    retry_max_wait: float = field(default=60.0, metadata=setting(
        parse.seconds, "a positive number of seconds", "120", "120"))
    context_window: int | None = field(default=None, metadata=setting(
        parse.positive_int, "a positive integer (tokens)", "32000", "32000"))
    context_budget: float = field(default=0.8, metadata=setting(
        parse.fraction, "a number above 0 and at most 1", "0.7", "0.7"))
    compaction: bool = field(default=True, metadata=setting(
        parse.boolean, "true or false", "false", "false"))
    tape_store: Path | str | None = field(default=None, metadata=setting(
        parse.tape_store, "a file path or a postgresql:// URL", "~/.hookline/tapes.db",
        '"tapes.db"', path=True, unset=f"<home>/{TAPES_NAME}"))
    store_turn_deadline: float = field(default=10.0, metadata=setting(
        parse.seconds, "a positive number of seconds", "10", "10"))
    stream: bool = field(default=True, metadata=setting(
        parse.boolean, "true or false", "false", "false"))
    http_host: str = field(default=DEFAULT_HTTP_HOST, metadata=setting(
        parse.host, "a host name or IP address (no scheme, no port)",
        DEFAULT_HTTP_HOST, f'"{DEFAULT_HTTP_HOST}"'))
    http_port: int = field(default=DEFAULT_HTTP_PORT, metadata=setting(
        parse.tcp_port, "a TCP port from 0 to 65535 (0: any free port)",
        str(DEFAULT_HTTP_PORT), str(DEFAULT_HTTP_PORT)))
    http_timeout: float = field(default=DEFAULT_HTTP_TIMEOUT, metadata=setting(
        parse.seconds, "a positive number of seconds", "300", "300"))
    http_body_timeout: float = field(default=DEFAULT_HTTP_BODY_TIMEOUT, metadata=setting(
        parse.seconds, "a positive number of seconds", "30", "30"))
    http_idempotency_ttl: float = field(default=86_400.0, metadata=setting(
        parse.seconds, "a positive number of seconds", "3600", "3600"))
    http_reply_retention: float = field(default=600.0, metadata=setting(
        parse.seconds, "a positive number of seconds", "3600", "3600"))
    http_approval_timeout: float = field(default=DEFAULT_HTTP_APPROVAL_TIMEOUT, metadata=setting(
        parse.seconds, "a positive number of seconds", "120", "120"))
    http_busy_session: str = field(default="follow_up", metadata=setting(
        parse.admit_action, f"one of {', '.join(ADMIT_ACTIONS)}",
        "process", '"process"'))
    http_token: str | None = field(default=None, repr=False, metadata=setting(
        parse.bearer_token, f"at least {MIN_HTTP_TOKEN_LENGTH} printable characters without "
        "spaces (make one with `python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`)",
        "<a long random string>", '"<a long random string>"', blank_unset=True))
    http_auth: bool = field(default=True, metadata=setting(
        parse.boolean, "true or false", "true", "true"))
    http_allow_remote: bool = field(default=False, metadata=setting(
        parse.boolean, "true or false", "false", "false"))
    http_allowed_hosts: tuple[str, ...] = field(default=(), metadata=setting(
        parse.host_list, "a list of host names or IP addresses (comma separated in the "
        "environment)", "hookline.example.org", '["hookline.example.org"]'))
    http_allowed_origins: tuple[str, ...] = field(default=(), metadata=setting(
        parse.origin_list, "a list of origins 'scheme://host[:port]' (comma separated in "
        "the environment)", "https://app.example.org", '["https://app.example.org"]'))
    http_certfile: Path | None = field(default=None, metadata=setting(
        parse.file_path, "a file path", "cert.pem", '"cert.pem"', path=True))
    http_keyfile: Path | None = field(default=None, metadata=setting(
        parse.file_path, "a file path", "key.pem", '"key.pem"', path=True))
    channels: str = field(default="all", metadata=setting(
        parse.channel_names, "'all' or channel names, '!name' to exclude one (comma "
        "separated in the environment)", "all,!cli", '["http"]'))
    model_aliases: Mapping[str, str] = field(default_factory=dict, metadata=setting(
        parse.aliases, "a table of names to model specs (name=spec,name=spec in the "
        "environment)", "fast=openai:gpt-4o-mini", '{ fast = "openai:gpt-4o-mini" }'))
    approval: str = field(default="on-request", metadata=setting(
        parse.choice(*APPROVAL_POLICIES), f"one of {', '.join(APPROVAL_POLICIES)}",
        "ask", '"ask"'))
    sandbox: str = field(default="workspace-write", metadata=setting(
        parse.choice(*SANDBOX_MODES), f"one of {', '.join(SANDBOX_MODES)}",
        "read-only", '"read-only"'))
    sandbox_network: bool = field(default=False, metadata=setting(
        parse.boolean, "true or false", "true", "true"))
    sandbox_deny_read: tuple[str, ...] = field(default=DEFAULT_DENY_READ, metadata=setting(
        parse.path_list, "a list of paths (comma separated in the environment)",
        "~/.ssh,~/.netrc", '["~/.ssh", "~/.netrc"]'))
    sandbox_protect: tuple[str, ...] = field(default=DEFAULT_PROTECT, metadata=setting(
        parse.path_list, "a list of paths in the workspace (comma separated in the "
        "environment)", ".vscode,Makefile", '[".vscode", "Makefile"]'))
    sandbox_without: tuple[str, ...] = field(default=(), metadata=setting(
        parse.choice_list(*SANDBOX_LAYERS), f"a list of {', '.join(SANDBOX_LAYERS)} (comma "
        "separated in the environment)", "namespaces", '["namespaces"]'))
    sandbox_max_processes: int = field(default=DEFAULT_MAX_PROCESSES, metadata=setting(
        parse.positive_int, "a positive integer", "512", "512"))
    sandbox_max_file_bytes: int = field(default=DEFAULT_MAX_FILE_BYTES, metadata=setting(
        parse.positive_int, "a positive integer", "1073741824", "1073741824"))
    http_allow_model_override: bool = field(default=False, metadata=setting(
        parse.boolean, "true or false", "true", "true"))
    http_allow_system_override: bool = field(default=False, metadata=setting(
        parse.boolean, "true or false", "true", "true"))
    http_allow_unsandboxed: bool = field(default=False, metadata=setting(
        parse.boolean, "true or false", "true", "true"))
    tool_env: str = field(default="filtered", metadata=setting(
        parse.choice(*TOOL_ENV_MODES), f"one of {', '.join(TOOL_ENV_MODES)}",
        "inherit", '"inherit"'))
    tool_env_keep: tuple[str, ...] = field(default=(), metadata=setting(
        parse.env_pattern_list, "a list of variable name patterns such as GH_TOKEN or "
        "MY_*_KEY (comma separated in the environment)", "GH_TOKEN", '["GH_TOKEN"]'))
    tool_env_drop: tuple[str, ...] = field(default=(), metadata=setting(
        parse.env_pattern_list, "a list of variable name patterns such as INTERNAL_* "
        "(comma separated in the environment)", "INTERNAL_*", '["INTERNAL_*"]'))
    otel: bool = field(default=False, metadata=setting(
        parse.boolean, "true or false", "true", "true"))
    otel_capture_content: bool = field(default=False, metadata=setting(
        parse.boolean, "true or false", "true", "true"))
    model_prices: Mapping[str, parse.ModelPrice] = field(default_factory=dict, metadata=setting(
        parse.model_prices, "a table of model specs to prices per million tokens: input, "
        "output and optionally cached_input and cache_write_input, non-negative numbers "
        "(spec=input/output/cached_input/cache_write_input,... in the environment)",
        "openai:gpt-4o-mini=0.15/0.6/0.075",
        '{ "openai:gpt-4o-mini" = { input = 0.15, output = 0.6, cached_input = 0.075 } }'))
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "home", Path(self.home))
        if self.tape_store is None:
            object.__setattr__(self, "tape_store", self.home / TAPES_NAME)
        for spec in SPECS:  # a list given to the constructor is kept as a tuple
            if isinstance(spec.default, tuple):
                object.__setattr__(self, spec.key, tuple(getattr(self, spec.key)))

    @property
    def config_path(self) -> Path:
        return self.home / CONFIG_NAME

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
                f"({BY_KEY['api_key'].env}), or remove api_key_env.",
                key="api_key_env",
                source=source,
                value=self.api_key_env,
            )
        return value


@dataclass(frozen=True)
class Spec:
    """One setting, as the loader and the docs' checks read it: a field of `Settings`
    with its metadata (see `setting`)."""

    key: str
    default: Any
    parse: Callable[[Any], Any]
    expected: str
    env_example: str
    file_example: str
    secret: bool
    path: bool
    blank_unset: bool
    unset: str

    @property
    def env(self) -> str:
        """The environment variable: always `HOOKLINE_` + the key upper-cased."""
        return ENV_PREFIX + self.key.upper()


def _specs() -> tuple[Spec, ...]:
    rows = []
    for item in fields(Settings):
        about = item.metadata.get(_META)
        if about is None:  # home, sources, extra: not settings
            continue
        factory = item.default_factory
        default = factory() if factory is not MISSING else item.default
        rows.append(Spec(item.name, default, secret=not item.repr, **about))
    return tuple(rows)


SPECS = _specs()
"""Every setting, in the order of the `Settings` fields (which is the docs' order)."""
BY_KEY = {spec.key: spec for spec in SPECS}


def misplaced_settings(keys: Any) -> str:
    """For a table's unknown `keys`: the hint that those named like settings are settings
    written below the table's header, which TOML puts into the table ("" for none)."""
    found = sorted(key for key in keys if key in BY_KEY)
    if not found:
        return ""
    return (f"; {', '.join(found)} {'is a setting' if len(found) == 1 else 'are settings'}, "
            f"which TOML puts in this table when written below its header: move "
            f"{'it' if len(found) == 1 else 'them'} above the file's first [table] or "
            f"[[table]] header")
SECRETS = frozenset(spec.key for spec in SPECS if spec.secret)
"""Settings whose values are never shown in an error message."""


def setting_env(key: str) -> str:
    """The variable of setting `key`, for a message that tells the reader to set it: read
    from the table, so a renamed setting cannot leave a message naming a variable nobody
    reads (a key that is no setting raises KeyError)."""
    return BY_KEY[key].env
