"""Messages between hookline and its sandbox helper: plain values with descriptors attached.

One message is a 4-byte length, then that many bytes of `marshal` (dicts of strings,
numbers, lists: both ends run the same interpreter, `marshal` needs no import, and the
socket joins hookline and its own helper only: no command can reach it); the descriptors
travel with the length (SCM_RIGHTS). Standard library only: both hookline and the helper
program (`jail/__main__.py`) import it.
"""

from __future__ import annotations

import array
import marshal
import socket
import struct
from collections.abc import Sequence

TYPE_CHECKING = False  # not typing's: the helper imports no module it can do without
if TYPE_CHECKING:
    from typing import Any, Final

__all__ = ["MAX_FDS", "MAX_MESSAGE", "receive", "send"]

MAX_FDS: Final = 8
"""Descriptors one message may carry (a command's three streams and its status)."""

MAX_MESSAGE: Final = 64 * 1024 * 1024
"""Bytes of one message at most: an environment and a command line, however long."""

_HEADER = struct.Struct("<I")


def send(channel: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    """Send `message` with `fds` attached (the receiver gets its own copies)."""
    body = marshal.dumps(message)
    header = _HEADER.pack(len(body))
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sent = channel.sendmsg([header + body], ancillary)
    if sent < len(header) + len(body):
        channel.sendall((header + body)[sent:])


def receive(channel: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """The next message and its descriptors (close-on-exec); None once the other side has
    closed."""
    fds = array.array("i")
    data, ancillary, _flags, _address = channel.recvmsg(
        _HEADER.size, socket.CMSG_SPACE(MAX_FDS * fds.itemsize), socket.MSG_CMSG_CLOEXEC)
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    if not data:
        return None
    while len(data) < _HEADER.size:
        more = channel.recv(_HEADER.size - len(data))
        if not more:
            return None
        data += more
    (size,) = _HEADER.unpack(data)
    if size > MAX_MESSAGE:
        raise ValueError(f"a sandbox message of {size} bytes is over the limit")
    body = bytearray()
    while len(body) < size:
        chunk = channel.recv(min(size - len(body), 1 << 20))
        if not chunk:
            return None
        body += chunk
    message = marshal.loads(body)
    if not isinstance(message, dict):
        raise ValueError("a sandbox message is not a table")
    return message, list(fds)
