"""`hookline gateway`: run the enabled channels until SIGINT or SIGTERM.

One `running()` scope stays open for the gateway's life (tape store, steering inbox,
background processes, environments). The channel manager runs the channels the `channels`
setting selects (`all` by default: every channel that is not an interface, so the `http`
channel and no terminal). The first SIGINT or SIGTERM stops the gateway gracefully: new
messages are refused, running turns finish (their tape entries are written; the manager
waits up to its shutdown timeout, 30 s, then cancels them), channels stop newest first
(the http channel answers the requests still waiting), then the scope closes its resources
in reverse order; the exit code is 0. A second signal cancels the running turns at once.

Status lines go to stdout (`hookline gateway: ...`); the log of the channels (where they
listen, dropped messages, failed turns) goes to stderr.
"""

from __future__ import annotations

import signal
from typing import Annotated, Any

import typer

from hookline.kernel import Framework

from .output import fail, show_logs

__all__ = ["gateway_command", "run_gateway"]

PREFIX = "hookline gateway:"


def gateway_command(framework: Framework) -> Any:
    def gateway(
        host: Annotated[
            str | None,
            typer.Option(help="Address the http channel listens on (setting http_host).",
                         show_default=False),
        ] = None,
        port: Annotated[
            int | None,
            typer.Option(min=0, max=65535, show_default=False,
                         help="Port of the http channel, 0 for any free port "
                              "(setting http_port)."),
        ] = None,
        channels: Annotated[
            str | None,
            typer.Option(show_default=False,
                         help="Channels to run: 'all', or names separated by commas; "
                              "'!name' excludes one (setting channels)."),
        ] = None,
        allow_remote: Annotated[
            bool,
            typer.Option("--allow-remote", show_default=False,
                         help="Allow --host to be an address other machines can reach "
                              "(setting http_allow_remote); the token stays required."),
        ] = False,
    ) -> None:
        """Run every enabled channel (the HTTP API by default) until SIGINT or SIGTERM."""
        import anyio

        from hookline.builtins.settings import load_settings

        show_logs()
        try:
            settings = load_settings()
            anyio.run(run_gateway, framework, settings, host, port, channels,
                      allow_remote or None)
        except KeyboardInterrupt:  # before the signal handler was installed
            raise typer.Exit(130) from None
        except Exception as exc:  # one clear line, never a traceback
            fail(exc)

    return gateway


async def run_gateway(framework: Framework, settings: Any, host: str | None = None,
                      port: int | None = None, channels: str | None = None,
                      allow_remote: bool | None = None) -> None:
    """The gateway (the command's body, callable from tests and embedding hosts)."""
    import anyio

    from hookline.builtins.channels import ChannelManager
    from hookline.builtins.channels.http import HttpChannel

    names = channels if channels is not None and channels.strip() else settings.channels
    manager = ChannelManager(framework, stream_output=settings.stream, enabled_channels=names)
    selected = manager.enabled(names)
    if not selected:
        raise RuntimeError(
            f"no channel to run for the selection {names!r}; known channels: "
            f"{', '.join(manager.channels) or '(none)'}"
        )
    # `run` selects again: name exactly these, so unknown names are not warned about twice.
    manager.enabled_channels = [*selected, *(f"!{name}" for name in manager.channels
                                             if name not in selected)]
    http = selected.get("http")
    if isinstance(http, HttpChannel):
        if host is not None:
            http.host = host
        if port is not None:
            http.port = port
        if allow_remote is not None:
            http.allow_remote = allow_remote
    elif host is not None or port is not None or allow_remote:
        typer.echo(f"{PREFIX} --host/--port/--allow-remote apply to the builtin http channel, "
                   f"which is not running", err=True)
    stop = anyio.Event()
    async with framework.running():
        typer.echo(f"{PREFIX} running channels {', '.join(selected)} (workspace "
                   f"{framework.workspace}); stop with Ctrl-C or SIGTERM")
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(_handle_signals, manager, stop)
            try:
                await manager.run(stop)
            finally:
                task_group.cancel_scope.cancel()
        if stop.is_set():
            typer.echo(f"{PREFIX} channels stopped; closing resources")
    typer.echo(f"{PREFIX} stopped")


async def _handle_signals(manager: Any, stop: Any) -> None:
    """The first SIGINT/SIGTERM stops gracefully; another one cancels the running turns."""
    import anyio

    try:
        receiver = anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)
    except NotImplementedError:  # no signal handling on this platform: Ctrl-C interrupts
        return
    with receiver as signals:
        async for signum in signals:
            name = signal.Signals(signum).name
            if not stop.is_set():
                busy = manager.busy_sessions()
                waiting = (f"; waiting for {len(busy)} running turn(s), {name} again "
                           f"cancels them") if busy else ""
                typer.echo(f"{PREFIX} {name} received, stopping{waiting}")
                stop.set()
                continue
            busy = manager.busy_sessions()
            typer.echo(f"{PREFIX} {name} received again, cancelling {len(busy)} running "
                       f"turn(s)")
            for session_id in busy:
                await manager.quit_session(session_id)


