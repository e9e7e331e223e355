"""`hookline mcp list/add/remove` through the real console script, on a real home: the
tables it writes are what the builtin plugin reads, `list --check` starts the test MCP
server (tests/builtins/mcp/mcp_server.py) and counts what it offers; a plugin's own `mcp`
group does not replace hookline's."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer
from procs import is_gone
from typer.testing import CliRunner

from hookline.builtins.mcp import server_configs
from hookline.cli.app import create_app
from hookline.kernel import Framework, hookimpl

HOOKLINE = Path(sys.executable).parent / "hookline"
SERVER = Path(__file__).parents[1] / "builtins" / "mcp" / "mcp_server.py"


def hookline(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env.update(HOOKLINE_HOME=str(home), HOOKLINE_MODEL="offline")
    workspace = home.parent / "workspace"
    workspace.mkdir(exist_ok=True)
    return subprocess.run([str(HOOKLINE), *args], cwd=workspace, env=env, text=True,
                          capture_output=True, timeout=120)


def written(home: Path) -> dict[str, Any]:
    return tomllib.loads((home / "config.toml").read_text())


def test_add_writes_tables_the_plugin_reads_list_shows_them_remove_deletes_them(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert hookline(home, "mcp", "list").stdout.startswith("(no MCP servers configured")
    out = hookline(home, "mcp", "add", "files", "--env", "LOG=warn", "--cwd", "sub",
                   "--network", "--timeout", "5", "--", "npx", "-y", "server-fs", ".")
    assert out.returncode == 0, out.stderr
    assert out.stdout == (f"added MCP server 'files' (stdio: npx -y server-fs .) to "
                          f"{home / 'config.toml'}\n")
    out = hookline(home, "mcp", "add", "docs", "--url", "https://mcp.example.com/mcp",
                   "-H", "Authorization=Bearer t=1", "--disabled")
    assert out.returncode == 0, out.stderr
    assert stat.S_IMODE((home / "config.toml").stat().st_mode) == 0o600
    data = written(home)
    assert data["mcp_servers"] == {
        "files": {"command": "npx", "args": ["-y", "server-fs", "."], "env": {"LOG": "warn"},
                  "cwd": "sub", "network": True, "timeout": 5.0},
        "docs": {"url": "https://mcp.example.com/mcp", "enabled": False,
                 "headers": {"Authorization": "Bearer t=1"}},
    }
    files, docs = server_configs(data)
    assert (files.args, files.network, docs.headers) == (
        ("-y", "server-fs", "."), True, {"Authorization": "Bearer t=1"})

    lines = hookline(home, "mcp", "list").stdout.splitlines()
    assert [line.split() for line in lines] == [
        ["files", "stdio", "enabled", "npx", "-y", "server-fs", "."],
        ["docs", "http", "disabled", "https://mcp.example.com/mcp"]]
    listed = json.loads(hookline(home, "mcp", "list", "--json").stdout)
    assert listed[1] == {"name": "docs", "transport": "http", "enabled": False,
                         "target": "https://mcp.example.com/mcp"}
    assert "Bearer" not in hookline(home, "mcp", "list").stdout  # header values never shown
    plugins = hookline(home, "plugins").stdout.splitlines()
    assert [line.split()[:4] for line in plugins if line.startswith("mcp ")] == [
        ["mcp", "files", "stdio", "enabled"], ["mcp", "docs", "http", "disabled"]]

    out = hookline(home, "mcp", "remove", "files")
    assert (out.returncode, out.stdout) == (
        0, f"removed MCP server 'files' from {home / 'config.toml'}\n")
    assert list(written(home)["mcp_servers"]) == ["docs"]
    hookline(home, "mcp", "remove", "docs")
    assert "mcp_servers" not in written(home)
    plugins = hookline(home, "plugins").stdout.splitlines()
    assert not any(line.startswith("mcp ") for line in plugins)


def test_bad_adds_and_removes_are_one_error_line_and_change_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert hookline(home, "mcp", "add", "files", "--", "srv").returncode == 0
    before = (home / "config.toml").read_text()
    cases = [
        (["add", "x"], "give either the server's command after -- (hookline mcp add NAME -- "
                       "COMMAND [ARGS]...) or --url URL"),
        (["add", "x", "--url", "https://a/mcp", "--", "srv"],
         "give either a command or --url, not both"),
        (["add", "x", "--url", "https://a/mcp", "--env", "A=1"],
         "--env applies to a command, not to --url"),
        (["add", "x", "-H", "A=1", "--", "srv"],
         "--header applies to --url servers, not to a command"),
        (["add", "x", "--env", "NOEQUALS", "--", "srv"], "--env takes KEY=VALUE, got 'NOEQUALS'"),
        (["add", "a__b", "--", "srv"], "the server name must be 1-32 letters, digits or "
                                       "dashes, the first a letter or digit"),
        (["add", "x", "--url", "ftp://a"], "url must be an http:// or https:// URL"),
        (["add", "files", "--", "other"], f"MCP server 'files' is already in "
                                          f"{home / 'config.toml'}; remove it first"),
        (["remove", "nope"], f"no MCP server 'nope' in {home / 'config.toml'} "
                             f"(configured: files)"),
    ]
    for args, message in cases:
        out = hookline(home, "mcp", *args)
        assert out.returncode == 1, (args, out.stdout)
        (line,) = out.stderr.splitlines()
        assert line.startswith("error: ") and message in line, (args, line)
        assert (home / "config.toml").read_text() == before


@pytest.mark.slow
def test_list_check_starts_the_servers_and_counts_their_tools(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hookline(home, "mcp", "add", "files", "--", sys.executable, str(SERVER), "stdio")
    hookline(home, "mcp", "add", "gone", "--", str(tmp_path / "no-such-server"))
    hookline(home, "mcp", "add", "off", "--disabled", "--", "srv")
    out = hookline(home, "mcp", "list", "--check")
    assert out.returncode == 1  # an enabled server did not start
    lines = out.stdout.splitlines()
    # The test server has 11 tools; 'broken' and 'code' have schemas nothing enforces.
    assert lines[0].split()[:5] == ["files", "stdio", "enabled", "ready", "9"]
    assert lines[1].split()[:5] == ["gone", "stdio", "enabled", "failed", "-"]
    assert lines[2].strip() == (f"MCP server 'gone': the command "
                                f"{str(tmp_path / 'no-such-server')!r} does not exist; fix "
                                f"command (or cwd) in [mcp_servers.gone] of config.toml")
    assert lines[3].split()[:5] == ["off", "stdio", "disabled", "disabled", "-"]
    assert "tool 'code' is not offered" in out.stderr
    checked = {row["name"]: row for row in json.loads(
        hookline(home, "mcp", "list", "--check", "--json").stdout)}
    assert (checked["files"]["state"], checked["files"]["tools"]) == ("ready", 9)
    assert checked["gone"]["state"] == "failed" and "does not exist" in checked["gone"]["error"]
    hookline(home, "mcp", "remove", "gone")
    assert hookline(home, "mcp", "list", "--check").returncode == 0


def test_list_check_shows_a_server_s_stderr_escaped(tmp_path: Path) -> None:
    """A hostile server's last words must not clear the terminal or retitle it."""
    home = tmp_path / "home"
    server = tmp_path / "hostile.py"
    server.write_text("import sys\nsys.stderr.write('boom\\x1b]0;TITLE\\x07\\x1b[2J"
                      "\\r\\x1b[1Afake line\\n')\nsys.exit(3)\n")
    hookline(home, "mcp", "add", "evil", "--", sys.executable, str(server))
    out = hookline(home, "mcp", "list", "--check")
    assert out.returncode == 1 and "\x1b" not in out.stdout and "\r" not in out.stdout
    assert "\\x1b]0;TITLE" in out.stdout, out.stdout


def test_an_argument_cannot_add_a_row_or_reach_the_terminal(tmp_path: Path) -> None:
    home = tmp_path / "home"
    added = hookline(home, "mcp", "add", "odd", "--", "echo", "a\nfake   stdio  enabled x",
                     "\x1b]0;T\x07")
    listed = hookline(home, "mcp", "list")
    for said in (added.stdout, listed.stdout):
        assert "\x1b" not in said and "fake   stdio" not in said.splitlines()[-1][:12]
        assert "\\n" in said and "\\x1b]0;T" in said
    assert len([line for line in listed.stdout.splitlines() if "odd" in line]) == 1


def test_a_url_s_credentials_are_not_listed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    added = hookline(home, "mcp", "add", "cred", "--url",
                     "https://alice:s3cr3t@host.invalid/mcp?token=Q7")
    listed = hookline(home, "mcp", "list")
    for said in (added.stdout, listed.stdout):
        assert "s3cr3t" not in said and "Q7" not in said and "https://***@host.invalid" in said
    assert "s3cr3t" in (home / "config.toml").read_text(), "the config keeps what was given"


def test_a_command_line_s_tokens_are_not_listed(tmp_path: Path) -> None:
    """`--token X`, `--api-key=X`: an option that names a secret has its value hidden in
    what `mcp add` and `mcp list` print (not an option that only starts like one)."""
    home = tmp_path / "home"
    added = hookline(home, "mcp", "add", "gh", "--", "npx", "server", "--token", "ghp_REAL",
                     "--api-key=sk-live-XYZ", "--keyword", "plain")
    listed = hookline(home, "mcp", "list")
    for said in (added.stdout, listed.stdout):
        assert "ghp_REAL" not in said and "sk-live-XYZ" not in said
        assert "npx server --token *** --api-key=*** --keyword plain" in said
    assert "ghp_REAL" in (home / "config.toml").read_text(), "the config keeps what was given"


def test_run_says_a_server_failed_in_one_warning_with_its_stderr_indented(
        tmp_path: Path) -> None:
    """Without -v: a turn that goes on without a server says so, once, as docs/mcp.md
    shows it; the server's last words stay below it, escaped."""
    home = tmp_path / "home"
    server = tmp_path / "dies.py"
    server.write_text("import sys\nsys.stderr.write('no licence\\n\\x1b]0;T\\x07\\n')\n"
                      "sys.exit(3)\n")
    hookline(home, "mcp", "add", "db", "--", sys.executable, str(server))
    out = hookline(home, "run", "hi")
    assert out.returncode == 0, out.stderr
    (warning,) = [line for line in out.stderr.splitlines() if "MCP server 'db'" in line]
    assert warning.startswith("warning: MCP server 'db' could not start: the server process")
    assert "exited with status 3; its stderr ended with:" in warning
    below = out.stderr.split(warning, 1)[1].splitlines()[1:3]
    assert below == ["    no licence", "    \\x1b]0;T\\x07"], out.stderr


def test_a_server_that_could_not_start_is_not_waited_for_by_the_next_run(
        tmp_path: Path) -> None:
    """A server that never answers (no list kept) holds the first run for its timeout;
    the next runs start it without waiting for it, and say so."""
    home = tmp_path / "home"
    server = tmp_path / "mute.py"
    server.write_text("import time\ntime.sleep(60)\n")
    hookline(home, "mcp", "add", "mute", "--timeout", "1", "--", sys.executable, str(server))
    first = hookline(home, "run", "hi")
    assert first.returncode == 0, first.stderr
    assert "MCP server 'mute'" in first.stderr and "not waited for" not in first.stderr
    second = hookline(home, "run", "hi")
    assert second.returncode == 0, second.stderr
    assert ("warning: MCP server 'mute' could not start lately and has listed no tools: it "
            "is started without being waited for") in second.stderr
    checked = hookline(home, "mcp", "list", "--check")  # it waits: no word of not waiting
    assert "not waited for" not in checked.stdout + checked.stderr
    assert "without being waited for" not in checked.stdout + checked.stderr


def running_with(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (wherever they were reparented)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if marker.encode() in command and not is_gone(int(entry.name)):
            found.append(int(entry.name))
    return found


def test_run_offers_kept_tools_at_once_and_stops_a_server_still_starting(
        tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    gate = workspace / "gate"
    # The workspace's path marks this test's servers; the gate's value is not in the key
    # of the tool list kept in the home, so both tables share it.
    server = ["--", sys.executable, str(SERVER), "stdio", str(workspace)]
    hookline(home, "mcp", "add", "files", "--env", "MCP_GATE=", *server)
    first = hookline(home, "run", "hello")
    assert first.returncode == 0, first.stderr
    assert "files__echo" in first.stdout  # the offline model names the tools it was offered
    (kept,) = (home / "mcp-tools").iterdir()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600

    from hookline.builtins.config import update_config

    # The gate set by editing the table (`mcp remove` would take the kept list with it).
    update_config(home / "config.toml", {"mcp_servers": {"files": {"env": {
        "MCP_GATE": str(gate)}}}})
    offered = hookline(home, "run", "hello")
    assert offered.returncode == 0, offered.stderr
    assert "files__echo" in offered.stdout and not Path(f"{gate}.up").exists()
    # This turn ends once the server's process runs (it waits for a gate nobody opens).
    wait = f"while [ ! -e {gate}.started ]; do sleep 0.05; done; echo started"
    waited = hookline(home, "run", "/tool shell " + json.dumps({"command": wait}))
    assert waited.returncode == 0, waited.stderr
    assert "started" in waited.stdout and Path(f"{gate}.started").exists()
    assert running_with(str(workspace)) == []
    assert not Path(f"{gate}.up").exists()


class OwnMcp:
    """A plugin with its own `mcp` group, as bub-mcp registers one."""

    @hookimpl
    def register_cli_commands(self, app: typer.Typer) -> None:
        group = typer.Typer()

        @group.command(name="status")
        def status() -> None:
            typer.echo("the plugin's mcp status")

        app.add_typer(group, name="mcp", help="The plugin's MCP commands")


def test_a_plugins_own_mcp_group_moves_to_plugin_mcp(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("HOOKLINE_HOME", str(tmp_path / "home"))
    framework = Framework(tmp_path)
    framework.registry.register(OwnMcp(), name="own-mcp")
    runner = CliRunner()
    app = create_app(framework)
    ours = runner.invoke(app, ["mcp", "list"])
    assert ours.exit_code == 0 and ours.stdout.startswith("(no MCP servers configured")
    theirs = runner.invoke(app, ["plugin-mcp", "status"])
    assert (theirs.exit_code, theirs.stdout) == (0, "the plugin's mcp status\n")


def test_without_the_sdk_a_run_goes_on_with_one_warning(tmp_path: Path) -> None:
    """`mcp add` in an install without `hookline[mcp]`: a run says what to install and goes
    on, as with a server that failed; a disabled server needs nothing at all."""
    home = tmp_path / "home"
    assert hookline(home, "mcp", "add", "files", "--", "npx", "server").returncode == 0
    assert hookline(home, "mcp", "add", "off", "--disabled", "--", "npx", "x").returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env.update(HOOKLINE_HOME=str(home), HOOKLINE_MODEL="offline")
    code = ("import sys; sys.modules['mcp'] = None  # as if not installed\n"
            "from hookline.cli import main; main(sys.argv[1:])")

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code, "run", "hi"], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)

    done = run()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("[offline model]")
    assert [line for line in done.stderr.splitlines() if "MCP" in line] == [
        "warning: MCP servers are configured ([mcp_servers] in config.toml), but the MCP SDK "
        "is not installed: pip install 'hookline[mcp]' (or remove the servers, or disable "
        "them with enabled = false); this command goes on without their tools"]
    assert hookline(home, "mcp", "remove", "files").returncode == 0
    quiet = run()
    assert quiet.returncode == 0 and "MCP" not in quiet.stderr, quiet.stderr


def test_servers_added_at_once_are_all_kept(tmp_path: Path) -> None:
    """Six `mcp add` in parallel (a setup script's `&`): each reads, changes and writes the
    file under its lock, so none writes over another's table."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKLINE_")}
    env.update(HOOKLINE_HOME=str(home), HOOKLINE_MODEL="offline")
    adds = [subprocess.Popen([str(HOOKLINE), "mcp", "add", f"s{n}", "--", "echo", str(n)],
                             cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for n in range(6)]
    for add in adds:
        _out, err = add.communicate(timeout=120)
        assert add.returncode == 0, err
    assert sorted(written(home)["mcp_servers"]) == [f"s{n}" for n in range(6)]
    assert stat.S_IMODE((home / "config.toml.lock").stat().st_mode) == 0o600


def test_remove_forgets_the_server_s_kept_tool_list(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert hookline(home, "mcp", "add", "files", "--", "npx", "server").returncode == 0
    from hookline.builtins.mcp import server_configs
    from hookline.builtins.mcp.cache import CACHE_FOLDER, ListedTool, ToolCache

    (config,) = server_configs(written(home))
    cache = ToolCache(home / CACHE_FOLDER)
    cache.store(config, [ListedTool("read", "Read a file.", {"type": "object"})])
    assert cache.load(config) is not None
    assert hookline(home, "mcp", "remove", "files").returncode == 0
    assert cache.load(config) is None and list((home / CACHE_FOLDER).iterdir()) == []


def test_a_remote_server_out_of_reach_is_named_with_its_address(tmp_path: Path) -> None:
    """`ConnectError: All connection attempts failed` alone does not say where: the warning
    names the URL (its credentials hidden)."""
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    home = tmp_path / "home"
    url = f"http://bot:s3cr3t@127.0.0.1:{port}/mcp"
    assert hookline(home, "mcp", "add", "far", "--url", url, "--timeout", "5").returncode == 0
    out = hookline(home, "run", "hi")
    assert out.returncode == 0, out.stderr
    (warning,) = [line for line in out.stderr.splitlines() if "MCP server 'far'" in line]
    assert warning.startswith(f"warning: MCP server 'far' at http://***@127.0.0.1:{port}/mcp "
                              f"could not start: ")
    assert "s3cr3t" not in out.stderr
