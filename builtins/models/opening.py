"""Opening a model client from a spec: `open_model`, and `ModelOpener`, which keeps one
client per spec.

Each kind of client is imported when a spec asks for it: a turn on the offline model
imports neither the scripted model nor the republic client (nor republic).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hookline.kernel.errors import ErrorKind, HooklineError

from .base import ModelClient

__all__ = ["ModelOpener", "open_model"]


def open_model(spec: str | None, settings: Any = None, **options: Any) -> ModelClient:
    """The client for a model spec.

    - `""`, None, `offline` (or `offline:<anything>`): the embedded OfflineModel;
    - `scripted:<path>`: a ScriptedModel playing back that file (relative to the working
      directory); every call returns a fresh one, starting at the first turn;
    - anything else: a RepublicModel with the provider settings (`api_key`, `api_base`,
      `api_format`) of `settings` (a `Settings`, or any object with those attributes);
      a Settings without `api_key` reads the variable its `api_key_env` names, now.

    Extra `options` go to RepublicModel.
    """
    spec = (spec or "").strip()
    resolve = getattr(settings, "resolve_model", None)
    if spec and resolve is not None:  # `-m fast` in a turn: an alias of model_aliases
        spec = resolve(spec)
    if not spec or spec == "offline" or spec.startswith("offline:"):
        from .offline import OfflineModel

        # Say how to configure a model only to whoever has not chosen this one.
        chosen = settings is not None and getattr(settings, "model", None) is not None
        return OfflineModel(spec or "offline", notice=not chosen)
    if spec.startswith("scripted:"):
        from .scripted import ScriptedModel

        path = spec.removeprefix("scripted:").strip()
        if not path:
            raise HooklineError(
                ErrorKind.config,
                "Model spec 'scripted:' needs a file of model turns: scripted:<path>.",
            )
        return ScriptedModel(Path(path).expanduser(), name=spec)
    from .republic_client import RepublicModel

    return RepublicModel(
        spec,
        api_key=_api_key(settings),
        api_base=getattr(settings, "api_base", None),
        api_format=getattr(settings, "api_format", None),
        **({"max_retry_delay": settings.retry_max_wait}
           if getattr(settings, "retry_max_wait", None) else {}),
        **options,
    )


def _api_key(settings: Any) -> str | None:
    """The key `settings` give: through `resolved_api_key` when they have it (a Settings:
    `api_key`, else the variable `api_key_env` names), else their `api_key` attribute."""
    resolve = getattr(settings, "resolved_api_key", None)
    if callable(resolve):
        key = resolve()
        return str(key) if key else None
    return getattr(settings, "api_key", None)


class ModelOpener:
    """`open_model` with one client per spec, reused for later calls with the same spec.

    Give it to the agent loop as its `open_model(spec)`: a scripted model then keeps its
    place across steps and turns (a fresh one would replay its first turn), and a
    RepublicModel is not rebuilt for every step. `clear()` forgets the clients.
    """

    def __init__(
        self,
        settings: Any = None,
        *,
        opener: Callable[..., ModelClient] | None = None,
        **options: Any,
    ) -> None:
        self.settings = settings
        self.options = options
        self._open = opener or open_model
        self._clients: dict[str, ModelClient] = {}

    def __call__(self, spec: str | None) -> ModelClient:
        key = (spec or "").strip() or "offline"
        client = self._clients.get(key)
        if client is None:
            client = self._open(key, self.settings, **self.options)
            self._clients[key] = client
        return client

    def clear(self) -> None:
        self._clients.clear()
