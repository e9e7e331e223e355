"""The checks of ``run_bub_plugins.py``: the real Bub plugins, unchanged, through hookline.

Each check is a function run in a process of its own (``run_bub_plugins.py --check NAME``)
from a fresh home folder; it prints an ``ok <what>`` line for each thing it proved and
raises on the first that fails:

- ``plugins``: ``hookline plugins --json`` lists every plugin, from the ``bub`` group;
  ``HOOKLINE_BUB_PLUGINS=0`` turns the group off and ``HOOKLINE_DISABLE_PLUGINS`` skips
  one; the tools are given by the plugins that registered them;
- ``tools``: ``hookline run`` with a scripted model that calls bub-web-search's
  ``web.search`` (against a small SearXNG stand-in on a local port) and bub-qq's
  ``qq.version`` (a comma command: never offered to the model);
- ``selection``: the channels hookline's manager starts for a selection are those Bub's
  own ``ChannelManager`` starts (a Bub ``Interface`` of a test plugin included);
- ``runtime``: one gateway-like run (``ChannelManager`` with a probe channel): the
  ``Lifecycle`` channels start beside it; bub-mcp's tool against a small MCP server this
  module starts; bub-qq's deny denies and its finish decision answers (its policy read
  from Bub's config file);
  bub-feishu's media reaches the prompt through its data fetcher; bub-schedule's round
  trip (tool call, job fires, the message comes back through ``process_inbound``);
  bub-mcp-server's SSE server answers through the model; a test plugin touching what
  the layer lacks fails alone;
- ``onboard``: ``hookline onboard --plugin qq`` writes bub-qq's answers to Bub's
  ``config.yml``, where bub-qq reads them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXPECTED = ("bub", "schedule", "web-search", "mcp", "mcp-server", "discord", "feishu", "qq",
            "wecom", "lark")
"""What ``hookline plugins`` must list from the ``bub`` group (``bub``: the layer)."""
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")


def _ok(what: str) -> None:
    print(f"ok {what}", flush=True)


def _expect(condition: Any, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def _hookline(*args: str, env: dict[str, str] | None = None, stdin: str | None = None
              ) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("hookline")
    return subprocess.run([str(script), *args], capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})}, input=stdin, timeout=120)


def _scripted(turns: list[dict[str, Any]]) -> str:
    path = Path.cwd() / f"model-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(turns), encoding="utf-8")
    return f"scripted:{path}"


def _bub_config(data: dict[str, Any]) -> None:
    folder = Path.home() / ".bub"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yml").write_text(json.dumps(data), encoding="utf-8")  # JSON is YAML


def check_plugins() -> None:
    done = _hookline("plugins", "--json")
    _expect(done.returncode == 0, f"hookline plugins failed: {done.stderr}")
    status = json.loads(done.stdout)
    for name in EXPECTED:
        entry = status.get(name)
        _expect(entry and entry["ok"] and entry["group"] == "bub",
                f"{name} is not loaded from the bub group: {entry}")
    _ok(f"hookline plugins lists {len(EXPECTED)} plugins of the bub group, all loaded")
    # The rest in this process: the plugins are imported once, so each load is quick.
    from hookline.kernel import Framework

    def load(**env: str) -> Framework:
        saved = {key: os.environ.get(key) for key in env}
        os.environ.update(env)
        try:
            framework = Framework()
            framework.load_hooks()
            return framework
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    off = load(HOOKLINE_BUB_PLUGINS="0").plugin_status()
    _expect(not any(entry.group == "bub" for entry in off.values()), off)
    _ok("HOOKLINE_BUB_PLUGINS=0 turns the group off")
    some = load(HOOKLINE_DISABLE_PLUGINS="discord").plugin_status()
    _expect(some["discord"].detail == "disabled" and some["schedule"].ok, some)
    _ok("HOOKLINE_DISABLE_PLUGINS=discord skips it alone")
    framework = load()
    owners = {impl.plugin_name for impl in framework.registry.hook_impls("provide_tools")}
    _expect({"schedule", "mcp", "qq"} <= owners, f"provide_tools implemented by {owners}")
    tools = {tool.name: tool for tool in framework.get_tools()}
    _expect({"schedule.add", "schedule.list", "mcp", "qq.send"} <= set(tools), sorted(tools))
    _expect(tools["qq.version"].exposure == "command" and tools["schedule.add"].context,
            "exposure and context")
    _ok("provide_tools of schedule, mcp and qq give their bub.tools (exposure, context kept)")


def check_tools() -> None:
    import http.server
    import threading

    class SearXNG(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"results": [{
                "title": "Fake SearXNG result", "url": "https://example.invalid/hit",
                "content": f"what {self.path} found"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SearXNG)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    model = _scripted([
        {"tool_calls": [{"name": "web.search", "arguments": {"query": "hookline"}},
                        {"name": "qq_version", "arguments": {}}]},
        {"text": "searched"},
    ])
    env = {"HOOKLINE_MODEL": model,
           "BUB_SEARCH_SEARXNG_BASE_URL": f"http://127.0.0.1:{server.server_port}"}
    done = _hookline("run", "search the web", env=env)
    _expect(done.returncode == 0 and done.stdout.strip() == "searched",
            f"hookline run: {done.returncode} {done.stdout!r} {done.stderr!r}")
    shown = _hookline("sessions", "show", env=env).stdout
    _expect("Fake SearXNG result" in shown and "q=hookline" in shown, shown)
    _ok("a scripted model called bub-web-search's web.search (SearXNG stand-in)")
    _expect("qq_version" in shown and "Unknown tool name" in shown, shown)
    _ok("bub-qq's qq.version (agent_use=False: a comma command) is not offered to the model")


def _test_plugin_site() -> Path:
    """A distribution with a ``bub`` entry point: a Bub ``Interface`` channel and a hook
    that reaches for a framework attribute the layer lacks."""
    site = Path.cwd() / "site"
    package = site / "bub_probe_plugin"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "from bub import hookimpl\n"
        "from bub.channels import Interface\n\n"
        "class ProbeInterface(Interface):\n"
        "    name = 'probe-ui'\n"
        "    async def start(self, stop_event):\n"
        "        raise RuntimeError('an Interface must not start unless named')\n"
        "    async def stop(self):\n"
        "        pass\n\n"
        "class ProbePlugin:\n"
        "    def __init__(self, framework):\n"
        "        self.framework = framework\n"
        "    @hookimpl\n"
        "    def provide_channels(self, message_handler):\n"
        "        return [ProbeInterface()]\n"
        "    @hookimpl\n"
        "    def system_prompt(self, prompt, state):\n"
        "        return str(self.framework.create_cli_app)\n", encoding="utf-8")
    info = site / "bub_probe_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bub-probe-plugin\n"
                                   "Version: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[bub]\nbub-probe = bub_probe_plugin:ProbePlugin\n",
                                           encoding="utf-8")
    sys.path.insert(0, str(site))
    return site


def check_selection() -> None:
    import asyncio

    _test_plugin_site()
    from bub.channels.manager import ChannelManager as BubManager
    from bub.framework import BubFramework

    from hookline.builtins.channels.manager import ChannelManager
    from hookline.kernel import Framework

    framework = Framework()
    framework.load_hooks()
    manager = ChannelManager(framework)
    reference = BubFramework()
    reference.load_hooks()

    async def compare() -> None:
        bub_manager = BubManager(reference)
        common = set(manager.channels) & set(bub_manager._channels)
        _expect({"schedule", "mcp.lifecycle", "mcp-server", "feishu", "probe-ui"} <= common,
                f"channels both know: {sorted(common)}")
        for selection in ("all", "cli", "feishu", "probe-ui", "schedule", "all,!schedule",
                          "feishu,!mcp.lifecycle", "cli,feishu,probe-ui"):
            ours = sorted(name for name in manager.enabled(selection) if name in common)
            bub_manager._enabled_channels = selection.split(",")
            theirs = sorted(channel.name for channel in bub_manager.enabled_channels()
                            if channel.name in common)
            _expect(ours == theirs, f"{selection!r}: hookline starts {ours}, Bub {theirs}")
        _ok(f"8 selections over {len(common)} channels start what Bub's ChannelManager starts "
            f"(Lifecycle beside named channels, Interface only when named)")

    asyncio.run(compare())


MCP_SERVER = """\
from fastmcp import FastMCP

server = FastMCP("calc")


@server.tool
def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b


server.run(show_banner=False)
"""


def check_runtime() -> None:
    import asyncio
    import socket

    _test_plugin_site()
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        sse_port = probe_socket.getsockname()[1]
    _bub_config({"qq": {"group_tool_policy": "locked", "llm_rate_limit_per_minute": 2,
                        "llm_rate_limit_notice": "slow down"},
                 "mcp-server": {"port": sse_port, "log_level": "warning"}})
    server = Path.cwd() / "calc_server.py"
    server.write_text(MCP_SERVER, encoding="utf-8")
    (Path.home() / ".bub" / "mcp.json").write_text(json.dumps({"mcpServers": {"calc": {
        "command": sys.executable, "args": [str(server)]}}}), encoding="utf-8")
    os.environ["HOOKLINE_MODEL"] = _scripted([
        {"tool_calls": [{"name": "mcp.calc_add", "arguments": {"a": 2, "b": 3}}]},
        {"text": "mcp done"},
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "x.txt", "content": "no"}}]},
        {"text": "deny done"},
        {"text": "saw the image"},
        {"tool_calls": [{"name": "schedule.add",
                         "arguments": {"after_seconds": 1, "message": "reminder from the past"}}]},
        {"text": "scheduled"},
        {"text": "reminder delivered"},
        {"text": "answered over SSE"},
    ])
    asyncio.run(_runtime(sse_port))


async def _runtime(sse_port: int) -> None:
    import anyio

    from hookline.builtins.channels.manager import ChannelManager
    from hookline.kernel import Framework, hookimpl
    from hookline.kernel.channels import Channel
    from hookline.kernel.envelope import ChannelMessage

    workspace = Path.cwd() / "workspace"
    workspace.mkdir()
    sent: list[Any] = []
    requests: list[Any] = []
    results: list[Any] = []

    class ProbeChannel(Channel):
        name = "probe"

        def __init__(self, handler: Any) -> None:
            self.handler = handler

        async def start(self, stop_event: Any) -> None:
            return None

        async def stop(self) -> None:
            return None

        async def send(self, message: Any) -> None:
            sent.append(message)

    class Probe:
        channel: ProbeChannel | None = None

        @hookimpl
        def provide_channels(self, message_handler: Any) -> list[Channel]:
            self.channel = ProbeChannel(message_handler)
            return [self.channel]

        @hookimpl
        def before_llm_call(self, request: Any, state: Any) -> None:
            requests.append(request)

        @hookimpl
        def after_tool_call(self, call: Any, result: Any, state: Any) -> None:
            results.append(result)

    framework = Framework(workspace=workspace)
    framework.load_hooks()
    probe = Probe()
    framework.registry.register(probe, name="probe")
    manager = ChannelManager(framework, enabled_channels="probe,!http", stream_output=False)
    assert probe.channel is not None
    handler = probe.channel.handler

    async def until(what: str, condition: Any, timeout: float = 30.0) -> None:
        with anyio.fail_after(timeout):
            while not condition():
                await anyio.sleep(0.05)
        del what

    async with framework.running():
        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            await group.start(manager.run, stop)
            started = set(manager.active)
            _expect(started == {"probe", "schedule", "mcp.lifecycle", "mcp-server"},
                    f"started {sorted(started)}")
            _ok("the Lifecycle channels (schedule, mcp.lifecycle, mcp-server) start beside a "
                "named channel; the probe's Interface and feishu, qq, ... do not")

            # bub-mcp: the server's tool, bound into the builtin agent's table per turn.
            await handler(ChannelMessage(session_id="", channel="probe", chat_id="m",
                                         content="add 2 and 3"))
            await until("mcp reply", lambda: any(m.content == "mcp done" for m in sent), 60)
            mcp = next(r for r in results if r.tool == "mcp.calc_add")
            _expect(mcp.error is None and str(mcp.result).strip() == "5",
                    f"mcp.calc_add: {mcp}")
            _ok("a scripted model called bub-mcp's mcp.calc_add on the test MCP server: 5")

            # bub-qq: its before_tool_call denies under the policy in Bub's config file.
            await handler(ChannelMessage(session_id="", channel="probe", chat_id="q",
                                         content="write a file", context={"_qq": {
                                             "scope": "group", "sender_id": "u1",
                                             "sender_role": "member", "group_openid": "g1"}}))
            await until("qq reply", lambda: any(m.content == "deny done" for m in sent))
            denied = next(r for r in results if r.tool == "fs.write")
            _expect(denied.error is not None and "disabled in this chat" in str(denied.error)
                    and not (workspace / "x.txt").exists(), f"fs.write: {denied}")
            _ok("bub-qq's ToolCallDecision.deny denied fs.write (group_tool_policy: locked "
                "read from ~/.bub/config.yml)")
            calls = len(requests)
            await handler(ChannelMessage(session_id="", channel="probe", chat_id="q",
                                         content="again", context={"_qq": {
                                             "scope": "group", "sender_id": "u1",
                                             "sender_role": "member", "group_openid": "g1"}}))
            await until("qq limit", lambda: any(m.content == "slow down" for m in sent))
            _expect(len(requests) == calls + 1, "the rate-limited step reached the model")
            _ok("bub-qq's LLMCallDecision.finish answered the third model call of the minute "
                "with its notice (no provider call)")

            # bub-feishu: an image message; its MediaItem.data_fetcher reaches the prompt.
            await _feishu_image(framework, manager)
            await until("feishu turn", lambda: len(requests) >= 6)
            parts = [part for message in requests[5].messages
                     for part in (message.content if isinstance(message.content, list) else [])]
            _expect(any(getattr(part, "data", None) == PNG for part in parts),
                    f"prompt parts: {parts!r}")
            _ok("bub-feishu's image (MediaItem with a data_fetcher) reached the prompt")

            # bub-schedule: tool call, the job fires, its message comes back as a turn.
            await handler(ChannelMessage(session_id="", channel="probe", chat_id="s",
                                         content="remind me in a second"))
            await until("reminder", lambda: any(m.content == "reminder delivered"
                                                for m in sent), 30)
            reminder = next(m for m in sent if m.content == "reminder delivered")
            _expect(reminder.session_id == "probe:s", f"reminder went to {reminder}")
            _expect(any(_text(r).endswith("reminder from the past") for r in requests),
                    "the model never saw the reminder")
            _ok("bub-schedule: schedule.add, the job fired, the reminder came back through "
                "process_inbound to the probe channel")

            # bub-mcp-server: its SSE server answers through the model.
            answer = await _ask_over_sse(sse_port)
            _expect(answer == "answered over SSE", f"SSE answer {answer!r}")
            _ok("bub-mcp-server's SSE server answered run_model through hookline")

            status = framework.plugin_status()["bub-probe"]
            _expect(not status.ok and "create_cli_app" in status.detail
                    and "'bub-probe'" in status.detail, f"bub-probe status {status}")
            _ok(f"a Bub plugin using what the layer lacks fails alone: {status.detail}")
            stop.set()


def _text(request: Any) -> str:
    last = request.messages[-1]
    content = last.content
    return content if isinstance(content, str) else " ".join(
        str(part) for part in content if isinstance(part, str))


async def _feishu_image(framework: Any, manager: Any) -> None:
    """Hand bub-feishu's own channel a Lark image event, with a stand-in API client that
    serves the image bytes to the channel's data fetcher."""
    import io
    import types

    from bub_feishu.channel import FeishuChannel

    channel = manager.channels["feishu"].bub
    _expect(isinstance(channel, FeishuChannel), f"feishu channel: {channel!r}")

    class Response:
        file = io.BytesIO(PNG)
        code, msg = 0, "ok"

        def success(self) -> bool:
            return True

    async def aget(request: Any) -> Response:
        return Response()

    image = types.SimpleNamespace(aget=aget)
    channel._api_client = types.SimpleNamespace(im=types.SimpleNamespace(
        v1=types.SimpleNamespace(image=image)))
    event = {"header": {"event_type": "im.message.receive_v1"}, "event": {
        "sender": {"sender_id": {"open_id": "ou_1"}, "sender_type": "user"},
        "message": {"message_id": "om_1", "chat_id": "oc_1", "chat_type": "p2p",
                    "message_type": "image", "content": json.dumps({"image_key": "img_1"}),
                    "create_time": "1700000000000"}}}
    message = FeishuChannel._normalize_event(event)
    built = await channel._build_message(message)
    _expect(built.media and built.media[0].data_fetcher is not None, f"built: {built}")
    await channel._on_receive(built)


async def _ask_over_sse(port: int) -> str:
    import anyio
    import fastmcp

    url = f"http://127.0.0.1:{port}/sse"
    last: Exception | None = None
    for _ in range(100):
        try:
            async with fastmcp.Client(url) as client:
                result = await client.call_tool("run_model", {"prompt": "hello over SSE",
                                                              "session_id": "mcp:t"})
                return str(result.data)
        except Exception as exc:  # not listening yet
            last = exc
            await anyio.sleep(0.2)
    raise AssertionError(f"the SSE server never answered: {last!r}")


def check_onboard() -> None:
    import bub.inquirer as inquirer

    answers = iter(["APP-1", "SECRET-1", "websocket"])
    inquirer.ask_text = lambda message, default="": next(answers)
    inquirer.ask_secret = lambda message: next(answers)
    inquirer.ask_select = lambda message, choices, default="": next(answers)
    from hookline.cli.app import main as hookline_main

    try:
        hookline_main(["onboard", "--yes", "--plugin", "qq"])
    except SystemExit as exc:
        _expect(not exc.code, f"hookline onboard exited with {exc.code}")
    import yaml

    written = yaml.safe_load((Path.home() / ".bub" / "config.yml").read_text())
    _expect(written == {"qq": {"appid": "APP-1", "secret": "SECRET-1",
                               "receive_mode": "websocket"}}, f"config.yml: {written}")
    hookline_file = Path(os.environ["HOOKLINE_HOME"]) / "config.toml"
    _expect("APP-1" not in hookline_file.read_text(), "bub-qq's answers in config.toml")
    from bub import configure
    from bub_qq.config import QQConfig

    configure.load(Path.home() / ".bub" / "config.yml")
    config = configure.ensure_config(QQConfig)
    _expect(config.appid == "APP-1" and config.receive_mode == "websocket", f"{config}")
    _ok("hookline onboard --plugin qq wrote bub-qq's answers to ~/.bub/config.yml, where "
        "bub-qq reads them (and nothing of them to hookline's config.toml)")


CHECK_FUNCTIONS: dict[str, Callable[[], None]] = {
    "plugins": check_plugins,
    "tools": check_tools,
    "selection": check_selection,
    "runtime": check_runtime,
    "onboard": check_onboard,
}
