"""The builtin plugin as the commands and the pytest plugin see it: the `BuiltinServices`
protocol of `hookline.builtins`, found by name, never by class."""

from __future__ import annotations

from typing import Any

from hookline.builtins import BuiltinServices, builtin_services
from hookline.kernel import Framework


def test_the_loaded_builtin_plugin_offers_the_services(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("HOOKLINE_HOME", str(tmp_path))
    framework = Framework(workspace=tmp_path)
    framework.load_hooks()
    services = builtin_services(framework)
    assert isinstance(services, BuiltinServices)
    assert services.context_window("openai:gpt-4o") > 0
    assert services.mcp_servers() is None  # no [mcp_servers] table
    assert services.processes.list() == []


def test_a_plugin_taking_its_name_without_the_services_is_not_the_builtin(
        tmp_path: Any) -> None:
    class Impostor:
        pass

    framework = Framework(workspace=tmp_path)
    assert builtin_services(framework) is None
    framework.registry.register(Impostor(), name="builtin")
    assert builtin_services(framework) is None
