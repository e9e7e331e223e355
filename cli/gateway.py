"""`hookline gateway`: run the enabled channels until SIGINT or SIGTERM.

One `running()` scope stays open for the gateway's life (tape store, steering inbox,
background processes, environments). The channel manager runs the channels the `channels`
setting selects (`all` by default: every channel that is not an interface, so the `http`
channel and no terminal). The first SIGINT or SIGTERM stops the gateway gracefully: new
messages are refused and queued follow-ups are not started (the http channel answers both
503 with Retry-After: not run), running turns finish (their tape entries are written; the
manager waits up to its shutdown timeout, 30 s, then cancels them), channels stop newest
first (the http channel answers the requests still waiting), then the scope closes its
resources in reverse order; the exit code is 0. A second signal cancels the running turns at once
and gives them `FORCE_GRACE` seconds to end: if the gateway has not exited by then (a turn
waits on a blocked worker thread, say), it kills its background process groups, flushes its
output and exits at once with status 128 + the signal number (130 for SIGINT, 143 for
SIGTERM); a third signal does that without waiting.

Status lines go to stdout (`hookline gateway: ...`); the log of the channels (where they
listen, dropped messages, failed turns) goes to stderr.
"""

import signal
from typing import Annotated, Any

import typer

from hookline.kernel import Framework

from .approvals import ApprovalOption
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
        approval: ApprovalOption = None,
    ) -> None:
        """Run every enabled channel (the HTTP API by default) until SIGINT or SIGTERM."""
        import anyio

        from hookline.builtins.config import load_settings

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


def channel_selection(channels: str | None, settings: Any) -> Any:
    """The channels the gateway runs: ``--channels`` when it is not blank, else the
    ``channels`` setting (``HOOKLINE_CHANNELS``, ``channels`` in config.toml); never Bub's
    ``enabled_channels``."""
    return channels if channels is not None and channels.strip() else settings.channels


async def run_gateway(framework: Framework, settings: Any, host: str | None = None,
                      port: int | None = None, channels: str | None = None,
                      allow_remote: bool | None = None) -> None:
    """The gateway (the command's body, callable from tests and embedding hosts)."""
    import anyio

    from hookline.builtins.channels import ChannelManager

    names = channel_selection(channels, settings)
    # Always streamed: a turn's errors, usage and tool calls reach the channels only
    # through its stream (without one a failed turn would answer as if it had succeeded).
    manager = ChannelManager(framework, stream_output=True, enabled_channels=names,
                             store_deadline=settings.store_turn_deadline)
    selected = manager.enabled(names)
    if not selected:
        raise RuntimeError(
            f"no channel to run for the selection {names!r}; known channels: "
            f"{', '.join(manager.channels) or '(none)'}"
        )
    # `run` selects again: name exactly these, so unknown names are not warned about twice.
    manager.enabled_channels = [*selected, *(f"!{name}" for name in manager.channels
                                             if name not in selected)]
    configure_http(framework, selected.get("http"), host, port, allow_remote)
    stop = anyio.Event()
    async with framework.running():
        typer.echo(f"{PREFIX} starting channels {', '.join(selected)} (workspace "
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


def configure_http(framework: Framework, http: Any, host: str | None, port: int | None,
                   allow_remote: bool | None) -> None:
    """Hand `--host`, `--port` and `--allow-remote` to the channel named `http` through
    `ListenerChannel`; refuse them for an `http` channel that does not declare it."""
    from hookline.builtins.channels import ListenerChannel

    given = host is not None or port is not None or bool(allow_remote)
    if isinstance(http, ListenerChannel):
        http.configure_listener(host, port, allow_remote)
    elif http is not None and given:
        raise RuntimeError(
            f"channel 'http' from {channel_origin(framework, http)} does not take "
            f"--host/--port/--allow-remote (it has no configure_listener method); configure "
            f"it as its plugin documents, or leave these options out")
    elif given:
        typer.echo(f"{PREFIX} --host/--port/--allow-remote apply to the http channel, "
                   f"which is not running", err=True)


def channel_origin(framework: Framework, channel: Any) -> str:
    """`plugin <name>` for the plugin whose package defines the channel's class (a Bub
    channel: the one it adapts), else `module <module>`."""
    from hookline.builtins.bub import unwrap_channel

    module = type(unwrap_channel(channel)).__module__
    package = module.partition(".")[0]
    for name, plugin in framework.registry.list_name_plugin():
        if type(plugin).__module__.partition(".")[0] == package:
            return f"plugin {name}"
    return f"module {module}"


FORCE_GRACE = 3.0
"""Seconds the running turns get to end after a second signal before the gateway exits
without waiting (status 128 + the signal number)."""


async def _handle_signals(manager: Any, stop: Any) -> None:
    """The first SIGINT/SIGTERM stops gracefully; another one cancels the running turns and
    arms a watchdog that ends the process `FORCE_GRACE` seconds later; a third ends it now.

    The watchdog is a thread, not a task: what keeps a shutdown from finishing (a worker
    thread that never returns, an interpreter exit joining it) may hold the event loop's
    tasks too, but cannot stop another thread from calling `os._exit`. A signal this task
    cannot take (a plugin's sync hook holds the loop) ends the process too
    (`watch_held_loop`).
    """
    import sys
    import threading

    import anyio

    from .signals import force_exit, held_note, watch_held_loop

    def exit_now(signum: int, reason: str) -> None:
        force_exit(manager.framework, signum,
                   f"{PREFIX} {reason}; exiting now with status {128 + signum}", sys.stdout)

    try:
        receiver = anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)
    except NotImplementedError:  # no signal handling on this platform: Ctrl-C interrupts
        return
    watchdog: threading.Timer | None = None
    with receiver as signals, watch_held_loop(manager.framework, lambda signum: (
            f"{PREFIX} {held_note(signum)}; exiting now with status {128 + signum}"),
            sys.stdout) as taken:
        async for signum in signals:
            taken()
            name = signal.Signals(signum).name
            if not stop.is_set():
                busy = manager.busy_sessions()
                waiting = (f"; waiting for {len(busy)} running turn(s), {name} again "
                           f"cancels them") if busy else ""
                typer.echo(f"{PREFIX} {name} received, stopping{waiting}")
                stop.set()
                continue
            if watchdog is not None:
                exit_now(signum, f"{name} received a third time")
            busy = manager.busy_sessions()
            typer.echo(f"{PREFIX} {name} received again, cancelling {len(busy)} running "
                       f"turn(s); exiting in {FORCE_GRACE:g} s at the latest")
            watchdog = threading.Timer(
                FORCE_GRACE, exit_now, (signum, f"not stopped {FORCE_GRACE:g} s after {name}"))
            watchdog.daemon = True
            watchdog.start()
            for session_id in busy:
                await manager.quit_session(session_id)
