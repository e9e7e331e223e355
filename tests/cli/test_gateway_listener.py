"""`hookline gateway --host/--port/--allow-remote` reach the channel named `http` through
`ListenerChannel` (its `configure_listener` method), whoever provides it: a plugin's own
`http` channel with the method gets them, one without it is an error naming its plugin
rather than options silently ignored.

The plugins are installed through a dist-info entry point on PYTHONPATH and the console
script runs in a subprocess; the in-process tests call `run_gateway` with the same kind
of plugin registered directly.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from gateway_support import HOOKLINE, gateway_env
from plugin_site import install_plugin

from hookline.builtins.channels import ListenerChannel
from hookline.builtins.channels.http.channel import HttpChannel
from hookline.builtins.config import load_settings
from hookline.cli.gateway import configure_http, run_gateway
from hookline.kernel import Framework, hookimpl
from hookline.kernel.channels import Lifecycle, StopEvent

CHANNEL_PLUGIN = '''
import json
import os
from pathlib import Path

from hookline.kernel import hookimpl
from hookline.kernel.channels import Lifecycle

RECORD = Path(os.environ["RECORD_FILE"])


class OwnHttp(Lifecycle):
    """A plugin's own `http` channel: it writes what it was configured with, then ends
    the gateway by failing (a failed channel stops the manager at once)."""

    name = "http"

    def __init__(self):
        self.given = None

    async def start(self, stop_event):
        RECORD.write_text(json.dumps({"given": self.given}))
        raise RuntimeError("configuration recorded")

    async def stop(self):
        return None

    async def send(self, message):
        return None


class ListeningHttp(OwnHttp):
    def configure_listener(self, host, port, allow_remote):
        self.given = [host, port, allow_remote]


class ChannelPlugin:
    def __init__(self, framework):
        self.framework = framework

    @hookimpl
    def provide_channels(self, message_handler):
        kind = os.environ["CHANNEL_KIND"]
        return [ListeningHttp() if kind == "listening" else OwnHttp()]
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    site = install_plugin(tmp_path / "site", "own_http", CHANNEL_PLUGIN,
                          "ownhttp = own_http:ChannelPlugin")
    (tmp_path / "workspace").mkdir()
    return gateway_env(tmp_path / "home", PYTHONPATH=str(site),
                       RECORD_FILE=str(tmp_path / "record.json"))


def gateway(env: dict[str, str], tmp_path: Path, kind: str, *args: str,
            ) -> subprocess.CompletedProcess[str]:
    assert HOOKLINE is not None
    return subprocess.run([HOOKLINE, "gateway", *args], env={**env, "CHANNEL_KIND": kind},
                          cwd=tmp_path / "workspace", capture_output=True, text=True,
                          timeout=120)


def test_a_plugins_http_channel_without_configure_listener_refuses_the_options(
        env: dict[str, str], tmp_path: Path) -> None:
    out = gateway(env, tmp_path, "plain", "--port", "0")
    assert out.returncode == 1, out.stderr
    assert ("channel 'http' from plugin ownhttp does not take --host/--port/--allow-remote"
            in out.stderr)
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "record.json").exists(), "refused before any channel started"


def test_without_the_options_a_plugins_http_channel_runs_as_it_is(
        env: dict[str, str], tmp_path: Path) -> None:
    out = gateway(env, tmp_path, "plain")
    assert out.returncode == 1 and "channel 'http' failed: configuration recorded" in out.stderr
    assert json.loads((tmp_path / "record.json").read_text()) == {"given": None}


def test_a_plugins_http_channel_with_configure_listener_gets_the_options(
        env: dict[str, str], tmp_path: Path) -> None:
    out = gateway(env, tmp_path, "listening", "--host", "127.0.0.2", "--port", "9999",
                  "--allow-remote")
    assert out.returncode == 1 and "channel 'http' failed: configuration recorded" in out.stderr
    assert json.loads((tmp_path / "record.json").read_text()) == {
        "given": ["127.0.0.2", 9999, True]}


# -- in process ----------------------------------------------------------------------------


class SilentHttp(Lifecycle):
    name = "http"

    async def start(self, stop_event: StopEvent) -> None:
        raise AssertionError("never started: the options are refused first")

    async def stop(self) -> None:
        return None

    async def send(self, message: Any) -> None:
        return None


class SilentHttpPlugin:
    @hookimpl
    def provide_channels(self, message_handler: Any) -> list[Any]:
        return [SilentHttp()]


@pytest.fixture
def framework(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Framework:
    for key in [k for k in os.environ if k.startswith("HOOKLINE_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOOKLINE_HOME", str(tmp_path / "home"))
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    framework = Framework(workspace)
    framework.load_hooks()
    return framework


@pytest.mark.anyio
async def test_run_gateway_names_the_plugin_whose_http_channel_takes_no_options(
        framework: Framework) -> None:
    framework.registry.register(SilentHttpPlugin(), name="silent-http")
    settings = load_settings()
    with pytest.raises(RuntimeError, match=r"channel 'http' from plugin silent-http does "
                                           r"not take --host/--port/--allow-remote"):
        await run_gateway(framework, settings, host="127.0.0.1")
    assert not isinstance(SilentHttp(), ListenerChannel)


def test_the_builtin_http_channel_is_a_listener_channel(framework: Framework) -> None:
    async def handler(message: Any) -> None:
        return None

    channel = HttpChannel(handler, host="127.0.0.1", port=8787)
    assert isinstance(channel, ListenerChannel)
    listener = channel.listener
    configure_http(framework, channel, None, 0, None)
    assert (listener.host, listener.port, listener.allow_remote) == ("127.0.0.1", 0, None)
    configure_http(framework, channel, "::1", None, True)
    assert (listener.host, listener.port, listener.allow_remote) == ("::1", 0, True)
    configure_http(framework, None, None, None, None)  # no http channel, no option: nothing


@pytest.mark.anyio
async def test_the_builtin_http_channel_listens_where_configure_listener_says(
        framework: Framework, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKLINE_HTTP_TOKEN", "t" * 40)

    async def handler(message: Any) -> None:
        return None

    channel = HttpChannel(handler, reply_timeout=5)
    configure_http(framework, channel, "127.0.0.1", 0, None)
    stop = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(channel.start, stop)
        with anyio.fail_after(30):
            while channel.address is None:
                await anyio.sleep(0.01)
        stop.set()
    assert channel.address is not None
    assert channel.address[0] == "127.0.0.1" and channel.address[1] > 0
