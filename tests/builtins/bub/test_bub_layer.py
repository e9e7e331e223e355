"""The Bub compatibility layer as far as it works without Bub installed.

hookline's own suite must not need Bub (it needs Python 3.12): this covers the switch,
the cost when Bub is absent, the shim that wraps a Bub plugin's marked functions (marks
read from ``bub_impl`` option dicts, as Bub's pluggy marker leaves them), confinement of
a plugin that uses what the facade lacks, and the builtin agent's tool table. The real
plugins, with the real Bub, run in ``spec/run_bub_plugins.py`` (CI, Python 3.12).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from typing import Any

import pytest

import hookline.builtins.bub as layer
from hookline.builtins.bub.facade import UnsupportedBubFeature
from hookline.builtins.bub.group import BubGroup
from hookline.builtins.bub.plugin import BubCompatPlugin
from hookline.builtins.bub.switch import SWITCH_ENV
from hookline.kernel import Framework, hookimpl
from hookline.kernel.framework.loading import PluginStatus
from hookline.kernel.tools import Tool

BUB_INSTALLED = importlib.util.find_spec("bub") is not None


def bub_mark(function: Any, **options: Any) -> Any:
    """What Bub's ``@hookimpl`` (pluggy's marker for the project ``bub``) leaves."""
    function.bub_impl = {"tryfirst": False, "trylast": False, "specname": None,
                         "wrapper": False, "hookwrapper": False, "optionalhook": False,
                         **options}
    return function


def test_the_switch_turns_the_layer_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    for value in ("0", "false", "no", "off", " OFF "):
        monkeypatch.setenv(SWITCH_ENV, value)
        assert not layer.available()
        assert layer.plugin_groups(Framework()) == []
    monkeypatch.setenv(SWITCH_ENV, "1")
    assert layer.available()


@pytest.mark.skipif(BUB_INSTALLED, reason="checks the cost when Bub is not installed")
def test_without_bub_nothing_of_the_layer_is_imported() -> None:
    code = ("import sys\n"
            "from hookline.kernel import Framework\n"
            "framework = Framework()\n"
            "framework.load_hooks()\n"
            "prefixes = ('bub.', 'hookline.builtins.bub.')\n"
            "loaded = sorted(name for name in sys.modules\n"
            "                if name == 'bub' or name.startswith(prefixes))\n"
            "print(loaded, [s.group for s in framework.plugin_status().values()])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    # the entry module's one leaf, the switch's name, and nothing else
    assert done.stdout.strip() == "['hookline.builtins.bub.switch'] ['']"


class BubStylePlugin:
    """A Bub plugin: marks in ``bub_impl``, the framework given at construction."""

    def __init__(self, framework: Any) -> None:
        self.framework = framework
        self.seen: list[str] = []

    def system_prompt(self, prompt: Any, state: Any) -> str:
        self.seen.append("system_prompt")
        return "from the Bub plugin"

    def late_state(self, message: Any) -> dict[str, Any]:
        return {"late": True}

    def load_state(self, message: Any, session_id: str) -> dict[str, Any]:
        return {"bub": session_id, "workspace": str(self.framework.workspace)}


bub_mark(BubStylePlugin.system_prompt)
bub_mark(BubStylePlugin.late_state, specname="load_state", trylast=True)
bub_mark(BubStylePlugin.load_state)


def _framework_with(plugin_type: Any, name: str = "demo") -> tuple[Framework, BubGroup, Any]:
    framework = Framework(workspace="/tmp")
    group = BubGroup(framework)
    plugin = plugin_type(group.facade(name))
    group.originals[name] = plugin
    framework.registry.register(group._shim(name, plugin), name=name)
    return framework, group, plugin


def test_the_shim_keeps_the_marks_names_and_order_of_the_plugin() -> None:
    framework, _group, plugin = _framework_with(BubStylePlugin)
    impls = framework.registry.hook_impls("load_state")
    assert [(impl.function_name, impl.trylast) for impl in impls] == [
        ("BubStylePlugin.load_state", False), ("BubStylePlugin.late_state", True)]
    assert impls[0].argnames == ("message", "session_id")
    assert "test_bub_layer.py" in impls[0].location
    values = framework.runtime.call_many_sync("load_state", message={}, session_id="s")
    assert values == [{"bub": "s", "workspace": "/tmp"}, {"late": True}]
    assert framework.get_system_prompt("", {}) == "from the Bub plugin"
    assert plugin.seen == ["system_prompt"]


class ReachesTooFar:
    def __init__(self, framework: Any) -> None:
        self.framework = framework

    def system_prompt(self, prompt: Any, state: Any) -> str:
        return str(self.framework.create_cli_app())


bub_mark(ReachesTooFar.system_prompt)


def test_a_plugin_using_what_the_facade_lacks_fails_alone_once() -> None:
    framework, _group, _plugin = _framework_with(ReachesTooFar, "reacher")
    framework._loader.status["reacher"] = PluginStatus("reacher", True, "loaded", "pkg:Reacher",
                                                       group="bub")
    assert framework.get_system_prompt("", {}) == ""  # the turn goes on
    status = framework.plugin_status()["reacher"]
    assert not status.ok
    assert "'reacher'" in status.detail and "BubFramework.create_cli_app" in status.detail
    assert (status.group, status.source) == ("bub", "pkg:Reacher")
    assert not framework.registry.has_plugin("reacher")
    assert framework.get_system_prompt("", {}) == ""


def test_the_facade_names_plugin_and_attribute() -> None:
    group = BubGroup(Framework())
    facade = group.facade("p")
    with pytest.raises(UnsupportedBubFeature) as caught:
        _ = facade.some_bub_only_thing
    assert isinstance(caught.value, AttributeError)
    assert str(caught.value) == ("Bub plugin 'p' uses BubFramework.some_bub_only_thing, which "
                                 "hookline's Bub compatibility layer does not provide")
    with pytest.raises(UnsupportedBubFeature, match=r"PluginManager\.hook"):
        _ = facade.plugin_manager.hook
    assert facade.get_agent_hooks() is group.framework.agent_hooks
    assert facade.hookline is group.framework


def test_plugin_manager_gives_the_bub_objects_and_the_builtin_agent() -> None:
    framework, group, plugin = _framework_with(BubStylePlugin)
    manager = group.facade("other").plugin_manager
    assert manager.get_plugin("demo") is plugin
    assert manager.get_plugin("missing") is None
    framework.registry.register(types.SimpleNamespace(), name="builtin")
    agent = manager.get_plugin("builtin")._get_agent()
    assert agent is group.agent and agent.tools is group.agent_tools


def test_tools_written_into_the_agent_table_reach_the_model_first() -> None:
    framework = Framework()
    group = BubGroup(framework)

    class Own:
        @hookimpl
        def provide_tools(self) -> list[Tool]:
            return [Tool("lookup", lambda: "own"), Tool("other", lambda: "other")]

    framework.registry.register(Own(), name="own")
    framework.registry.register(BubCompatPlugin(group), name="bub")
    written = Tool("lookup", lambda: "written")
    group.agent_tools["lookup"] = written
    assert [tool.name for tool in framework.get_tools()] == ["lookup", "other"]
    assert framework.get_tools()[0] is written
    assert "lookup" in group.agent_tools and len(group.agent_tools) == 1
    del group.agent_tools["lookup"]
    assert framework.get_tools()[0].handler() == "own"
    with pytest.raises(KeyError):
        del group.agent_tools["other"]  # another plugin's tool is not the table's to remove


def test_another_bub_release_is_refused_with_what_to_do(tmp_path: Any) -> None:
    """Bub 0.5 (bub-qq 0.1.0 was written for it) has another package layout: each Bub
    plugin fails with the installed release, the supported one and the switch, not with
    a word about Python."""
    site = tmp_path / "site"
    (site / "bub").mkdir(parents=True)
    (site / "bub" / "__init__.py").write_text("", encoding="utf-8")
    info = site / "bub-0.5.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bub\nVersion: 0.5.0\n",
                                   encoding="utf-8")
    code = ("import sys\n"
            f"sys.path.insert(0, {str(site)!r})\n"
            "from hookline.builtins.bub.group import BubGroup\n"
            "from hookline.kernel import Framework\n"
            "try:\n"
            "    BubGroup(Framework())._prepare()\n"
            "except RuntimeError as exc:\n"
            "    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    message = done.stdout.strip()
    if sys.version_info < (3, 12):
        assert "Bub 0.6 needs Python 3.12 or newer" in message, message
    else:
        assert "the installed bub is 0.5.0; install bub==0.6.0a3" in message, message
    assert message.startswith("Bub cannot be imported (ImportError") and (
        f"{SWITCH_ENV}=0" in message), message
