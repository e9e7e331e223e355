"""The ``bub`` entry point group: how Bub plugins are loaded, wrapped and given tools.

``BubGroup`` is a kernel ``PluginGroup``: the loader reads its entry points beside
hookline's with the same status, disable list and strict mode, and asks it to import
(``load``) and instantiate (``plugin``) each one. Around both steps the group watches
``bub.tools.REGISTRY``: every tool that appears is attributed to the plugin whose
distribution defines it (the module holding the ``Tool`` object), else to the plugin
being loaded; a plugin that fails to load leaves no tools behind, and Bub's own builtin
tools are left to hookline's builtin.

A callable entry point is called with a ``BubFrameworkFacade``; the plugin object it
returns is registered through a *shim*: an object carrying the plugin's own marked
functions, each wrapped to convert what it returns (Bub decisions, channels, admission
decisions, model options) into hookline's types, and to take the plugin out alone when
it reaches for something the facade lacks. The shim adds a ``provide_tools``
implementation when the plugin owns tools, so the hook report attributes them to it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from hookline.kernel import hookimpl
from hookline.kernel._dispatch.impl import hook_name_of
from hookline.kernel._dispatch.markers import marked_routines
from hookline.kernel.framework import PluginGroup
from hookline.kernel.hooks import IMPL_PROJECTS
from hookline.kernel.tools import Tool

from .convert import admit_decision, llm_answer, model_options, tool_decision
from .facade import AgentFacade, AgentToolTable, BubFrameworkFacade, UnsupportedBubFeature
from .switch import SWITCH_ENV

__all__ = ["COMPAT_NAME", "BubGroup", "BubPluginShim"]

logger = logging.getLogger(__name__)

COMPAT_NAME = "bub"
"""The name of the layer's own plugin (``hookline.builtins.bub.plugin``)."""

_BUB_DISTRIBUTION = "bub"

SUPPORTED_BUB = "0.6.0a3"
"""The Bub release the layer adapts to (and ``spec/run_bub_plugins.py`` installs)."""


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class _CompatEntry:
    """The layer's own plugin, loaded like an entry point of the group."""

    name = COMPAT_NAME
    value = "hookline.builtins.bub.plugin:BubCompatPlugin"

    def load(self) -> Any:
        from .plugin import BubCompatPlugin

        return BubCompatPlugin


def _convert_channels(value: Any) -> Any:
    from .channels import adapt_channel

    if isinstance(value, list | tuple):
        return [adapt_channel(channel) for channel in value]
    return value


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "before_tool_call": tool_decision,
    "before_llm_call": llm_answer,
    "admit_message": admit_decision,
    "provide_model_options": model_options,
    "provide_channels": _convert_channels,
}
"""Hook -> how a Bub plugin's answer becomes what hookline expects."""


class BubPluginShim:
    """What is registered for a Bub plugin: its marked functions, wrapped."""

    def __init__(self, name: str, plugin: Any) -> None:
        self.bub_name = name
        self.bub_plugin = plugin
        """The Bub plugin object itself (what ``plugin_manager.get_plugin`` returns)."""

    def __repr__(self) -> str:
        return f"<Bub plugin {self.bub_name!r}: {self.bub_plugin!r}>"


class BubGroup(PluginGroup):
    """The ``bub`` entry point group (see the module docstring)."""

    name = "bub"

    def __init__(self, framework: Any, config_file: Path | None = None) -> None:
        self.framework = framework
        framework.extensions[self.name] = self
        self._given_config_file = config_file
        self.config_file = config_file or Path.home() / ".bub" / "config.yml"
        """Bub's config file: ``config_file`` when given (a host, or a test, that must not
        read the user's), else ``bub.framework.DEFAULT_CONFIG_FILE`` once Bub is read."""
        self.originals: dict[str, Any] = {}
        """Loaded Bub plugins by name, as their entry points made them."""
        self._facades: dict[str, BubFrameworkFacade] = {}
        self.agent_tools = AgentToolTable(self)
        self.agent = AgentFacade(self, "builtin")
        """The builtin agent as Bub plugins see it (one, as Bub has one)."""
        self._tools: dict[str, dict[str, Any]] = {}
        self._pending: dict[str, dict[str, Any]] = {}
        self._providers: set[str] = set()
        self._converted: dict[int, tuple[Any, Tool]] = {}
        self._seen: dict[str, Any] = {}
        self._owners: dict[str, str] = {}
        self._prepared = False
        self._prepare_error: Exception | None = None
        self._onboard: dict[str, Any] | None = None
        self._onboard_answered: set[str] = set()
        self.onboard_interactive: bool | None = None
        """Set by ``hookline onboard``: whether it may ask (False with ``--yes``)."""

    # -- the loader's steps --------------------------------------------------------------

    def entry_points(self) -> Iterable[Any]:
        from importlib import metadata

        found = list(metadata.entry_points(group=self.name))
        if not found:
            return []
        for entry_point in found:
            dist = getattr(entry_point, "dist", None)
            if dist is not None and dist.name:
                self._owners.setdefault(_normalise(dist.name), entry_point.name)
        return [_CompatEntry(), *found]

    def load(self, entry_point: Any) -> Any:
        self._prepare()
        if isinstance(entry_point, _CompatEntry):
            return entry_point.load()
        with self._watching(entry_point.name):
            return entry_point.load()

    def plugin(self, name: str, obj: Any, framework: Any) -> Any:
        from .plugin import BubCompatPlugin

        if obj is BubCompatPlugin:
            return BubCompatPlugin(self)
        with self._watching(name):
            plugin = obj(self.facade(name)) if callable(obj) else obj
        self._claim(name)
        self.originals[name] = plugin
        return self._shim(name, plugin)

    def registered(self, name: str, plugin: Any) -> None:
        self._tools.setdefault(name, {}).update(self._pending.pop(name, {}))

    def failed(self, name: str) -> None:
        self._pending.pop(name, None)
        self._tools.pop(name, None)
        self._providers.discard(name)
        self.originals.pop(name, None)

    def retire(self, name: str, error: BaseException) -> None:
        """Take a Bub plugin out after it failed in a way that would recur every turn."""
        logger.error("bub.plugin_retired plugin=%s: %s", name, error)
        self.failed(name)
        self.framework.retire_plugin(name, error)

    def facade(self, name: str) -> BubFrameworkFacade:
        """The framework facade a Bub plugin sees (one per plugin)."""
        if name not in self._facades:
            self._facades[name] = BubFrameworkFacade(self, name)
        return self._facades[name]

    # -- Bub itself ----------------------------------------------------------------------

    def _prepare(self) -> None:
        """Once, before the first Bub plugin is imported: aliases, logging, config."""
        if self._prepared:
            if self._prepare_error is not None:
                raise self._prepare_error
            return
        self._prepared = True
        try:
            from bub import configure
            from bub.core.tools import REGISTRY
            from bub.framework import DEFAULT_CONFIG_FILE
        except (ImportError, SyntaxError) as exc:
            self._prepare_error = RuntimeError(_unusable_bub(exc))
            raise self._prepare_error from exc
        from .aliases import install_aliases, install_tool_keywords

        install_aliases()
        install_tool_keywords()
        _forward_loguru()
        try:
            self.config_file = self._given_config_file or Path(DEFAULT_CONFIG_FILE)
            configure.load(self.config_file)
        except Exception as exc:
            self._prepare_error = RuntimeError(
                f"Bub's config file {self.config_file} could not be read: "
                f"{type(exc).__name__}: {' '.join(str(exc).split())}")
            raise self._prepare_error from exc
        self._seen = dict(REGISTRY)

    # -- tools ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _watching(self, name: str) -> Iterator[None]:
        before = dict(_registry())
        modules = set(sys.modules)
        try:
            yield
        finally:
            new_modules = [module for key, module in list(sys.modules.items())
                           if key not in modules]
            self._collect(before, name, new_modules)

    def _collect(self, before: dict[str, Any], default: str | None,
                 new_modules: list[Any]) -> None:
        registry = _registry()
        for tool_name, tool in before.items():
            if tool_name not in registry:  # a plugin took it back (bub-web-search does)
                for table in (*self._tools.values(), *self._pending.values()):
                    if table.get(tool_name) is tool:
                        del table[tool_name]
        for tool_name, tool in list(registry.items()):
            if before.get(tool_name) is tool:
                continue
            owner = self._owner_of(tool, default, new_modules)
            if owner is None:
                continue
            for table in (*self._tools.values(), *self._pending.values()):
                table.pop(tool_name, None)  # replaced in the registry: the last one counts
            target = self._tools if owner in self._tools else self._pending
            target.setdefault(owner, {})[tool_name] = tool
            _OWNERS[id(tool)] = (tool, owner)
        self._seen = dict(registry)

    def _claim(self, name: str) -> None:
        """Tools of ``name`` already in the registry before it loaded here (its modules
        were imported by an earlier framework in this process): the owner recorded then,
        else the one its module's distribution names."""
        claimed = {id(tool) for table in (*self._tools.values(), *self._pending.values())
                   for tool in table.values()}
        for tool_name, tool in list(_registry().items()):
            if id(tool) in claimed:
                continue
            known = _OWNERS.get(id(tool))
            if known is not None and known[0] is tool:
                owner: str | None = known[1]
            else:
                owner = self._owner_of(tool, None, [])
                _OWNERS[id(tool)] = (tool, owner or "")
            if owner == name:
                self._pending.setdefault(name, {})[tool_name] = tool

    def _owner_of(self, tool: Any, default: str | None, modules: list[Any]) -> str | None:
        """The entry point whose distribution defines the tool; None for Bub's own."""
        module = _module_holding(tool, modules)
        if module is not None:
            top = module.partition(".")[0]
            for dist in _packages_distributions().get(top, []):
                key = _normalise(dist)
                if key == _BUB_DISTRIBUTION:
                    return None
                if key in self._owners:
                    return self._owners[key]
        return default

    def sync(self) -> None:
        """Attribute tools registered since the last look (at run time, say)."""
        registry = _registry()
        if len(registry) == len(self._seen) and all(
                self._seen.get(name) is tool for name, tool in registry.items()):
            return
        self._collect(self._seen, COMPAT_NAME, [])

    def converted(self, tool: Any) -> Tool:
        """The hookline ``Tool`` for a Bub ``Tool`` (made once per tool object)."""
        from .convert import hookline_tool

        if isinstance(tool, Tool):
            return tool
        cached = self._converted.get(id(tool))
        if cached is None or cached[0] is not tool:
            cached = (tool, hookline_tool(tool))
            self._converted[id(tool)] = cached
        return cached[1]

    def tools_for(self, name: str) -> list[Tool]:
        """The hookline tools of one Bub plugin."""
        self.sync()
        return [self.converted(tool) for tool in self._tools.get(name, {}).values()]

    def unowned_tools(self) -> list[Tool]:
        """Tools whose owner has no ``provide_tools`` of its own (registered late)."""
        self.sync()
        return [self.converted(tool) for owner, table in self._tools.items()
                if owner not in self._providers for tool in table.values()]

    def base_tools(self) -> list[Any]:
        """Every Bub tool of the loaded plugins (the agent table reads through to them)."""
        return [tool for table in self._tools.values() for tool in table.values()]

    # -- the shim ------------------------------------------------------------------------

    def _shim(self, name: str, plugin: Any) -> BubPluginShim:
        shim = BubPluginShim(name, plugin)
        for attr, _raw, value, opts in marked_routines(plugin, IMPL_PROJECTS):
            assert opts is not None  # marked_only
            setattr(shim, attr, self._wrap(name, hook_name_of(attr, opts), value, opts))
        if self._pending.get(name) or self._tools.get(name):
            self._providers.add(name)

            @hookimpl(specname="provide_tools")
            def provide_tools() -> list[Tool]:
                return self.tools_for(name)

            owner = getattr(plugin, "__name__", None) or type(plugin).__name__
            provide_tools.__qualname__ = f"{owner}.provide_tools (bub.tools)"
            shim._hookline_bub_tools = provide_tools  # type: ignore[attr-defined]
        return shim

    def _wrap(self, name: str, hook: str, function: Any, opts: Any) -> Any:
        """``function`` with its result converted for hookline and its facade errors
        confined to the plugin; generators are left as they are."""
        inner = inspect.unwrap(getattr(function, "__func__", function))
        if inspect.isgeneratorfunction(inner) or inspect.isasyncgenfunction(inner):
            return function
        if hook == "onboard_config":
            return self._wrap_onboard(name, function, opts)
        convert = _CONVERTERS.get(hook)

        def finish(value: Any) -> Any:
            return convert(value) if convert is not None and value is not None else value

        async def settle(awaitable: Any) -> Any:
            try:
                value = await awaitable
            except UnsupportedBubFeature as exc:
                self.retire(name, exc)
                return None
            return finish(value)

        wrapper: Any
        if inspect.iscoroutinefunction(function):

            async def wrapper(**kwargs: Any) -> Any:
                return await settle(function(**kwargs))
        else:

            def wrapper(**kwargs: Any) -> Any:
                try:
                    value = function(**kwargs)
                except UnsupportedBubFeature as exc:
                    self.retire(name, exc)
                    return None
                if inspect.isawaitable(value):
                    return settle(value)
                return finish(value)

        functools.update_wrapper(wrapper, function)
        wrapper.hookline_impl = opts
        return wrapper

    # -- onboarding ----------------------------------------------------------------------

    def _wrap_onboard(self, name: str, function: Any, opts: Any) -> Any:
        """A Bub ``onboard_config`` sees Bub's config (and what earlier Bub plugins
        answered), not hookline's; its answer is kept for Bub's config file
        (``save_onboard_config``) and nothing goes into hookline's."""

        def wrapper(**kwargs: Any) -> None:
            if not self._can_ask():
                logger.warning("bub.onboard_skipped plugin=%s reason=Bub's questions need an "
                               "interactive terminal (run hookline onboard without --yes)",
                               name)
                return None
            current = self._onboard_start(name)
            if "current_config" in kwargs:
                kwargs["current_config"] = current
            fragment = function(**kwargs)
            if inspect.isawaitable(fragment):  # the sync path skips it, as Bub does
                fragment.close() if inspect.iscoroutine(fragment) else None
                logger.warning("hook.async_not_supported hook=onboard_config adapter=%s", name)
                return None
            if fragment is None:
                return None
            if not isinstance(fragment, dict):
                raise TypeError("hook.onboard_config must return dict or None "
                                f"(Bub plugin {name!r} returned {type(fragment).__name__})")
            _merge_config(current, fragment)
            return None

        functools.update_wrapper(wrapper, function)
        wrapper.hookline_impl = opts  # type: ignore[attr-defined]
        return wrapper

    def _can_ask(self) -> bool:
        """Whether a Bub plugin's onboarding questions can be answered: Bub's inquirer
        opens a terminal UI, which waits forever without a terminal, so they are asked
        only when onboarding is interactive (``onboard_interactive``, else standard input
        is a terminal), or when the inquirer's functions were replaced (answers scripted)."""
        try:
            import bub.inquirer as inquirer
        except ImportError:
            return True
        own = all(getattr(getattr(inquirer, ask, None), "__module__", "") == "bub.inquirer"
                  for ask in ("ask_text", "ask_secret", "ask_select", "ask_confirm"))
        if not own:
            return True
        if self.onboard_interactive is not None:
            return self.onboard_interactive
        return sys.stdin.isatty()

    def _onboard_start(self, name: str) -> dict[str, Any]:
        """The accumulated Bub config of this onboarding pass (a plugin asked twice means
        a new pass)."""
        if self._onboard is None or name in self._onboard_answered:
            self._onboard = _config_data()
            self._onboard_answered = set()
        self._onboard_answered.add(name)
        return self._onboard

    def collect_onboard_config(self, plugin_name: str | None = None) -> dict[str, Any]:
        """What Bub's ``collect_onboard_config`` returns: Bub's config with the answers of
        the Bub plugins (``plugin_name`` only, when given), validated by Bub."""
        from bub import configure

        self._onboard = None
        self.framework.collect_onboard_config({}, plugin=plugin_name)
        data = self._onboard if self._onboard is not None else configure.get_config_data()
        return configure.validate(data)

    def save_onboard_config(self) -> Path | None:
        """Write the Bub plugins' onboarding answers to Bub's config file, as ``bub
        onboard`` does (validated by Bub's config classes), and read it again."""
        if self._onboard is None:
            return None
        from bub import configure

        data, self._onboard, self._onboard_answered = self._onboard, None, set()
        configure.save(self.config_file, data)
        configure.load(self.config_file)
        return self.config_file


_DISTRIBUTIONS: dict[str, list[str]] | None = None

_OWNERS: dict[int, tuple[Any, str]] = {}
"""Process-wide: tool id -> (the Bub tool, the entry point that registered it; "" for Bub's
own), so a second framework in the process attributes tools whose modules are imported."""


def _config_data() -> dict[str, Any]:
    """A copy of Bub's loaded config (``bub.configure.get_config_data``); empty without
    Bub."""
    try:
        from bub import configure
    except ImportError:
        return {}
    data: dict[str, Any] = configure.get_config_data()
    return data


def _merge_config(base: dict[str, Any], update: dict[str, Any]) -> None:
    """Bub's ``configure.merge`` (incoming values win, tables merge); the same rule when
    Bub cannot be imported."""
    try:
        from bub import configure
    except ImportError:
        for key, value in update.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                _merge_config(base[key], value)
            else:
                base[key] = dict(value) if isinstance(value, dict) else value
        return
    configure.merge(base, update)


def _registry() -> dict[str, Any]:
    """Bub's tool registry (``bub.tools.REGISTRY``); empty when Bub cannot be imported."""
    try:
        from bub.core.tools import REGISTRY
    except ImportError:
        return {}
    registry: dict[str, Any] = REGISTRY
    return registry


def _packages_distributions() -> dict[str, list[str]]:
    global _DISTRIBUTIONS
    if _DISTRIBUTIONS is None:
        from importlib import metadata

        _DISTRIBUTIONS = dict(metadata.packages_distributions())
    return _DISTRIBUTIONS


def _module_holding(tool: Any, first: list[Any]) -> str | None:
    """The name of a module with a global bound to ``tool`` (``@tool`` leaves one)."""
    for module in [*first, *list(sys.modules.values())]:
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        if any(value is tool for value in list(namespace.values())):
            return str(getattr(module, "__name__", "")) or None
    return None


def _unusable_bub(exc: BaseException) -> str:
    """Why Bub cannot serve the layer, and what to do: Bub 0.6 needs Python 3.12, and
    the layer needs Bub 0.6 (another release has another package layout)."""
    found = f"Bub cannot be imported ({type(exc).__name__}: {exc})"
    turn_off = f"or turn the bub plugin group off with {SWITCH_ENV}=0"
    if sys.version_info < (3, 12):
        return (f"{found}; Bub 0.6 needs Python 3.12 or newer, this is "
                f"{sys.version.split()[0]}: run hookline with Python 3.12, {turn_off}")
    from importlib import metadata

    try:
        version = metadata.version(_BUB_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        version = "of unknown version"
    return (f"{found}: the Bub compatibility layer works with Bub {SUPPORTED_BUB} and the "
            f"installed bub is {version}; install bub=={SUPPORTED_BUB}, {turn_off}")


def _forward_loguru() -> None:
    """Bub and its plugins log through loguru; send those records to ``logging``, where
    hookline's own go, instead of loguru's default handler on stderr."""
    try:
        from loguru import logger as loguru_logger
    except ImportError:  # pragma: no cover - Bub depends on loguru
        return
    if getattr(_forward_loguru, "done", False):
        return
    _forward_loguru.done = True  # type: ignore[attr-defined]

    def sink(message: Any) -> None:
        record = message.record
        level = logging.getLevelName(record["level"].name)
        if not isinstance(level, int):
            level = logging.INFO if record["level"].no < 30 else logging.WARNING
        logging.getLogger(record["name"] or "bub").log(level, "%s", record["message"])

    with contextlib.suppress(ValueError):
        loguru_logger.remove(0)  # loguru's default stderr handler
    loguru_logger.add(sink, level="DEBUG", format="{message}")
