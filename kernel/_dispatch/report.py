"""The hook report: what is bound to each hook, for humans and for tools."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from .impl import HookImpl, UnknownImpl
from .specs import DispatchKind

if TYPE_CHECKING:
    from .registry import Registry


class ImplInfo(NamedTuple):
    """One implementation as reports show it."""

    plugin: str
    function: str
    markers: tuple[str, ...]
    flavor: str
    location: str

    @classmethod
    def of(cls, impl: HookImpl) -> ImplInfo:
        return cls(impl.plugin_name, impl.function_name, impl.opts.labels, impl.flavor,
                   impl.location)

    def label(self) -> str:
        extras = [*self.markers, self.flavor] if self.flavor != "sync" else list(self.markers)
        return f"{self.plugin}" + (f" [{', '.join(extras)}]" if extras else "")


class HookBinding(NamedTuple):
    """One hook: execution order (what runs first comes first) and stored order."""

    name: str
    kind: DispatchKind | None
    """Dispatch kind from the spec, or None for a hook name no spec declares."""
    doc: str
    execution: tuple[ImplInfo, ...]
    stored: tuple[ImplInfo, ...]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form: the fields, with each implementation as a dict."""
        return {
            "name": self.name,
            "kind": self.kind,
            "doc": self.doc,
            "execution": tuple(info._asdict() for info in self.execution),
            "stored": tuple(info._asdict() for info in self.stored),
        }


class HookReport(NamedTuple):
    """Bindings of every specified hook (also those without implementations), then of
    unspecified names that have implementations, and the unknown-hook diagnostics."""

    hooks: tuple[HookBinding, ...]
    unknown: tuple[UnknownImpl, ...]

    def binding(self, name: str) -> HookBinding:
        return next(hook for hook in self.hooks if hook.name == name)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "hooks": [hook.as_dict() for hook in self.hooks],
            "unknown": [{**entry._asdict(), "message": entry.message()}
                        for entry in self.unknown],
        }

    def format(self) -> str:
        """Plain text: one line per hook, execution order, stored order beside it."""
        lines = []
        for hook in self.hooks:
            if hook.execution:
                run = " > ".join(info.label() for info in hook.execution)
                stored = ", ".join(info.plugin for info in hook.stored)
                lines.append(f"{hook.name}: runs {run}  (stored: {stored})")
            else:
                lines.append(f"{hook.name}: (no hook implementations)")
        lines += [f"warning: {entry.message()}" for entry in self.unknown]
        return "\n".join(lines)


def build_report(registry: Registry) -> HookReport:
    hooks = []
    for name in registry.hook_names():
        spec = registry.specs.get(name)
        hooks.append(
            HookBinding(
                name=name,
                kind=spec.kind if spec else None,
                doc=spec.doc if spec else "",
                execution=tuple(ImplInfo.of(i) for i in registry.hook_impls(name)),
                stored=tuple(ImplInfo.of(i) for i in registry.stored_impls(name)),
            )
        )
    return HookReport(tuple(hooks), registry.unknown_impls)
