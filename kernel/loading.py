"""Plugin loading: the builtin plugin first, then the ``hookline`` entry points.

Entry points are handled in two passes, as in the reference: every entry point is
loaded first, then each loaded object is turned into a plugin (a callable is called
with the framework) and registered under the entry point's name. A failure in either
pass is logged and recorded in the load status, and the other plugins still load,
unless strict loading is on, in which case the first failure is raised at once.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._util import get_logger

if TYPE_CHECKING:
    from importlib import metadata

ENTRY_POINT_GROUP = "hookline"
DISABLE_ENV = "HOOKLINE_DISABLE_PLUGINS"
STRICT_ENV = "HOOKLINE_STRICT_PLUGINS"
BUILTIN_NAME = "builtin"


@dataclass(frozen=True, slots=True)
class PluginStatus:
    """How loading one plugin went."""

    name: str
    ok: bool
    detail: str
    """``loaded``, ``disabled``, or what failed and why."""
    source: str = ""
    """Where it came from: ``builtin`` or the entry point's ``module:attr``."""
    error: BaseException | None = None


class PluginLoadError(RuntimeError):
    """Raised in strict mode when a plugin fails to load or initialise."""

    def __init__(self, status: PluginStatus) -> None:
        super().__init__(
            f"plugin {status.name!r} ({status.source}) failed to load: {status.detail}; "
            f"fix or uninstall it, or skip it with {DISABLE_ENV}={status.name}"
        )
        self.status = status


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _disabled_names() -> set[str]:
    return {n.strip() for n in os.environ.get(DISABLE_ENV, "").split(",") if n.strip()}


def builtin_module_name() -> str | None:
    """The builtins package beside this kernel (``hookline.builtins`` when installed).

    Computed from this package's own name, so a vendored kernel looks beside itself and
    simply finds nothing.
    """
    parent = (__package__ or "").rpartition(".")[0]
    return f"{parent}.builtins" if parent else None


def find_builtin_plugin() -> Any:
    """The builtins package's plugin factory (``create_plugin``), or None."""
    name = builtin_module_name()
    if name is None:
        return None
    try:
        if importlib.util.find_spec(name) is None:
            return None
    except (ImportError, ValueError):
        return None
    return getattr(importlib.import_module(name), "create_plugin", None)


class PluginLoader:
    """Loads plugins into a framework and remembers each plugin's status."""

    def __init__(self, framework: Any, group: str = ENTRY_POINT_GROUP) -> None:
        self.framework = framework
        self.group = group
        self.status: dict[str, PluginStatus] = {}

    def load(self, entry_points: Iterable[metadata.EntryPoint] | None = None) -> None:
        strict = _env_flag(STRICT_ENV)
        disabled = _disabled_names()
        factory = find_builtin_plugin()
        if factory is not None and BUILTIN_NAME in disabled:
            self._record(PluginStatus(BUILTIN_NAME, False, "disabled", "builtin"))
        elif factory is not None:
            self._initialise(BUILTIN_NAME, factory, "builtin", strict)
        if entry_points is None:
            # Imported here: importlib.metadata is slow to import and only loading needs it.
            from importlib import metadata

            entry_points = metadata.entry_points(group=self.group)
        loaded: list[tuple[metadata.EntryPoint, Any]] = []
        for entry_point in entry_points:
            if entry_point.name in disabled:
                self._record(PluginStatus(entry_point.name, False, "disabled",
                                          entry_point.value))
                continue
            try:
                loaded.append((entry_point, entry_point.load()))
            except Exception as exc:
                self._fail(entry_point.name, entry_point.value, "load", exc, strict)
        for entry_point, obj in loaded:
            self._initialise(entry_point.name, obj, entry_point.value, strict)

    def _initialise(self, name: str, obj: Any, source: str, strict: bool) -> None:
        try:
            plugin = obj(self.framework) if callable(obj) else obj
            self.framework.registry.register(plugin, name=name)
        except Exception as exc:
            self._fail(name, source, "initialize", exc, strict)
        else:
            self._record(PluginStatus(name, True, "loaded", source))

    def _fail(self, name: str, source: str, phase: str, exc: Exception, strict: bool) -> None:
        status = PluginStatus(name, False, f"{type(exc).__name__}: {exc}", source, exc)
        get_logger(__name__).warning("Failed to %s plugin %r: %s", phase, name, status.detail)
        self._record(status)
        if strict:
            raise PluginLoadError(status) from exc

    def _record(self, status: PluginStatus) -> None:
        # A failed duplicate must not hide the successful plugin that owns the name.
        existing = self.status.get(status.name)
        if existing is not None and existing.ok and not status.ok:
            self.status[f"{status.name} ({status.source})"] = status
        else:
            self.status[status.name] = status
