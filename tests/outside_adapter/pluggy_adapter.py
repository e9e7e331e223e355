"""A conformance adapter for plain pluggy (1.7), written from docs/conformance-adapters.md.

The kernel is a pluggy PluginManager: pluggy registers, validates, orders and names the
plugins. Pluggy cannot await, so the dispatch loop below walks the hook's implementations
as pluggy's own call loop does (last added first, each receiving its `argnames`), awaits
on the async calls and skips awaitables on the sync ones. It imports only pluggy and the
standard library.

    hookline-conformance --adapter ./pluggy_adapter.py:make --expected pluggy_expected.toml
"""

import difflib
import inspect
import logging

import pluggy

PROJECT = "outside"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
log = logging.getLogger("outside.kernel")


class Hooks:
    """The eleven hooks of the dispatch fixtures, with the contract's parameters."""

    @hookspec
    def resolve_session(self, message): ...
    @hookspec
    def load_state(self, message, session_id): ...
    @hookspec
    def save_state(self, session_id, state, message, model_output): ...
    @hookspec
    def dispatch_outbound(self, message): ...
    @hookspec
    def provide_model_options(self, session_id, workspace): ...
    @hookspec
    def provide_tools(self): ...
    @hookspec
    def provide_channels(self, message_handler): ...
    @hookspec
    def provide_tape_sidecar(self): ...
    @hookspec
    def provide_tape_store(self): ...
    @hookspec
    def build_tape_context(self): ...
    @hookspec
    def on_error(self, stage, error, message): ...


HOOKS = [name for name in vars(Hooks) if not name.startswith("_")]


class PluggyKernel:
    def __init__(self):
        self.pm = pluggy.PluginManager(PROJECT)
        self.pm.add_hookspecs(Hooks)
        self.unknown = []  # {"plugin", "hook", "suggestion"}, in registration order

    def register(self, plugin, name):
        self.pm.register(plugin, name=name)  # raises ValueError / PluginValidationError
        for caller in self.pm.get_hookcallers(plugin) or []:
            if caller.has_spec():
                continue
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin:
                    close = difflib.get_close_matches(caller.name, HOOKS, n=1)
                    suggestion = close[0] if close else ""
                    self.unknown.append(
                        {"plugin": name, "hook": caller.name, "suggestion": suggestion})
                    log.warning("hook.unknown_hook hook=%s adapter=%s suggestion=%s",
                                caller.name, name, suggestion)

    def unregister(self, name):
        self.pm.unregister(name=name)
        self.unknown = [entry for entry in self.unknown if entry["plugin"] != name]

    def plugin_names(self):
        return [name for name, plugin in self.pm.list_name_plugin() if plugin is not None]

    def _impls(self, hook):
        """The hook's implementations in execution order (pluggy runs its list backwards)."""
        caller = getattr(self.pm.hook, hook, None)
        return list(reversed(caller.get_hookimpls())) if caller is not None else []

    def execution_order(self, hook):
        return [impl.function for impl in self._impls(hook)]

    def stored_order(self, hook):
        caller = getattr(self.pm.hook, hook, None)
        return [impl.function for impl in caller.get_hookimpls()] if caller else []

    def unknown_hooks(self):
        return [dict(entry) for entry in self.unknown]

    def dispatch(self, call, hook, kwargs):
        observe = call.startswith("notify_error")
        if observe:
            hook, kwargs = "on_error", {"message": None, **kwargs}
        first = call.startswith("call_first")
        if call.endswith("_sync"):
            return self._call_sync(hook, kwargs, first, observe)
        return self._call(hook, kwargs, first, observe)

    def _calls(self, hook, kwargs):
        """(plugin name, a function calling the implementation) in execution order; each
        receives its argnames, by keyword, as pluggy passes them."""
        for impl in self._impls(hook):
            args = {name: kwargs[name] for name in impl.argnames if name in kwargs}
            yield impl.plugin_name, (lambda impl=impl, args=args: impl.function(**args))

    def _failed(self, observe, kwargs, name):
        if not observe:
            return False
        log.warning("hook.on_error_failed stage=%s adapter=%s", kwargs.get("stage"), name)
        return True

    def _call_sync(self, hook, kwargs, first, observe):
        results = []
        for name, run in self._calls(hook, kwargs):
            try:
                value = run()
            except Exception:
                if self._failed(observe, kwargs, name):
                    continue
                raise
            if inspect.isawaitable(value):
                log.warning("hook.async_not_supported hook=%s adapter=%s", hook, name)
                if inspect.iscoroutine(value):
                    value.close()
                continue
            if first and value is not None:
                return value
            results.append(value)
        return None if first or observe else results

    async def _call(self, hook, kwargs, first, observe):
        results = []
        for name, run in self._calls(hook, kwargs):
            try:
                value = run()
                if inspect.isawaitable(value):
                    value = await value
            except Exception:
                if self._failed(observe, kwargs, name):
                    continue
                raise
            if first and value is not None:
                return value
            results.append(value)
        return None if first or observe else results


class PluggyAdapter:
    name = "pluggy-outside"
    protocol = 1

    def mark(self, function, options):
        return hookimpl(**options)(function)

    def new_kernel(self):
        return PluggyKernel()


make = PluggyAdapter
