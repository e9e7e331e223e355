"""What a request may change of its own turn: `context.model`, `context.system` and
`context.options`.

A token holder choosing the model per request is useful (a cheaper model for a quick
question), but the model is also what decides which tools run: `offline` obeys `/tool`
lines as written, and `scripted:<path>` makes the gateway open a file of its machine. So a
request may name only a model the gateway was configured with (`model`, a fallback, an
alias of `model_aliases`), or any provider model with `http_allow_model_override = true`;
`offline` and `scripted:` come from a request only when the gateway runs on them itself.
`context.system` replaces the system prompt, the user's instructions to the model: a
request may set it only with `http_allow_system_override = true`. `context.options`, the
model options of `hookline run -o`, are checked here too, so a bad one is the client's
400, not a failed turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hookline.kernel.errors import HooklineError

from ...models.options import checked_model_options
from .guard import HttpError

__all__ = ["RequestOverrides"]

_LOCAL_KINDS = ("offline", "scripted:")
"""Model specs that run on this machine rather than at a provider."""


@dataclass(frozen=True)
class RequestOverrides:
    """The per-request settings a gateway accepts, read from its settings at start."""

    configured: tuple[str, ...] = ("offline",)
    """Model specs and alias names the gateway was configured with: its model, its
    fallbacks, then each alias and what it stands for."""
    any_model: bool = False
    system: bool = False
    default: str = "offline"
    """The spec of the model turns use unless a request names another."""

    @classmethod
    def from_settings(cls, settings: Any) -> RequestOverrides:
        aliases = [name for pair in settings.model_aliases.items() for name in pair]
        names = dict.fromkeys([settings.model_spec, *settings.models, *aliases])
        return cls(tuple(names), settings.http_allow_model_override,  # an alias, or its spec
                   settings.http_allow_system_override, settings.model_spec)

    @property
    def served(self) -> list[str]:
        """Every name a request may give its model: the default first, then the others
        in order (`GET /v1/models`)."""
        return list(dict.fromkeys([self.default, *self.configured]))

    def check(self, payload: dict[str, Any]) -> None:
        """Refuse (400, naming the setting) a `context.model` or `context.system` this
        gateway does not accept, and `context.options` that are no model options."""
        context = payload.get("context") or {}
        if context.get("options"):
            try:
                checked_model_options(context["options"])
            except HooklineError as exc:
                raise HttpError(400, f"context.options: {exc.message}") from None
        model = context.get("model")
        if model not in (None, ""):
            self.check_model(str(model))
        if context.get("system") not in (None, "") and not self.system:
            raise HttpError(400, "context.system would replace this gateway's system prompt, "
                                 "which requests may not do here; the gateway's owner can "
                                 "allow it with http_allow_system_override = true")

    def check_model(self, spec: str, field: str = "context.model", status: int = 400) -> None:
        """Refuse (`status`, code `model_not_found`) a model this gateway does not serve;
        `field` names where the request gave it."""
        if spec in self.configured:
            return
        served = ", ".join(self.served)
        if spec.startswith(_LOCAL_KINDS):
            raise HttpError(status, f"{field} {spec!r} runs on the gateway's machine, which "
                                    f"a request may not choose unless the gateway itself "
                                    f"runs on it (it serves: {served})", code="model_not_found")
        if not self.any_model:
            raise HttpError(status, f"{field} {spec!r} is not a model this gateway serves "
                                    f"({served}); name one of those, or the gateway's owner "
                                    f"can allow any with http_allow_model_override = true",
                            code="model_not_found")
