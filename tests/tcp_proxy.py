"""A TCP proxy the tests control, between hookline and PostgreSQL, to make network faults
on demand: `pause()` stops forwarding (a black hole: connections stay open, nothing
passes), `resume()` forwards again, `drop()` closes every connection, `refuse` makes new
connections close at once (the database is unreachable), and `cut_after(pattern)` closes
a connection right after the server's reply containing `pattern` has reached the proxy
(and before it reaches the client): the statement committed, its answer is lost.

Threads and blocking sockets, one pair of forwarding threads per connection.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


class TcpProxy:
    """Listens on 127.0.0.1 (`port`) and forwards to `target` (host, port)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._forwarding = threading.Event()
        self._forwarding.set()
        self.refuse = False
        self._cut: bytes | None = None
        self.cuts = 0
        """How many connections `cut_after` has closed."""
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, url: str) -> str:
        """`url` (a postgresql:// URL on the target) pointed at this proxy instead."""
        host = f"{self.target[0]}:{self.target[1]}"
        assert host in url, url
        return url.replace(host, f"127.0.0.1:{self.port}", 1)

    def pause(self) -> None:
        self._forwarding.clear()

    def resume(self) -> None:
        self._forwarding.set()

    def drop(self) -> None:
        """Close every connection now (both sides see it closed)."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                _close(sock)

    def cut_after(self, pattern: bytes | None) -> None:
        """Close the next connection whose server reply contains `pattern`, before the
        reply is passed on (once; None cancels)."""
        self._cut = pattern

    def close(self) -> None:
        self._closed = True
        _close(self._listener)
        self.resume()
        self.drop()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.refuse:
                _close(client)
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
                server.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._pairs.append((client, server))
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, from_server: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                self._forwarding.wait()
                pattern = self._cut
                if from_server and pattern is not None and pattern in data:
                    self._cut = None
                    self.cuts += 1
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


@contextlib.contextmanager
def proxy_for(url: str) -> Iterator[TcpProxy]:
    """A proxy in front of the server of `url` (host:port taken from the URL)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    proxy = TcpProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    try:
        yield proxy
    finally:
        proxy.close()
