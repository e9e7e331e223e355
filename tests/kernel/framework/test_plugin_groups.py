"""Extra entry point groups (``PluginGroup``): the loader reads them beside ``hookline``
with the same status, disable list and strict mode; the kernel knows nothing of what a
group is for (the Bub layer is one). Fake entry points stand in for metadata."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from hookline.kernel import Framework, hookimpl
from hookline.kernel.framework import loading as loading_module
from hookline.kernel.framework.loading import (
    DISABLE_ENV,
    STRICT_ENV,
    PluginGroup,
    PluginLoader,
    PluginLoadError,
)


@dataclass
class FakeEntryPoint:
    name: str
    value: str
    obj: Any = None
    error: Exception | None = None

    def load(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.obj


class Plugin:
    def __init__(self, tag: str) -> None:
        self.tag = tag

    @hookimpl
    def system_prompt(self, prompt: Any, state: Any) -> str:
        return self.tag


class RecordingGroup(PluginGroup):
    """A group that records the loader's calls and hands plugins a token, not the
    framework (as the Bub layer hands its facade)."""

    name = "other"

    def __init__(self, entries: list[FakeEntryPoint]) -> None:
        self.entries = entries
        self.events: list[tuple[str, str]] = []

    def entry_points(self) -> list[FakeEntryPoint]:
        return self.entries

    def load(self, entry_point: Any) -> Any:
        self.events.append(("load", entry_point.name))
        return super().load(entry_point)

    def plugin(self, name: str, obj: Any, framework: Any) -> Any:
        self.events.append(("plugin", name))
        return obj(f"token for {name}") if callable(obj) else obj

    def registered(self, name: str, plugin: Any) -> None:
        self.events.append(("registered", name))

    def failed(self, name: str) -> None:
        self.events.append(("failed", name))


@pytest.fixture(autouse=True)
def _no_builtin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    monkeypatch.delenv(STRICT_ENV, raising=False)
    monkeypatch.setattr(loading_module, "find_builtin_plugin", lambda: None)


def test_group_plugins_load_after_hookline_ones_with_their_group_in_the_status() -> None:
    framework = Framework()
    group = RecordingGroup([FakeEntryPoint("b", "pkg:B", Plugin)])
    framework._loader.load([FakeEntryPoint("a", "pkg:A", Plugin("a"))], groups=[group])
    assert [name for name, _ in framework.registry.list_name_plugin()] == ["a", "b"]
    status = framework.plugin_status()
    assert (status["a"].group, status["b"].group) == ("hookline", "other")
    assert framework.registry.get_plugin("b").tag == "token for b"  # type: ignore[attr-defined]
    assert group.events == [("load", "b"), ("plugin", "b"), ("registered", "b")]


def test_every_import_comes_before_any_plugin_is_made() -> None:
    framework = Framework()
    first = RecordingGroup([FakeEntryPoint("x", "pkg:X", Plugin)])
    second = RecordingGroup([FakeEntryPoint("y", "pkg:Y", Plugin)])
    events: list[tuple[str, str]] = []
    first.events = second.events = events
    framework._loader.load([], groups=[first, second])
    assert events == [("load", "x"), ("load", "y"), ("plugin", "x"), ("registered", "x"),
                      ("plugin", "y"), ("registered", "y")]


def test_disable_list_and_failures_apply_to_a_group_alike(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISABLE_ENV, "off")
    framework = Framework()

    def exploding(token: str) -> Any:
        raise ValueError("no")

    group = RecordingGroup([
        FakeEntryPoint("off", "pkg:Off", Plugin),
        FakeEntryPoint("broken", "pkg:Broken", error=ImportError("missing dependency")),
        FakeEntryPoint("bad", "pkg:Bad", exploding),
        FakeEntryPoint("good", "pkg:Good", Plugin),
    ])
    framework._loader.load([], groups=[group])
    status = framework.plugin_status()
    assert status["off"].detail == "disabled" and status["off"].group == "other"
    assert not status["broken"].ok and "missing dependency" in status["broken"].detail
    assert not status["bad"].ok and status["bad"].group == "other"
    assert status["good"].ok
    assert ("failed", "broken") in group.events and ("failed", "bad") in group.events


def test_strict_mode_raises_for_a_group_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STRICT_ENV, "1")
    group = RecordingGroup([FakeEntryPoint("broken", "pkg:B", error=RuntimeError("boom"))])
    with pytest.raises(PluginLoadError, match="broken"):
        PluginLoader(Framework()).load([], groups=[group])


def test_an_entry_point_in_two_groups_loads_once() -> None:
    framework = Framework()
    both = Plugin("both")
    group = RecordingGroup([FakeEntryPoint("both", "pkg:both", both)])
    framework._loader.load([FakeEntryPoint("both", "pkg:both", both)], groups=[group])
    assert framework.plugin_status()["both"].group == "hookline"
    assert group.events == []


def test_explicit_entry_points_read_no_other_group(monkeypatch: pytest.MonkeyPatch) -> None:
    def offered(framework: Any) -> list[Any]:
        raise AssertionError("extra groups must not be asked for")

    monkeypatch.setattr(loading_module, "find_plugin_groups", offered)
    PluginLoader(Framework()).load([FakeEntryPoint("a", "pkg:A", Plugin("a"))])


def test_a_broken_group_offer_does_not_stop_hookline_plugins(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def offered(framework: Any) -> list[Any]:
        raise RuntimeError("layer broken")

    monkeypatch.setattr(loading_module, "find_plugin_groups", offered)
    framework = Framework()
    framework.load_hooks()
    assert "layer broken" in caplog.text


def test_retire_takes_a_plugin_out_and_says_why() -> None:
    framework = Framework()
    framework._loader.load([], groups=[RecordingGroup([FakeEntryPoint("c", "pkg:C", Plugin)])])
    framework.retire_plugin("c", AttributeError("uses framework.nothing"))
    status = framework.plugin_status()["c"]
    assert not status.ok and "uses framework.nothing" in status.detail
    assert status.group == "other" and status.source == "pkg:C"
    assert not framework.registry.has_plugin("c")
