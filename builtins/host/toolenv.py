"""The environment a tool's process gets: hookline's variables and secrets taken out.

Commands the model asks for must not see the keys hookline holds (the provider key, the
gateway token, a store URL with its password). By default every variable whose name looks
like a secret, or whose value holds a credential (a URL's user or password, a `password=`
or `token=` setting: what `redact_credentials` hides), is removed; `tool_env_keep`
puts back names the user wants tools to have, `tool_env_drop` removes more, and
`tool_env = "inherit"` passes everything (warned at start). See docs/security.md,
"Secrets kept from tools".
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..privacy.redact import redact_credentials

__all__ = ["DEFAULT_DROP", "EnvironmentPolicy"]

DEFAULT_DROP = (
    "HOOKLINE_*", "REPUBLIC_*",
    "*KEY*", "*SECRET*", "*TOKEN*", "*PASSWORD*", "*PASSWD*", "*PASSPHRASE*",
    "*CREDENTIAL*", "*AUTH*", "*COOKIE*", "*SESSION*", "*_PAT", "*PASS", "*_PW", "*JWT*",
    "*WEBHOOK*", "*DSN*", "DATABASE_URL",
    "PG*", "MYSQL_PWD", "AWS_*", "AZURE_*", "GOOGLE_APPLICATION_CREDENTIALS", "KRB5CCNAME",
    "GPG_AGENT_INFO", "DOCKER_*",
)
"""Name patterns (any case) of variables a filtered environment leaves out. `*AUTH*`
catches `SSH_AUTH_SOCK` and `XAUTHORITY`: an agent socket lends the user's keys, an X
authority file the user's screen."""


@dataclass(frozen=True)
class EnvironmentPolicy:
    """Which variables of hookline's own environment a tool process inherits."""

    inherit: bool = False
    """Pass everything through (`tool_env = "inherit"`)."""
    keep: tuple[str, ...] = ()
    """Patterns kept even when they match a drop pattern."""
    drop: tuple[str, ...] = ()
    """Patterns dropped besides `DEFAULT_DROP`."""
    _keep: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _drop: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_keep", _compile(self.keep))
        object.__setattr__(self, "_drop", _compile((*DEFAULT_DROP, *self.drop)))

    def allows(self, name: str, value: str) -> bool:
        """Whether a tool process gets the variable `name`."""
        if self.inherit:
            return True
        upper = name.upper()
        if self._keep.match(upper):
            return True
        if self._drop.match(upper):
            return False
        return redact_credentials(value) == value

    def apply(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The variables of `environ` a tool process may see."""
        return {name: value for name, value in environ.items() if self.allows(name, value)}


def _compile(patterns: Iterable[str]) -> re.Pattern[str]:
    """One regular expression for many `fnmatch` patterns (matched on upper case names)."""
    parts = [fnmatch.translate(pattern.upper()) for pattern in patterns]
    return re.compile("|".join(parts) if parts else r"(?!)")
