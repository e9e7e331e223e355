"""`hookline plugins check TARGET`: validate a plugin without starting anything.

The target is imported and each plugin object is built the way `load_hooks()` builds it
(a callable entry point is called with a framework), then checked by the kernel's own
`Registry.validate` (markers, signatures, unknown hooks), plus what only a checker can
afford to look at: defaults that hide hook arguments, `async def` on hooks dispatched on
a sync path, and return annotations that contradict the hook's spec. Nothing is started:
no `running()`, no lifespans, no turns. Every problem becomes one `file:line` line, so an
editor or a CI log links straight to it. The command itself is in cli/plugins.py, which
imports this module only when `check` runs.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import types
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hookline.kernel import (
    ENTRY_POINT_GROUP,
    HOOK_SPECS,
    Framework,
    HookImpl,
    PluginProblem,
    Registry,
)
from hookline.kernel.framework import BUILTIN_NAME
from hookline.kernel.hooks import IMPL_PROJECTS

from .check_hooks import Severity, extra_checks


@dataclass(frozen=True)
class Finding:
    """One problem, in the shape both outputs share (the JSON object is its fields)."""

    file: str
    line: int
    plugin: str
    hook: str | None
    function: str | None
    code: str
    message: str
    fix: str
    severity: Severity = "error"
    source: str | None = None
    """For a problem of the plugin as a whole: the entry point's `module:attr`, or the
    target as given."""
    direct: bool = False
    """True when `source` is the command line's target rather than an entry point."""

    def as_dict(self) -> dict[str, Any]:
        """The JSON object of one problem."""
        data = asdict(self)
        del data["direct"]
        return data

    def text(self) -> str:
        """`file:line: [plugin P] hook H, function F: message; fix: ...`"""
        subject = f"[plugin {self.plugin}]"
        if self.hook is not None:
            subject += f" hook {self.hook}"
            if self.function is not None:
                subject += f", function {self.function}"
        elif self.source is not None:
            subject += f" {'target' if self.direct else 'entry point'} {self.source}"
        level = "warning: " if self.severity == "warning" else ""
        fix = f"; fix: {self.fix}" if self.fix else ""
        return f"{self.file}:{self.line}: {subject}: {level}{self.message}{fix}"


class TargetError(Exception):
    """The target cannot be found or read: a usage error (exit status 2)."""


@dataclass(frozen=True)
class Source:
    """One plugin to check: its name, what to import, and where it is declared."""

    name: str
    value: str
    """`module` or `module:attr`, as an entry point writes it."""
    declared_in: str | None = None
    """The file declaring it (pyproject.toml, entry_points.txt); None for a direct target."""
    declared_line: int = 1


@dataclass
class Outcome:
    """What checking one target found."""

    plugins: list[str]
    findings: list[Finding]


# -- targets -------------------------------------------------------------------------


def resolve_target(target: str) -> list[Source]:
    """The plugins `target` names; `TargetError` when it names nothing checkable.

    A folder (or its pyproject.toml) -> its `hookline` entry points; `module:object` ->
    that object; a name -> an installed distribution's `hookline` entry points if it has
    any, else the module of that name.
    """
    path = Path(target).expanduser()
    if path.name == "pyproject.toml" and path.is_file():
        path = path.parent
    if path.is_dir():
        return _folder_sources(path.resolve())
    if os.sep in target or target.endswith(".toml"):
        raise TargetError(f"no folder {target!r}")
    # Modules are looked up as `python -m` does: the current folder first.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    if ":" in target:
        module, _, attr = target.partition(":")
        if not module or not attr:
            raise TargetError(f"{target!r} is not of the form module:object")
        _require_module(module, target)
        return [Source(attr.rpartition(".")[2], target)]
    distribution = _distribution(target)
    if distribution is not None:
        sources = _distribution_sources(distribution)
        if sources:
            return sources
    if _module_exists(target):
        return [Source(target, target)]
    if distribution is not None:
        raise TargetError(f"the distribution {target!r} declares no entry points in the "
                          f"{ENTRY_POINT_GROUP!r} group")
    raise TargetError(f"{target!r} is no folder, importable module or installed distribution")


def _module_exists(module: str) -> bool:
    """True when `module` can be imported from here (a failing parent package counts:
    its failure is then reported as a finding)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False
    except Exception:  # the parent package fails to import: that is the plugin's problem
        return True


def _require_module(module: str, target: str) -> None:
    if not _module_exists(module):
        raise TargetError(f"cannot check {target!r}: no module named {module!r}")


def _folder_sources(folder: Path) -> list[Source]:
    """The `[project.entry-points.hookline]` entries of `folder/pyproject.toml`, with the
    folder (and its `src/`) put first on the import path."""
    import tomllib

    pyproject = folder / "pyproject.toml"
    if not pyproject.is_file():
        raise TargetError(f"{_display(folder)} has no pyproject.toml")
    text = pyproject.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TargetError(f"{_display(pyproject)} cannot be read: {exc}") from exc
    table = data.get("project", {}).get("entry-points", {}).get(ENTRY_POINT_GROUP)
    if not isinstance(table, dict) or not table:
        raise TargetError(f"{_display(pyproject)} has no [project.entry-points."
                          f"{ENTRY_POINT_GROUP}] table: nothing to check")
    for root in (folder, folder / "src"):
        if root.is_dir() and str(root) not in sys.path:
            sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    sources = [Source(str(name), str(value), str(pyproject), _declaration_line(text, str(name)))
               for name, value in table.items()]
    for source in sources:
        _forget_other_copies(source.value.partition(":")[0], folder)
    return sources


def _declaration_line(text: str, name: str) -> int:
    """The line of `name = ...` (quoted or not) in the `hookline` table of a TOML text
    (`[project.entry-points.hookline]`) or section of an INI one (`[hookline]`), else 1."""
    import re

    header = re.compile(r"\[\s*(project\.entry-points\.)?[\"']?" + re.escape(ENTRY_POINT_GROUP)
                        + r"[\"']?\s*\]")
    inside = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("["):
            inside = header.fullmatch(stripped) is not None
            continue
        key = line.split("=", 1)[0].strip().strip("\"'")
        if inside and "=" in line and key == name:
            return number
    return 1


def _forget_other_copies(module: str, folder: Path) -> None:
    """Drop an already imported copy of `module`'s package from outside `folder` (loading
    the installed plugins imported it), so the folder's own code is what is checked."""
    top = module.split(".")[0]
    if top == __name__.split(".")[0]:  # never hookline itself: this command runs on it
        return
    loaded = sys.modules.get(top)
    origin = getattr(loaded, "__file__", None)
    if loaded is None or (origin and Path(origin).resolve().is_relative_to(folder)):
        return
    for name in [n for n in sys.modules if n == top or n.startswith(f"{top}.")]:
        del sys.modules[name]


def _distribution(name: str) -> Any:
    from importlib import metadata

    try:
        return metadata.distribution(name)
    except (metadata.PackageNotFoundError, ValueError):
        return None


def _distribution_sources(distribution: Any) -> list[Source]:
    """The distribution's `hookline` entry points, declared in its entry_points.txt."""
    found = [ep for ep in distribution.entry_points if ep.group == ENTRY_POINT_GROUP]
    info = getattr(distribution, "_path", None)  # the .dist-info folder, when on disk
    declared = str(Path(info) / "entry_points.txt") if info else None
    text = distribution.read_text("entry_points.txt") or ""
    return [Source(ep.name, ep.value, declared, _declaration_line(text, ep.name))
            for ep in found]


# -- checking ------------------------------------------------------------------------


def check_target(target: str, workspace: Path) -> Outcome:
    """Load and check every plugin `target` names (`TargetError` if it names none)."""
    sources = resolve_target(target)
    findings: list[Finding] = []
    for source in sources:
        findings += check_source(source, workspace, direct=source.declared_in is None)
    return Outcome([source.name for source in sources], findings)


def check_source(source: Source, workspace: Path, *, direct: bool = False) -> list[Finding]:
    """Import one plugin, build it as `load_hooks()` would, and check it."""
    module_name, _, attr = source.value.partition(":")
    module_name, attr = module_name.strip(), attr.strip().split("[")[0].strip()
    declared = (source.declared_in or "<command line>", source.declared_line)

    def entry(code: str, message: str, fix: str, where: tuple[str, int] = declared) -> Finding:
        return Finding(_display(where[0]), where[1], source.name, None, None, code, message,
                       fix, source=source.value, direct=direct)

    if not direct and source.name == BUILTIN_NAME:
        return [entry("name-taken", f"the entry point is named {BUILTIN_NAME!r}, the name of "
                                    f"hookline's builtin plugin: load_hooks() refuses it",
                      "give the entry point another name (left of '=')")]

    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(f"{exc.name}.")):
            if direct:
                raise TargetError(f"no module named {module_name!r}") from exc
            return [entry("module-not-found", f"module {module_name!r} cannot be found",
                          "check the module name, or install the package that provides it")]
        return [entry("import-failed", f"importing {module_name!r} failed: {_error(exc)}",
                      "install the missing dependency or fix the import",
                      _error_location(exc) or declared)]
    except BaseException as exc:  # SyntaxError, or anything the module raises at import
        if isinstance(exc, KeyboardInterrupt):
            raise
        return [entry("import-failed", f"importing {module_name!r} failed: {_error(exc)}",
                      "fix the error; the module must import cleanly",
                      _error_location(exc) or declared)]
    obj: Any = module
    for part in attr.split(".") if attr else ():
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            if direct:
                raise TargetError(f"module {module_name!r} has no attribute {attr!r}") from exc
            return [entry("attribute-missing",
                          f"module {module_name!r} has no attribute {attr!r}",
                          "fix the entry point's object name, or define it in the module")]
    plugin = obj
    if callable(obj):
        # As load_hooks() does: a callable entry point is a factory of the framework.
        try:
            plugin = obj(Framework(workspace))
        except Exception as exc:
            fix = ("an entry point that is callable is called with the framework as its only "
                   "argument and must return the plugin object")
            if isinstance(obj, type) and isinstance(exc, TypeError):
                fix = ("a class named by an entry point is instantiated with the framework: "
                       "give it __init__(self, framework), or name an instance or a module")
            return [entry("factory-failed",
                          f"calling {source.value} with the framework failed: {_error(exc)}",
                          fix, _factory_location(obj, exc) or declared)]
        if plugin is None:
            return [entry("factory-returned-none",
                          f"calling {source.value} with the framework returned None",
                          "return the plugin object from the factory",
                          _definition_location(obj) or declared)]
    elif isinstance(obj, str | bytes | int | float | bool | list | tuple | dict | set):
        return [entry("not-a-plugin",
                      f"{source.value} is of type {type(obj).__name__}, neither a plugin "
                      f"object nor a factory",
                      "point the entry point at a module, a class, an instance or a factory "
                      "function")]
    return check_plugin(plugin, source.name, fallback=declared, source=source.value,
                        direct=direct)


def check_plugin(plugin: object, name: str, *, fallback: tuple[str, int] = ("<unknown>", 1),
                 source: str | None = None, direct: bool = False) -> list[Finding]:
    """The findings on one plugin object: the kernel's `validate`, then the extra checks."""
    registry = Registry(HOOK_SPECS, projects=IMPL_PROJECTS)
    result = registry.validate(plugin, name)
    by_location = {(impl.function_name, impl.location): impl for impl in result.impls}
    findings = []
    for problem in result.problems:
        impl = by_location.get((problem.function_name, problem.location))
        findings.append(_from_problem(problem, impl))
    for impl in result.impls:
        spec = HOOK_SPECS.get(impl.hook_name)
        if spec is not None:
            findings += [_finding(impl, *found) for found in extra_checks(impl, spec)]
    if not result.impls:
        where = _definition_location(plugin) or fallback
        fix = ("mark its hook functions with @hookimpl (a class registered as a plugin needs "
               "staticmethods or classmethods; an instance or a factory's result, methods)")
        if isinstance(plugin, types.ModuleType) and (inside := _plugin_classes(plugin, registry)):
            fix = (f"a module's classes are not registered: name the plugin object, "
                   f"{' or '.join(f'{plugin.__name__}:{c}' for c in inside)}")
        findings.append(Finding(
            _display(where[0]), where[1], name, None, None, "no-hooks",
            "has no hook implementations (no function marked with @hookimpl)", fix,
            source=source, direct=direct))
    return sorted(findings, key=lambda f: (f.file, f.line))  # stable: the kernel's order


def _plugin_classes(module: types.ModuleType, registry: Registry) -> list[str]:
    """Names of the classes defined in `module` that carry marked implementations."""
    found = []
    for attr, value in vars(module).items():
        if (isinstance(value, type) and value.__module__ == module.__name__
                and registry.validate(value, attr).impls):
            found.append(attr)
    return found


def _from_problem(problem: PluginProblem, impl: HookImpl | None) -> Finding:
    severity: Severity = "error" if problem.fatal else "warning"
    fix = problem.fix
    if problem.code == "unknown-hook":
        optional = impl is not None and impl.opts.optionalhook
        severity = "warning" if optional else "error"
        if not optional:
            fix += " (or mark it optionalhook=True if it is for a hook of a newer hookline)"
    file, line = _split_location(problem.location)
    return Finding(file, line, problem.plugin_name, problem.hook_name, problem.function_name,
                   problem.code, problem.reason, fix, severity)


def _finding(impl: HookImpl, code: str, message: str, fix: str,
             severity: Severity = "error") -> Finding:
    file, line = _split_location(impl.location)
    return Finding(file, line, impl.plugin_name, impl.hook_name, impl.function_name, code,
                   message, fix, severity)


# -- locations -----------------------------------------------------------------------


def _display(path: str | os.PathLike[str]) -> str:
    """A path relative to the current folder when it is inside it (shorter CI logs)."""
    text = str(path)
    if text.startswith("<"):
        return text
    try:
        return os.path.relpath(text) if Path(text).resolve().is_relative_to(Path.cwd()) else text
    except (OSError, ValueError):
        return text


def _split_location(location: str) -> tuple[str, int]:
    file, _, line = location.rpartition(":")
    if not file or not line.isdigit():
        return location, 1
    return _display(file), int(line)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _error_location(exc: BaseException) -> tuple[str, int] | None:
    """Where an import failed: a SyntaxError's own place, else the innermost frame that is
    not the import machinery."""
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return _display(exc.filename), exc.lineno
    frames = [(frame.f_code.co_filename, line)
              for frame, line in _walk_tb(exc.__traceback__)
              if not frame.f_code.co_filename.startswith("<")
              and "importlib" not in frame.f_code.co_filename
              and frame.f_code.co_filename != __file__]
    return (_display(frames[-1][0]), frames[-1][1]) if frames else None


def _walk_tb(tb: types.TracebackType | None) -> Iterator[tuple[types.FrameType, int]]:
    while tb is not None:
        yield tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next


def _definition_location(obj: object) -> tuple[str, int] | None:
    """`file:line` where a module, class or function is defined, when it is in a file."""
    target = obj if isinstance(obj, types.ModuleType | type) or inspect.isroutine(obj) \
        else type(obj)
    try:
        file = inspect.getsourcefile(target)  # type: ignore[arg-type]
        if file is None:
            return None
        if isinstance(target, types.ModuleType):
            return _display(file), 1
        code = getattr(inspect.unwrap(target), "__code__", None)  # type: ignore[arg-type]
        line = code.co_firstlineno if code is not None else inspect.getsourcelines(target)[1]
        return _display(file), line
    except (OSError, TypeError):
        return None


def _factory_location(factory: object, exc: BaseException) -> tuple[str, int] | None:
    """Where a factory failed: its innermost frame in the factory's own file, else its
    definition (a wrong signature fails before any of its code runs)."""
    defined = _definition_location(factory)
    if defined is not None:
        inside = [line for frame, line in _walk_tb(exc.__traceback__)
                  if _display(frame.f_code.co_filename) == defined[0]]
        if inside:
            return defined[0], inside[-1]
    return defined
