"""Plugin loading through real ``importlib.metadata`` entry points.

Every test builds its own distributions on disk (``<name>-0.1.dist-info`` with METADATA and
entry_points.txt) in ``tmp_path`` and puts that folder on ``sys.path``. Plugin, module and
distribution names carry a per-test unique prefix, and assertions only look at those names,
so other installed ``hookline`` entry points do not matter.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from hookline.kernel import hookimpl
from hookline.kernel.framework import loading as loading_module
from hookline.kernel.framework.core import Framework
from hookline.kernel.framework.loading import (
    DISABLE_ENV,
    STRICT_ENV,
    PluginLoader,
    PluginLoadError,
    PluginStatus,
    may_declare_entry_points,
)

LOADING_LOGGER = "hookline.kernel.framework.loading"

# A module whose attributes cover every plugin shape the tests need. ``{tag}`` is replaced
# by the test's unique prefix so the answers identify the module they came from.
PLUGINS_SOURCE = """
from hookline.kernel import hookimpl

CREATED = []


class Plugin:
    def __init__(self, answer="{tag}-object"):
        self.answer = answer

    @hookimpl
    def resolve_session(self, message):
        return self.answer


plugin = Plugin()
other = Plugin("{tag}-other")


class WithFramework:
    def __init__(self, framework):
        CREATED.append(("class", framework))
        self.framework = framework

    @hookimpl
    def load_state(self, message, session_id):
        return {{"from": "class"}}


def factory(framework):
    CREATED.append(("factory", framework))
    return Plugin("{tag}-factory")


def failing_factory(framework):
    raise ValueError("factory exploded")


@hookimpl
def build_prompt(message, session_id, state):
    return "{tag}-module"
"""


@dataclass
class Site:
    """A folder on sys.path holding fake distributions for one test."""

    root: Path
    tag: str
    modules: list[str] = field(default_factory=list)

    def name(self, suffix: str) -> str:
        """A unique plugin, module or distribution name for this test."""
        return f"{self.tag}_{suffix}"

    def module(self, suffix: str, source: str) -> str:
        module_name = self.name(suffix)
        (self.root / f"{module_name}.py").write_text(
            textwrap.dedent(source).replace("{tag}", self.tag).replace("{{", "{")
            .replace("}}", "}"),
            encoding="utf-8",
        )
        self.modules.append(module_name)
        return module_name

    def plugins_module(self, suffix: str = "plugins") -> str:
        return self.module(suffix, PLUGINS_SOURCE)

    def distribution(self, suffix: str, entry_points: list[tuple[str, str]]) -> str:
        dist_name = self.name(suffix)
        info = self.root / f"{dist_name}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: 0.1\n", encoding="utf-8"
        )
        lines = ["[hookline]", *(f"{name} = {value}" for name, value in entry_points)]
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        importlib.invalidate_caches()
        return dist_name

    def entry_points(self) -> list[metadata.EntryPoint]:
        """This test's entry points, as the metadata API yields them, in its order."""
        return [ep for ep in metadata.entry_points(group="hookline") if self.owns(ep.name)]

    def owns(self, name: str) -> bool:
        return name.startswith(self.tag)

    def statuses(self, framework: Framework) -> dict[str, PluginStatus]:
        return {k: v for k, v in framework.plugin_status().items() if self.owns(k)}

    def registered(self, framework: Framework) -> list[str]:
        return [
            name for name, _ in framework.registry.list_name_plugin()
            if self.owns(name) or name == "builtin"
        ]


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    monkeypatch.delenv(STRICT_ENV, raising=False)
    # The real builtins package may grow a create_plugin; these tests control it.
    monkeypatch.setattr(loading_module, "find_builtin_plugin", lambda: None)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    result = Site(tmp_path, f"hl{uuid.uuid4().hex[:10]}")
    yield result
    for module_name in result.modules:
        sys.modules.pop(module_name, None)
    importlib.invalidate_caches()


def test_framework_constructor_registers_nothing(site: Site) -> None:
    module = site.plugins_module()
    site.distribution("dist", [(site.name("a"), f"{module}:plugin")])
    framework = Framework()
    assert framework.registry.list_name_plugin() == []
    assert framework.plugin_status() == {}
    assert framework.hook_report() is not None
    assert framework.registry.hook_impls("resolve_session") == ()


def test_plugin_object_registered_under_entry_point_name(site: Site) -> None:
    module = site.plugins_module()
    name = site.name("obj")
    site.distribution("dist", [(name, f"{module}:plugin")])
    assert [ep.name for ep in site.entry_points()] == [name]

    framework = Framework()
    framework.load_hooks()

    loaded = sys.modules[module]
    assert framework.registry.get_plugin(name) is loaded.plugin
    status = framework.plugin_status()[name]
    assert status == PluginStatus(name, True, "loaded", f"{module}:plugin")
    mine = [i for i in framework.registry.hook_impls("resolve_session") if site.owns(i.plugin_name)]
    assert [impl.plugin_name for impl in mine] == [name]
    assert mine[0].call({"message": {}}) == f"{site.tag}-object"


def test_module_entry_point_is_a_plugin_object(site: Site) -> None:
    module = site.plugins_module()
    name = site.name("mod")
    site.distribution("dist", [(name, module)])
    framework = Framework()
    framework.load_hooks()
    assert framework.registry.get_plugin(name) is sys.modules[module]
    assert framework.plugin_status()[name].ok
    assert name in {impl.plugin_name for impl in framework.registry.hook_impls("build_prompt")}


@pytest.mark.parametrize("attr", ["WithFramework", "factory"])
def test_callable_entry_point_is_called_with_the_framework(site: Site, attr: str) -> None:
    module = site.plugins_module()
    name = site.name("callable")
    site.distribution("dist", [(name, f"{module}:{attr}")])
    framework = Framework()
    framework.load_hooks()

    loaded = sys.modules[module]
    assert len(loaded.CREATED) == 1
    kind, received = loaded.CREATED[0]
    assert received is framework
    plugin = framework.registry.get_plugin(name)
    assert plugin is not None
    if attr == "WithFramework":
        assert kind == "class"
        assert isinstance(plugin, loaded.WithFramework)
        assert plugin.framework is framework
    else:
        assert kind == "factory"
        assert isinstance(plugin, loaded.Plugin)
        assert plugin.answer == f"{site.tag}-factory"
    assert framework.plugin_status()[name].ok


def test_import_failure_is_recorded_logged_and_others_still_load(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    good = site.plugins_module()
    broken = site.module("broken", "raise RuntimeError('import exploded')\n")
    first, bad, last = site.name("first"), site.name("bad"), site.name("last")
    site.distribution(
        "dist",
        [(first, f"{good}:plugin"), (bad, f"{broken}:plugin"), (last, f"{good}:other")],
    )
    framework = Framework()
    with caplog.at_level(logging.WARNING, logger=LOADING_LOGGER):
        framework.load_hooks()

    statuses = site.statuses(framework)
    assert statuses[first].ok and statuses[last].ok
    failed = statuses[bad]
    assert failed.ok is False
    assert isinstance(failed.error, RuntimeError)
    assert "import exploded" in failed.detail
    assert failed.detail.startswith("RuntimeError")
    assert failed.source == f"{broken}:plugin"
    assert not framework.registry.has_plugin(bad)
    assert site.registered(framework) == [first, last]
    messages = [r.getMessage() for r in caplog.records if r.name == LOADING_LOGGER]
    assert any(f"Failed to load plugin {bad!r}" in m and "import exploded" in m
               for m in messages)
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name == LOADING_LOGGER)


def test_missing_module_and_missing_attribute_are_recorded(site: Site) -> None:
    good = site.plugins_module()
    no_module, no_attr = site.name("nomodule"), site.name("noattr")
    site.distribution(
        "dist",
        [(no_module, f"{site.name('does_not_exist')}:plugin"), (no_attr, f"{good}:nothing")],
    )
    framework = Framework()
    framework.load_hooks()
    statuses = site.statuses(framework)
    assert isinstance(statuses[no_module].error, ImportError)
    assert isinstance(statuses[no_attr].error, AttributeError)
    assert not statuses[no_module].ok and not statuses[no_attr].ok


def test_factory_that_raises_is_recorded_and_logged(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    module = site.plugins_module()
    bad, good = site.name("badfactory"), site.name("good")
    site.distribution("dist", [(bad, f"{module}:failing_factory"), (good, f"{module}:plugin")])
    framework = Framework()
    with caplog.at_level(logging.WARNING, logger=LOADING_LOGGER):
        framework.load_hooks()

    statuses = site.statuses(framework)
    assert statuses[bad].ok is False
    assert isinstance(statuses[bad].error, ValueError)
    assert "factory exploded" in statuses[bad].detail
    assert statuses[good].ok
    assert site.registered(framework) == [good]
    assert any(
        f"Failed to initialize plugin {bad!r}" in r.getMessage() for r in caplog.records
    )


def test_invalid_plugin_is_recorded_and_leaves_nothing_registered(site: Site) -> None:
    module = site.module(
        "invalid",
        """
        from hookline.kernel import hookimpl

        class Invalid:
            @hookimpl
            def load_state(self, message, not_a_parameter):
                return {}

        plugin = Invalid()
        """,
    )
    name = site.name("invalid")
    site.distribution("dist", [(name, f"{module}:plugin")])
    framework = Framework()
    framework.load_hooks()
    status = framework.plugin_status()[name]
    assert status.ok is False
    assert "not_a_parameter" in status.detail
    assert not framework.registry.has_plugin(name)


def test_disabled_plugins_are_skipped(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    module = site.plugins_module()
    a, b, c = site.name("a"), site.name("b"), site.name("c")
    site.distribution(
        "dist", [(a, f"{module}:plugin"), (b, f"{module}:factory"), (c, f"{module}:other")]
    )
    monkeypatch.setenv(DISABLE_ENV, f"{a}, {b}")
    framework = Framework()
    framework.load_hooks()

    statuses = site.statuses(framework)
    assert statuses[a].ok is False and statuses[a].detail == "disabled"
    assert statuses[b].ok is False and statuses[b].detail == "disabled"
    assert statuses[c].ok
    assert site.registered(framework) == [c]
    # A disabled factory is never called.
    assert sys.modules[module].CREATED == []


def test_disabled_plugin_that_would_fail_to_import_is_not_imported(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = site.module("broken", "raise RuntimeError('must not be imported')\n")
    name = site.name("off")
    site.distribution("dist", [(name, f"{broken}:plugin")])
    monkeypatch.setenv(DISABLE_ENV, name)
    monkeypatch.setenv(STRICT_ENV, "1")
    framework = Framework()
    framework.load_hooks()
    assert framework.plugin_status()[name].detail == "disabled"
    assert broken not in sys.modules


def test_strict_mode_raises_at_the_first_failure(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = site.plugins_module()
    broken = site.module("broken", "raise RuntimeError('import exploded')\n")
    ok, bad, bad2 = site.name("ok"), site.name("bad"), site.name("bad2")
    site.distribution(
        "dist",
        [(ok, f"{good}:plugin"), (bad, f"{broken}:plugin"), (bad2, f"{good}:missing")],
    )
    monkeypatch.setenv(STRICT_ENV, "1")
    framework = Framework()
    loader = PluginLoader(framework)
    with pytest.raises(PluginLoadError) as info:
        loader.load(site.entry_points())

    assert bad in str(info.value)
    assert info.value.status.name == bad
    assert isinstance(info.value.__cause__, RuntimeError)
    assert bad in loader.status and bad2 not in loader.status


def test_strict_mode_raises_for_a_failing_factory(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = site.plugins_module()
    name = site.name("badfactory")
    site.distribution("dist", [(name, f"{module}:failing_factory")])
    monkeypatch.setenv(STRICT_ENV, "true")
    framework = Framework()
    with pytest.raises(PluginLoadError, match=name):
        PluginLoader(framework).load(site.entry_points())


def test_strict_mode_says_how_to_get_past_a_name_another_plugin_took(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Skipping a name two plugins share would skip both: the fix is the distribution."""
    module = site.plugins_module()
    site.distribution("impostor", [("builtin", f"{module}:other")])
    monkeypatch.setattr(loading_module, "find_builtin_plugin", lambda: lambda fw: object())
    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(PluginLoadError) as info:
        Framework().load_hooks()
    said = str(info.value)
    assert "already registered" in said and "uninstall the distribution" in said
    assert "would skip the other plugin too" in said


def test_builtin_plugin_first_then_entry_points_in_metadata_order(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = site.plugins_module()
    # Deliberately not alphabetical: the loader must keep the metadata order.
    names = [site.name("zeta"), site.name("alpha"), site.name("mid")]
    site.distribution(
        "dist",
        [(names[0], f"{module}:plugin"), (names[1], f"{module}:other"),
         (names[2], f"{module}:factory")],
    )
    created: list[Any] = []

    class Builtin:
        @hookimpl
        def resolve_session(self, message):
            return "builtin"

    def create_plugin(framework: Framework) -> Builtin:
        created.append(framework)
        return Builtin()

    monkeypatch.setattr(loading_module, "find_builtin_plugin", lambda: create_plugin)
    framework = Framework()
    framework.load_hooks()

    assert created == [framework]
    assert framework.registry.list_name_plugin()[0][0] == "builtin"
    assert site.registered(framework) == ["builtin", *names]
    assert [ep.name for ep in site.entry_points()] == names
    assert framework.plugin_status()["builtin"] == PluginStatus(
        "builtin", True, "loaded", "builtin"
    )
    # Registered first: its normal implementation runs after every plugin's.
    impls = framework.registry.hook_impls("resolve_session")
    assert impls[-1].plugin_name == "builtin"


def test_failed_duplicate_does_not_overwrite_the_successful_status(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = site.plugins_module()
    dup = site.name("dup")
    site.distribution("dist1", [(dup, f"{module}:plugin")])
    site.distribution("dist2", [(dup, f"{module}:other"), ("builtin", f"{module}:other")])
    monkeypatch.setattr(loading_module, "find_builtin_plugin", lambda: lambda fw: object())

    framework = Framework()
    framework.load_hooks()

    loaded = sys.modules[module]
    # Whichever distribution the metadata API yielded first owns the name.
    first_value = next(ep.value for ep in site.entry_points() if ep.name == dup)
    winner = loaded.plugin if first_value.endswith(":plugin") else loaded.other
    assert framework.registry.get_plugin(dup) is winner
    status = framework.plugin_status()
    assert status[dup].ok and status[dup].source == first_value
    assert status["builtin"].ok and status["builtin"].source == "builtin"
    failures = [s for s in status.values() if not s.ok and s.name in (dup, "builtin")]
    assert sorted(s.name for s in failures) == sorted([dup, "builtin"])
    assert all("already registered" in s.detail for s in failures)


# -- the scan that spares a start without plugins from importing importlib.metadata --------


def _only_on_path(monkeypatch: pytest.MonkeyPatch, *entries: Path | str) -> None:
    monkeypatch.setattr(sys, "path", [str(entry) for entry in entries])


def _dist_info(root: Path, name: str, entry_points: str | None) -> Path:
    info = root / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    if entry_points is not None:
        (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    return info


def test_the_scan_says_no_only_when_no_distribution_declares_the_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dist_info(tmp_path, "scripts_only", "[console_scripts]\nhookline = x:main\n")
    _dist_info(tmp_path, "no_entry_points", None)
    (tmp_path / "plain.py").write_text("", encoding="utf-8")
    _only_on_path(monkeypatch, tmp_path, tmp_path / "missing")
    assert not may_declare_entry_points("hookline")
    # An egg-info folder, and a header spaced the way importlib.metadata would not read.
    egg = tmp_path / "old.egg-info"
    egg.mkdir()
    (egg / "entry_points.txt").write_text("[ hookline ]\nx = y\n", encoding="utf-8")
    assert may_declare_entry_points("hookline")
    assert not may_declare_entry_points("bub")


def test_the_scan_finds_what_importlib_metadata_finds(site: Site) -> None:
    site.distribution("found", [(site.name("one"), site.plugins_module() + ":plugin")])
    assert may_declare_entry_points("hookline")
    assert [ep.name for ep in site.entry_points()] == [site.name("one")]


@pytest.mark.parametrize("kind", ["zip", "egg", "folder", "fifo", "huge"])
def test_the_scan_defers_to_importlib_metadata_when_unsure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    entry = tmp_path
    odd = tmp_path / "odd-0.1.dist-info" / "entry_points.txt"
    if kind == "zip":
        entry = tmp_path / "plugins.zip"
        entry.write_bytes(b"PK\x05\x06" + bytes(18))
    elif kind == "egg":
        entry = tmp_path / "plugin-0.1.egg"
        entry.mkdir()
    elif kind == "folder":
        _dist_info(tmp_path, "odd", None)
        odd.mkdir()
    elif kind == "fifo":  # opened without blocking: no writer ever comes
        _dist_info(tmp_path, "odd", None)
        os.mkfifo(odd)
    else:  # not read past the limit, whatever it holds
        _dist_info(tmp_path, "odd", "[console_scripts]\n" + "#" * (1 << 20) + "\n")
    _only_on_path(monkeypatch, entry)
    assert may_declare_entry_points("hookline")


def test_the_scan_defers_when_another_finder_can_find_distributions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class DistributionFinder:
        def find_spec(self, *args: object) -> None:
            return None

        def find_distributions(self, *args: object) -> list[object]:
            return []

    _only_on_path(monkeypatch, tmp_path)
    assert not may_declare_entry_points("hookline")
    monkeypatch.setattr(sys, "meta_path", [DistributionFinder(), *sys.meta_path])
    assert may_declare_entry_points("hookline")


def test_no_declaring_distribution_means_no_entry_points_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(metadata, "entry_points",
                        lambda **kw: calls.append(kw["group"]) or [])
    _only_on_path(monkeypatch, tmp_path)
    assert list(loading_module.PluginGroup().entry_points()) == []
    assert calls == []
    _dist_info(tmp_path, "declares", "[hookline]\nx = y\n")
    assert list(loading_module.PluginGroup().entry_points()) == []
    assert calls == ["hookline"]


def test_a_plugin_that_exits_fails_alone(site: Site) -> None:
    """`sys.exit()` at import or in a factory is that plugin's failure, not the end of
    every command (`hookline plugins` among them)."""
    good = site.plugins_module()
    quitter = site.module("quitter", "import sys\nsys.exit('no licence found')\n")
    factory = site.module("exiting", "import sys\ndef make(framework):\n    sys.exit(3)\n")
    first, bad, worse = site.name("first"), site.name("bad"), site.name("worse")
    site.distribution("dist", [(first, f"{good}:plugin"), (bad, f"{quitter}:plugin"),
                               (worse, f"{factory}:make")])
    framework = Framework()
    framework.load_hooks()
    statuses = site.statuses(framework)
    assert statuses[first].ok and site.registered(framework) == [first]
    assert isinstance(statuses[bad].error, SystemExit)
    assert statuses[bad].detail == "SystemExit: no licence found"
    assert isinstance(statuses[worse].error, SystemExit) and not statuses[worse].ok
