"""`hookline mcp list/add/remove`: the `[mcp_servers.NAME]` tables of config.toml.

`list` reads the file and starts nothing; `list --check` opens the scope as a turn would,
starts the enabled servers and counts the tools each offers. `add` and `remove` rewrite the
file (privately, as every config write). The MCP SDK is imported by `--check` only.
"""

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from hookline.kernel import Framework

from .output import fail, show_logs

GROUP = "mcp"
PLUGIN_GROUP = "plugin-mcp"
"""Where a plugin's own `mcp` commands (bub-mcp's) go: hookline's `mcp` keeps its name."""


def mcp_commands(framework: Framework) -> typer.Typer:
    """The `mcp` command group; `list --check` finds `framework` as the context's object,
    so the group works mounted on the application or on its own."""
    group = typer.Typer(name=GROUP, no_args_is_help=True, context_settings={"obj": framework},
                        help="List, add or remove the MCP servers of config.toml "
                             "([mcp_servers.NAME]).")
    group.command(name="list")(list_)
    group.command(name="add")(add)
    group.command(name="remove")(remove)
    return group


def list_(
    ctx: typer.Context,
    check: Annotated[bool, typer.Option(
        "--check", help="Start the enabled servers, then show their state and tool "
                        "counts.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show each configured server: transport, enabled, and the command or URL.

    With --check, exit status 1 when an enabled server did not start."""
    configs = _configs()
    framework: Framework = ctx.obj
    rows = _rows(configs, _check(framework) if check and configs else {}, check)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
    elif not rows:
        typer.echo("(no MCP servers configured: hookline mcp add NAME -- COMMAND [ARGS]...)")
    for row in rows if not as_json else []:
        typer.echo(_line(row, check))
    if any(row.get("state") == "failed" for row in rows):
        raise typer.Exit(1)


def _rows(configs: list[Any], states: dict[str, Any], check: bool) -> list[dict[str, Any]]:
    """What `list` says of each server (with `check`: its state, tools and error)."""
    rows = []
    for config in configs:
        row: dict[str, Any] = {"name": config.name, "transport": config.transport,
                               "enabled": config.enabled, "target": config.describe()}
        if check:
            state = states.get(config.name)
            row.update(state=state.state if state else "disabled",
                       tools=state.tools if state else None,
                       error=state.error if state else None)
        rows.append(row)
    return rows


def add(
    name: Annotated[str, typer.Argument(
        metavar="NAME", show_default=False,
        help="The server's name: 1-32 letters, digits or dashes (its tools are NAME__tool).")],
    command: Annotated[list[str] | None, typer.Argument(
        metavar="[-- COMMAND [ARGS]...]", show_default=False,
        help="The command that runs a stdio server (after --, so that its options are "
             "its own).")] = None,
    url: Annotated[str | None, typer.Option(
        "--url", metavar="URL", help="A streamable HTTP server's URL, instead of a "
                                     "command.")] = None,
    header: Annotated[list[str] | None, typer.Option(
        "--header", "-H", metavar="KEY=VALUE",
        help="An HTTP header sent to a --url server; repeatable.")] = None,
    env: Annotated[list[str] | None, typer.Option(
        "--env", "-e", metavar="KEY=VALUE",
        help="A variable for a command's environment; repeatable.")] = None,
    cwd: Annotated[str | None, typer.Option(
        "--cwd", metavar="DIR", help="A command's folder, relative to the workspace "
                                     "(default: the workspace).")] = None,
    network: Annotated[bool, typer.Option(
        "--network", help="Let a command's sandbox open TCP connections.")] = False,
    timeout: Annotated[float | None, typer.Option(
        "--timeout", metavar="SECONDS", help="Seconds to start, and per call "
                                             "(default 60).")] = None,
    disabled: Annotated[bool, typer.Option(
        "--disabled", help="Write it with enabled = false.")] = False,
) -> None:
    """Add a server: hookline mcp add NAME -- COMMAND [ARGS]..., or --url URL."""
    from hookline.builtins.config import SettingsError, config_lock, update_config
    from hookline.builtins.mcp import CONFIG_TABLE, parse_server, server_table

    raw = _table(command or [], url, header or [], env or [], cwd, network)
    if timeout is not None:
        raw["timeout"] = timeout
    if disabled:
        raw["enabled"] = False
    with config_lock(_config_path()):  # another `mcp add` at once waits: neither loses the other's
        path, servers = _file_servers()
        if name in servers:
            fail(ValueError(f"MCP server {name!r} is already in {path}; remove it first "
                            f"(hookline mcp remove {name}) or edit the file"))
        try:
            server = parse_server(name, raw, str(path))
            update_config(path, {CONFIG_TABLE: {name: server_table(server)}})
        except (SettingsError, OSError) as exc:
            fail(exc)
    from hookline.builtins.terminal import terminal_text

    typer.echo(terminal_text(f"added MCP server {name!r} ({server.transport}: "
                             f"{server.describe()}) to {path}", keep_newlines=False))


def remove(
    name: Annotated[str, typer.Argument(metavar="NAME", show_default=False,
                                        help="The server to remove.")],
) -> None:
    """Remove a server's table from config.toml."""
    from hookline.builtins.config import (
        SettingsError,
        config_lock,
        read_config_file,
        write_config,
    )
    from hookline.builtins.mcp import CONFIG_TABLE

    with config_lock(_config_path()):
        path, servers = _file_servers()
        if name not in servers:
            known = ", ".join(servers) or "none"
            fail(ValueError(f"no MCP server {name!r} in {path} (configured: {known})"))
        try:
            data = read_config_file(path)
            removed = _parsed(name, data[CONFIG_TABLE][name], path)
            del data[CONFIG_TABLE][name]
            if not data[CONFIG_TABLE]:
                del data[CONFIG_TABLE]
            write_config(path, data)
        except (SettingsError, OSError) as exc:
            fail(exc)
    if removed is not None:  # its kept tool list goes with it
        from hookline.builtins.mcp import CACHE_FOLDER, ToolCache

        ToolCache(path.parent / CACHE_FOLDER).forget(removed)
    typer.echo(f"removed MCP server {name!r} from {path}")


def settle_mcp_group(app: typer.Typer, ours: typer.Typer) -> None:
    """Add hookline's `mcp` group after the plugins' commands; a plugin's own `mcp`
    (bub-mcp registers one) is renamed `plugin-mcp`, so both stay reachable."""
    from typer.main import get_command_name, solve_typer_info_defaults

    for info in app.registered_groups:
        if solve_typer_info_defaults(info).name == GROUP:
            info.name = PLUGIN_GROUP
    for command in app.registered_commands:
        named = command.name or (command.callback and get_command_name(command.callback.__name__))
        if named == GROUP:
            command.name = PLUGIN_GROUP
    app.add_typer(ours)


def mcp_summary() -> list[str]:
    """For `hookline plugins`: a line per configured MCP server (none with a config file
    that cannot be read: the commands that need it say why)."""
    from hookline.builtins.config import SettingsError, load_settings
    from hookline.builtins.mcp import server_configs

    try:
        settings = load_settings()
        if not settings.extra.get("mcp_servers"):
            return []
        configs = server_configs(settings.extra)
    except SettingsError:
        return []
    return [f"mcp  {config.name:<20} {config.transport:<9} "
            f"{'enabled' if config.enabled else 'disabled':<40} "
            f"not started here (hookline mcp list --check)" for config in configs]


def _configs() -> list[Any]:
    from hookline.builtins.config import SettingsError, load_settings
    from hookline.builtins.mcp import server_configs

    try:
        settings = load_settings()
        return server_configs(settings.extra, str(settings.home / "config.toml"))
    except SettingsError as exc:
        fail(exc)


def _parsed(name: str, table: Any, path: Path) -> Any:
    """The server's config as its table reads, or None for a table too broken to read
    (it is removed all the same)."""
    from hookline.builtins.config import SettingsError
    from hookline.builtins.mcp import parse_server

    try:
        return parse_server(name, table, str(path))
    except (SettingsError, TypeError, ValueError):
        return None


def _config_path() -> Path:
    from hookline.builtins.config import default_home

    return default_home() / "config.toml"


def _file_servers() -> tuple[Path, dict[str, Any]]:
    """The config file and its `[mcp_servers]` table as written (not checked: a broken
    table can still be removed)."""
    from hookline.builtins.config import SettingsError, read_config_file
    from hookline.builtins.mcp import CONFIG_TABLE

    path = _config_path()
    try:
        servers = read_config_file(path).get(CONFIG_TABLE, {})
    except SettingsError as exc:
        fail(exc)
    if not isinstance(servers, dict):
        fail(ValueError(f"[{CONFIG_TABLE}] in {path} is not a table of servers; fix the file"))
    return path, servers


def _table(command: list[str], url: str | None, headers: list[str], env: list[str],
           cwd: str | None, network: bool) -> dict[str, Any]:
    """The raw table the flags describe, or one error line saying which flags clash."""
    if bool(command) == (url is not None):
        fail(ValueError("give either the server's command after -- (hookline mcp add NAME "
                        "-- COMMAND [ARGS]...) or --url URL" if not command else
                        "give either a command or --url, not both"))
    if url is not None:
        stdio = [flag for flag, given in (("--env", env), ("--cwd", cwd), ("--network", network))
                 if given]
        if stdio:
            verb = "applies" if len(stdio) == 1 else "apply"
            fail(ValueError(f"{', '.join(stdio)} {verb} to a command, not to --url"))
        table: dict[str, Any] = {"url": url}
        if headers:
            table["headers"] = _pairs("--header", headers)
        return table
    if headers:
        fail(ValueError("--header applies to --url servers, not to a command"))
    table = {"command": command[0], "args": command[1:]}
    if env:
        table["env"] = _pairs("--env", env)
    if cwd is not None:
        table["cwd"] = cwd
    if network:
        table["network"] = True
    return table


def _pairs(flag: str, items: list[str]) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(ValueError(f"{flag} takes KEY=VALUE, got {item!r}"))
        pairs[key.strip()] = value
    return pairs


def _check(framework: Framework) -> dict[str, Any]:
    """Open the scope, start the enabled servers, wait for their tools, read their states."""
    import logging

    import anyio

    from hookline.builtins import builtin_services

    show_logs(logging.WARNING, turn_failures=False)
    builtin = builtin_services(framework)
    if builtin is None:
        from hookline.kernel.framework import DISABLE_ENV

        fail(RuntimeError(f"the builtin plugin is not loaded ({DISABLE_ENV}?): "
                          "nothing would start the MCP servers"))

    async def check() -> dict[str, Any]:
        async with framework.running():
            servers = builtin.mcp_servers()
            if servers is None:  # no [mcp_servers] table: nothing to start
                return {}
            await servers.prepare(wait=True)
            return {state.config.name: state for state in servers.states()}

    try:
        return anyio.run(check)
    except Exception as exc:
        fail(exc)


def _line(row: dict[str, Any], check: bool) -> str:
    """One server's row, its control characters shown escaped: a server's error is what
    it wrote on stderr, which must not clear the screen or rewrite the table."""
    from hookline.builtins.terminal import terminal_text

    enabled = "enabled" if row["enabled"] else "disabled"
    line = f"{row['name']:<16} {row['transport']:<6} {enabled:<9}"
    if check:
        tools = "-" if row["tools"] is None else f"{row['tools']} tool" + (
            "" if row["tools"] == 1 else "s")
        line += f" {row['state']:<8} {tools:<9}"
    line = terminal_text(f"{line} {row['target']}", keep_newlines=False)  # one row each
    if check and row.get("error"):  # its lines (a server's stderr) below it, each escaped
        line += "".join(f"\n    {terminal_text(part, keep_newlines=False)}"
                        for part in str(row["error"]).split("\n"))
    return line
