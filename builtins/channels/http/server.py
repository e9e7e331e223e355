"""Server plumbing of the `http` channel: where it listens and whether it serves now
(`Listener`), the listening socket, the TLS files, the checks on where it may listen,
hypercorn's configuration and serve call, and the ASGI lifespan and disconnect watchers.
No request handling: that is the channel's (`http`)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from .guard import Token, is_loopback_address

__all__ = ["Listener", "Receive", "Scope", "Send"]

logger = logging.getLogger("hookline.builtins.channels.http.channel")
"""The channel's logger: these lines are the channel's own."""

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass
class Listener:
    """Where one `HttpChannel` listens, and whether it serves now."""

    host: str | None = None
    """None: `http_host`, read when the channel starts."""
    port: int | None = None
    """None: `http_port`; 0 picks a free port."""
    allow_remote: bool | None = None
    """None: `http_allow_remote`."""
    address: tuple[str, int] | None = None
    """The address bound, once listening."""
    tls: bool = False
    """It serves HTTPS (`http_certfile` and `http_keyfile`)."""
    accepting: bool = False
    """New messages are taken (else answered 503)."""
    closing: anyio.Event | None = None
    """Set by `stop()`: close the listener."""
    stopped: anyio.Event | None = None
    """Set when the run in progress has ended."""

    def configure(self, host: str | None, port: int | None,
                  allow_remote: bool | None) -> None:
        """What is given (not None) wins over the settings when the channel starts."""
        if host is not None:
            self.host = host
        if port is not None:
            self.port = port
        if allow_remote is not None:
            self.allow_remote = allow_remote

    @property
    def url(self) -> str | None:
        """`http(s)://host:port` once listening (an IPv6 host in brackets), else None."""
        if self.address is None:
            return None
        host, port = self.address
        scheme = "https" if self.tls else "http"
        return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: a free one), IPv6 when needed."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def _tls_files(settings: Any) -> tuple[str, str] | None:
    """The certificate and key to serve HTTPS with, checked now so that a bad pair is one
    clear error at start rather than a failure inside the server."""
    if settings.http_certfile is None or settings.http_keyfile is None:
        return None
    import ssl

    certfile, keyfile = str(settings.http_certfile), str(settings.http_keyfile)
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        raise RuntimeError(
            f"cannot serve HTTPS with http_certfile {certfile} and http_keyfile {keyfile}: "
            f"{getattr(exc, 'strerror', None) or exc}; check that both are PEM files and "
            f"that the key belongs to the certificate") from exc
    return certfile, keyfile


def _check_binding(host: str, bound: str, allow_remote: bool, auth: bool,
                   tls: tuple[str, str] | None) -> None:
    """Refuse a bind the settings do not allow; warn about the risky ones that remain."""
    if is_loopback_address(bound):
        if not auth:
            logger.warning(
                "http authentication is OFF (http_auth = false): any program on this machine "
                "can run commands through the gateway with your rights; remove the setting "
                "to require the token again")
        return
    if not allow_remote:
        raise RuntimeError(
            f"refusing to listen on {host} ({bound}): it is not a loopback address, so other "
            f"machines could reach the gateway, whose tools run shell commands; use "
            f"--allow-remote (setting http_allow_remote = true) if that is what you want, "
            f"or --host 127.0.0.1")
    if not auth:
        raise RuntimeError(
            f"refusing to listen on {host} ({bound}) with authentication off: anyone who "
            f"can reach the address could run commands; remove http_auth = false")
    if tls is None:
        logger.warning(
            "http channel on %s serves plain HTTP: the token and every message cross the "
            "network unencrypted; set http_certfile and http_keyfile, or put a TLS reverse "
            "proxy in front", host)


def _log_access_hints(url: str, bound: str, token: Token | None) -> None:
    """Say once how a client gets in: where the token is, and a ready command."""
    if bound in ("0.0.0.0", "::"):
        logger.info("http channel: listening on every address; clients must send a Host "
                    "header naming localhost, 127.0.0.1, ::1 or a name in http_allowed_hosts")
    auth = f"-H \"Authorization: Bearer {token.shell}\" " if token is not None else ""
    if token is not None:
        logger.info("http channel: clients send 'Authorization: Bearer <token>'; the token "
                    "is %s", token.console)
    logger.info("http channel: try  curl %s-H 'Content-Type: application/json' -d "
                "'{\"content\": \"hello\"}' %s/v1/messages", auth, url)


def _server_config(listener: socket.socket, reply_timeout: float,
                   tls: tuple[str, str] | None = None) -> Any:
    from hypercorn.config import Config

    config = Config()
    # hypercorn takes over the socket we bound, so the address is known before serving.
    config.bind = [f"fd://{listener.detach()}"]
    if tls is not None:
        config.certfile, config.keyfile = tls
    config.accesslog = None
    config.include_server_header = False
    server_log = logging.getLogger(f"{logger.name}.server")
    if server_log.level == logging.NOTSET:
        server_log.setLevel(logging.WARNING)  # hide hypercorn's own "Running on" line
    config.errorlog = server_log
    # Requests in flight when the listener closes keep waiting for their turn.
    config.graceful_timeout = reply_timeout + 5
    config.keep_alive_timeout = 5
    return config


def _close_idle_connections_on_eof() -> None:
    """hypercorn (0.18) keeps a keep-alive connection whose client has closed its side
    open until the keep-alive timeout: its HTTP/1 protocol does nothing with the end of
    an idle connection, and the connection's task waits for the idle timer. With many
    short-lived clients, hundreds of such half-closed sockets (CLOSE-WAIT) hold file
    descriptors. Make the protocol close an idle connection at its end, as it does one
    it finished with (once per connection: on trio closing reports the end again), unless
    the server is stopping."""
    from hypercorn.events import Closed
    from hypercorn.protocol.h11 import H11Protocol

    handle = H11Protocol.handle
    if getattr(handle, "closes_idle", False):
        return

    async def handle_and_close_idle(self: Any, event: Any) -> None:
        idle = self.stream is None
        await handle(self, event)
        # Not while the server stops: it closes every connection itself then, and this
        # close, from the idle task it stops, could wait for that task's lock for ever
        # (Python 3.11's wait_for can swallow the cancel meant to end it).
        stopping = self.context.terminated.is_set()
        if (idle and isinstance(event, Closed) and not stopping
                and not getattr(self, "_ended", False)):
            self._ended = True
            await self.send(Closed())

    handle_and_close_idle.closes_idle = True  # type: ignore[attr-defined]
    H11Protocol.handle = handle_and_close_idle  # type: ignore[method-assign]


async def _serve(app: Any, config: Any, shutdown_trigger: Callable[[], Awaitable[None]]) -> None:
    """hypercorn's `serve` for the event loop we run on."""
    _close_idle_connections_on_eof()
    try:
        import trio

        on_trio = trio.lowlevel.in_trio_run()
    except ImportError:
        on_trio = False
    if on_trio:
        from hypercorn.trio import serve
    else:
        from hypercorn.asyncio import serve  # type: ignore[assignment]
    await serve(app, config, shutdown_trigger=shutdown_trigger, mode="asgi")


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _watch_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return

