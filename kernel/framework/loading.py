"""Plugin loading: the builtin plugin first, then the ``hookline`` entry points, then
the entry points of any other group the builtins package adds (``PluginGroup``).

Entry points are handled in two passes, as in the reference: every entry point is
loaded first, then each loaded object is turned into a plugin (a callable is called
with the framework) and registered under the entry point's name. A failure in either
pass is logged and recorded in the load status, and the other plugins still load,
unless strict loading is on, in which case the first failure is raised at once. The
disable list and strict mode apply to every group alike.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._identity import ENTRY_POINT_GROUP, ENV_PREFIX
from .._util import get_logger, parse_flag

__all__ = [
    "BUILTIN_NAME",
    "DISABLE_ENV",
    "STRICT_ENV",
    "PluginGroup",
    "PluginLoadError",
    "PluginStatus",
]

if TYPE_CHECKING:
    from importlib import metadata

DISABLE_ENV = f"{ENV_PREFIX}DISABLE_PLUGINS"
STRICT_ENV = f"{ENV_PREFIX}STRICT_PLUGINS"
BUILTIN_NAME = "builtin"
PLUGIN_FAILURES = (Exception, SystemExit)
"""What a plugin's import or factory may raise and fail alone: `sys.exit()` at import
would otherwise end every command, `hookline plugins` too."""


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
    group: str = field(default="", compare=False)
    """The entry point group it was read from (``hookline``, ``bub``); empty for the
    builtin plugin."""


class PluginLoadError(RuntimeError):
    """Raised in strict mode when a plugin fails to load or initialise."""

    def __init__(self, status: PluginStatus, clash: bool = False) -> None:
        # A name another plugin took: skipping the name would skip that one too.
        fix = (f"uninstall the distribution that declares it, or have its entry point "
               f"renamed ({DISABLE_ENV}={status.name} would skip the other plugin too)"
               if clash else
               f"fix or uninstall it, or skip it with {DISABLE_ENV}={status.name}")
        super().__init__(
            f"plugin {status.name!r} ({status.source}) failed to load: {status.detail}; "
            f"{fix}"
        )
        self.status = status


def _env_flag(name: str) -> bool:
    return parse_flag(os.environ.get(name, "")) is True


def _disabled_names() -> set[str]:
    return {n.strip() for n in os.environ.get(DISABLE_ENV, "").split(",") if n.strip()}


def builtin_module_name() -> str | None:
    """The builtins package beside this kernel (``hookline.builtins`` when installed).

    Computed from this package's own name, so a vendored kernel looks beside itself and
    simply finds nothing.
    """
    kernel = (__package__ or "").rpartition(".")[0]  # this module is in <kernel>.framework
    parent = kernel.rpartition(".")[0]
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


_METADATA_SUFFIXES = (".dist-info", ".egg-info")


def may_declare_entry_points(group: str) -> bool:
    """False only when no distribution ``importlib.metadata`` can see declares ``group``.

    Importing ``importlib.metadata`` costs more than the rest of plugin loading (it pulls
    in ``email``, ``zipfile`` and ``csv``), and most starts have no plugin installed. So
    this looks first, without it, at every ``entry_points.txt`` of the dist-info and
    egg-info folders on ``sys.path`` for a ``[group]`` section header. It never finds
    entry points itself, and it answers True (ask ``importlib.metadata``) whenever it
    cannot be sure: a ``sys.path`` entry that is not a folder (a zip file) or is an egg,
    a meta path finder besides ``PathFinder`` that can find distributions, an unreadable
    folder or file.
    """
    for finder in sys.meta_path:
        if finder is not importlib.machinery.PathFinder and hasattr(
                finder, "find_distributions"):
            return True
    for entry in sys.path:
        root = entry or "."
        if root.lower().endswith(".egg"):
            return True
        try:
            with os.scandir(root) as children:
                folders = [child.path for child in children
                           if child.name.lower().endswith(_METADATA_SUFFIXES)]
        except (NotADirectoryError, PermissionError):
            return True  # a zip file, or a folder only importlib.metadata may explain
        except OSError:
            continue  # missing: importlib.metadata finds nothing there either
        for folder in folders:
            if _declares_section(os.path.join(folder, "entry_points.txt"), group):
                return True
    return False


_MAX_SCANNED_BYTES = 1 << 20
"""An ``entry_points.txt`` larger than this is not read by the scan (it defers)."""


def _declares_section(path: str, group: str) -> bool:
    """Whether the file has a ``[group]`` line (looser than ``importlib.metadata``'s
    parser, which is what makes the scan safe). True, to defer, when it exists but is not
    a regular file (opened without blocking, so a FIFO cannot hang start-up), is larger
    than ``_MAX_SCANNED_BYTES`` or cannot be read."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_SCANNED_BYTES:
            return True
        with open(descriptor, "rb", closefd=False) as file:
            text = file.read(_MAX_SCANNED_BYTES + 1).decode("utf-8", "replace")
    except OSError:
        return True
    finally:
        os.close(descriptor)
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]") and line.strip("[] \t") == group:
            return True
    return False


class PluginGroup:
    """How the loader reads one entry point group; this base reads hookline's own.

    A group other than ``hookline`` is offered by the builtins package
    (``plugin_groups(framework)``), so that a compatibility layer can load another
    ecosystem's plugins with the same status, disable list and strict mode, while the
    kernel knows nothing about it. Each step may be overridden.
    """

    name: str = ENTRY_POINT_GROUP

    def entry_points(self) -> Iterable[Any]:
        """The group's entry points (objects with ``name``, ``value`` and ``load()``)."""
        if not may_declare_entry_points(self.name):
            return ()
        from importlib import metadata

        return metadata.entry_points(group=self.name)

    def load(self, entry_point: Any) -> Any:
        """The first pass: import what the entry point names."""
        return entry_point.load()

    def plugin(self, name: str, obj: Any, framework: Any) -> Any:
        """The second pass: the plugin to register (a callable is called with the
        framework, as the reference does)."""
        return obj(framework) if callable(obj) else obj

    def registered(self, name: str, plugin: Any) -> None:
        """Told once the plugin is registered under ``name``."""

    def failed(self, name: str) -> None:
        """Told when loading, initialising or registering ``name`` failed."""


def find_plugin_groups(framework: Any) -> list[Any]:
    """The extra entry point groups the builtins package offers (``plugin_groups``)."""
    name = builtin_module_name()
    if name is None:
        return []
    try:
        if importlib.util.find_spec(name) is None:
            return []
    except (ImportError, ValueError):
        return []
    offer = getattr(importlib.import_module(name), "plugin_groups", None)
    return list(offer(framework)) if offer is not None else []


class PluginLoader:
    """Loads plugins into a framework and remembers each plugin's status."""

    def __init__(self, framework: Any, group: str = ENTRY_POINT_GROUP) -> None:
        self.framework = framework
        self.group = group
        self.status: dict[str, PluginStatus] = {}

    def load(
        self,
        entry_points: Iterable[metadata.EntryPoint] | None = None,
        groups: Iterable[Any] | None = None,
    ) -> None:
        """Register the builtin plugin, then the entry points of every group.

        ``entry_points`` replaces the ``hookline`` group's (and then no other group is
        read unless ``groups`` is given); ``groups`` replaces the extra groups the
        builtins package offers.
        """
        strict = _env_flag(STRICT_ENV)
        disabled = _disabled_names()
        factory = find_builtin_plugin()
        if factory is not None and BUILTIN_NAME in disabled:
            self._record(PluginStatus(BUILTIN_NAME, False, "disabled", "builtin"))
        elif factory is not None:
            self._initialise(BUILTIN_NAME, factory, "builtin", strict, None)
        own = PluginGroup()
        own.name = self.group
        if groups is None and entry_points is not None:
            groups = []
        elif groups is None:
            try:
                groups = find_plugin_groups(self.framework)
            except Exception as exc:  # a broken extra group must not stop hookline's own
                get_logger(__name__).warning("Failed to read the extra plugin groups: %s: %s",
                                             type(exc).__name__, exc)
                if strict:
                    raise
                groups = []
        # Both passes run over every group: all imports first, as in the reference.
        loaded: list[tuple[PluginGroup, Any, Any]] = []
        seen: set[tuple[str, str]] = set()
        for group in [own, *groups]:
            found = entry_points if group is own and entry_points is not None else (
                group.entry_points())
            for entry_point in found:
                if (entry_point.name, entry_point.value) in seen:
                    continue  # declared in two groups: loaded once, from the first
                seen.add((entry_point.name, entry_point.value))
                if entry_point.name in disabled:
                    self._record(PluginStatus(entry_point.name, False, "disabled",
                                              entry_point.value, group=group.name))
                    continue
                try:
                    loaded.append((group, entry_point, group.load(entry_point)))
                except PLUGIN_FAILURES as exc:
                    group.failed(entry_point.name)
                    self._fail(entry_point.name, entry_point.value, "load", exc, strict,
                               group)
        for group, entry_point, obj in loaded:
            self._initialise(entry_point.name, obj, entry_point.value, strict, group)
        known = {BUILTIN_NAME} | {name for name, _value in seen}
        for name in sorted(disabled - known):  # a typo must not pass for a disabled plugin
            self._record(PluginStatus(name, False, f"named in {DISABLE_ENV}, but no installed "
                                      f"plugin has this name: check its spelling", "-"))

    def _initialise(self, name: str, obj: Any, source: str, strict: bool,
                    group: PluginGroup | None) -> None:
        try:
            if group is None:
                plugin = obj(self.framework) if callable(obj) else obj
            else:
                plugin = group.plugin(name, obj, self.framework)
            self.framework.registry.register(plugin, name=name)
        except PLUGIN_FAILURES as exc:
            if group is not None:
                group.failed(name)
            self._fail(name, source, "initialize", exc, strict, group)
        else:
            self._record(PluginStatus(name, True, "loaded", source,
                                      group=group.name if group is not None else ""))
            if group is not None:
                group.registered(name, plugin)

    def retire(self, name: str, exc: BaseException) -> None:
        """Take a loaded plugin out after it failed at run time (for a compatibility
        layer: a plugin that touches what the layer does not provide fails alone)."""
        status = self.status.get(name)
        registry = self.framework.registry
        if registry.has_plugin(name):
            registry.unregister(name)
        self.status[name] = PluginStatus(
            name, False, f"{type(exc).__name__}: {exc}",
            status.source if status is not None else "", exc,
            group=status.group if status is not None else "")

    def _fail(self, name: str, source: str, phase: str, exc: BaseException, strict: bool,
              group: PluginGroup | None = None) -> None:
        status = PluginStatus(name, False, f"{type(exc).__name__}: {exc}", source, exc,
                              group=group.name if group is not None else "")
        self._record(status)
        if strict:  # the error says it: logging it too would show it twice
            clash = phase == "initialize" and self.framework.registry.has_plugin(name)
            raise PluginLoadError(status, clash) from exc
        get_logger(__name__).warning("Failed to %s plugin %r: %s", phase, name, status.detail)

    def _record(self, status: PluginStatus) -> None:
        # A failed duplicate must not hide the successful plugin that owns the name.
        existing = self.status.get(status.name)
        if existing is not None and existing.ok and not status.ok:
            self.status[f"{status.name} ({status.source})"] = status
        else:
            self.status[status.name] = status
