"""The `http` channel's trust boundary: who may call the API, under which name, from where.

The gateway runs shell commands a model asks for, so a request it accepts is as powerful as
a shell. Three checks stand between the network and the agent, in this order:

- **Host**: the `Host` header must name the bound address, `localhost`, `127.0.0.1`, `::1`
  or a name in `http_allowed_hosts`. A web page that rebinds its own DNS name to 127.0.0.1
  (DNS rebinding) sends its own name, and is refused (403).
- **Origin**: browsers add `Origin` to cross-site requests (and `Sec-Fetch-Site` to all
  requests). A request that carries either, from an origin not in `http_allowed_origins`,
  is refused (403): the gateway serves programs, not web pages.
- **Token**: every endpoint but `GET /v1/health` requires `Authorization: Bearer <token>`,
  compared in constant time (401 otherwise). The token is `http_token` when set, else a
  random 256-bit one kept in `<home>/http_token`, created on first start with mode 0600.

POST bodies must be declared `application/json` (415 otherwise): a browser can send
`text/plain` anywhere without asking, never `application/json`.

Before them all, the framing: a request with both `Content-Length` and `Transfer-Encoding`
is answered 400 and its connection closed (RFC 9112 section 6.3), since a proxy in front
may have read its body by the other header, and what it took for the next request would
be hidden in this one (request smuggling). After them all, a request to switch protocols
(`Upgrade: websocket` or any other) is refused with 400: the gateway speaks only HTTP
(`h2c` aside, which hypercorn switches to HTTP/2 itself before the request reaches the
channel, so the request is answered inside HTTP/2 after the same checks).
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import os
import secrets
import shlex
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookline.kernel.errors import HooklineError

from ...config import MIN_HTTP_TOKEN_LENGTH, setting_env
from ...host.files import open_regular_file
from ...privacy import HOME_ENV

__all__ = [
    "IDEMPOTENCY_HEADER",
    "LOCAL_HOSTS",
    "SESSION_HEADER",
    "TOKEN_FILE_NAME",
    "Guard",
    "HttpError",
    "Token",
    "is_loopback_address",
    "load_token",
]

TOKEN_FILE_NAME = "http_token"
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
"""Host names always accepted: they can only reach this machine."""
IDEMPOTENCY_HEADER = "idempotency-key"
"""The header that makes a retry of `POST /v1/messages` run its turn once (`idempotency`)."""
SESSION_HEADER = "x-hookline-session"
"""The header naming the session of an OpenAI-compatible request (`openai_body`)."""
_CORS_METHODS = b"GET, HEAD, POST, OPTIONS"
_CORS_HEADERS = ", ".join(("authorization", "content-type", IDEMPOTENCY_HEADER,
                           SESSION_HEADER)).encode()
_CORS_EXPOSED = b"retry-after"
"""What an allowed page may read of an answer besides the simple headers: when to retry."""


class HttpError(Exception):
    """An error answered as `{"error": message}` with the given status. `code` names it
    for machines where the OpenAI-compatible routes' error shape has room for that."""

    def __init__(self, status: int, message: str,
                 headers: list[tuple[bytes, bytes]] | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or []
        self.code = code


@dataclass(frozen=True)
class Token:
    """The bearer token and where it came from, told three ways: `where` for a remote
    client (no absolute path), `console` for the start-up line, `shell` for a command line
    (how to get it in a shell)."""

    value: str
    where: str
    console: str
    shell: str

    def matches(self, given: str) -> bool:
        return hmac.compare_digest(given.encode("utf-8", "replace"), self.value.encode())


def load_token(settings: Any) -> Token:
    """The configured token, else the one in `<home>/http_token` (made on first use)."""
    if settings.http_token:
        source = settings.sources.get("http_token", "")
        if source.startswith("env:"):
            variable = setting_env("http_token")
            where = f"the value of the {variable} variable"
            return Token(settings.http_token, where, where, f"${variable}")
        return Token(settings.http_token, "http_token in the hookline config file",
                     f"http_token in {settings.config_path}", "<http_token>")
    path = Path(settings.home) / TOKEN_FILE_NAME
    value = _read_or_create(path)
    return Token(value, f"in the file {TOKEN_FILE_NAME} in the hookline home ({HOME_ENV}, "
                        "default ~/.hookline); `hookline gateway` shows where at start",
                 f"in {path}", f"$(cat {shlex.quote(str(path))})")


def _read_or_create(path: Path) -> str:
    for _ in range(2):
        try:
            return _read_token_file(path)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):  # another process made it first
                return _create_token_file(path)
    return _read_token_file(path)


def _read_token_file(path: Path) -> str:
    try:  # a regular file only, never through a link, never blocking on a FIFO
        handle, info = open_regular_file(str(path))
    except FileNotFoundError:
        raise
    except HooklineError as exc:
        raise RuntimeError(f"the http token file {path} is not a regular file; remove "
                           f"it") from exc
    except OSError as exc:
        raise RuntimeError(f"cannot read the http token file {path}: {exc.strerror or exc}; "
                           f"remove it (a new token is made at the next start) or set "
                           f"{setting_env('http_token')}") from exc
    with handle:
        if info.st_mode & 0o077:
            raise RuntimeError(
                f"the http token file {path} can be read by other users (mode "
                f"{stat.S_IMODE(info.st_mode):04o}); run `chmod 600 {shlex.quote(str(path))}`, "
                f"or remove it to make a new token")
        if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            raise RuntimeError(f"the http token file {path} belongs to another user; remove "
                               f"it to make a new token")
        raw = handle.read(4096)
    value = raw.decode("ascii", "replace").strip()
    if len(value) < MIN_HTTP_TOKEN_LENGTH or any(not "!" <= c <= "~" for c in value):
        raise RuntimeError(f"the http token file {path} holds no valid token (at least "
                           f"{MIN_HTTP_TOKEN_LENGTH} printable characters); remove it to make "
                           f"a new one")
    return value


def _create_token_file(path: Path) -> str:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    value = secrets.token_urlsafe(32)  # 256 bits
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, value.encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return value


def is_loopback_address(address: str) -> bool:
    """Whether a bound IP address can only be reached from this machine."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def host_name(value: str) -> str:
    """The name part of a `Host` header value: no port, no brackets, lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


@dataclass(frozen=True)
class Guard:
    """The checks one running channel applies to every request."""

    token: Token | None
    """None when authentication is off (`http_auth = false`, loopback only)."""
    hosts: frozenset[str]
    origins: frozenset[str]

    @classmethod
    def build(cls, token: Token | None, bound: Iterable[str], extra_hosts: Iterable[str],
              origins: Iterable[str]) -> Guard:
        hosts = {host_name(name) for name in (*bound, *extra_hosts) if name}
        return cls(token, frozenset(LOCAL_HOSTS | hosts), frozenset(origins))

    def admit(self, headers: Mapping[str, list[str]]) -> str | None:
        """Check Host and Origin; the allowed origin of a browser request, else None."""
        given = headers.get("host", [])
        if len(given) != 1 or not given[0].strip():
            raise HttpError(400, "the request needs exactly one Host header")
        name = host_name(given[0])
        if name not in self.hosts:
            raise HttpError(403, f"the Host header names {name!r}, which is not among the "
                                 f"names this gateway answers to (the address it listens on, "
                                 f"localhost and http_allowed_hosts): add it to "
                                 f"http_allowed_hosts if clients really use that name")
        origins = headers.get("origin")
        origin = origins[0] if origins else None
        fetch_site = (headers.get("sec-fetch-site") or ["none"])[0].strip().lower()
        if origin is not None and origin.strip().lower().rstrip("/") in self.origins:
            return origin.strip()
        if origin is not None or fetch_site not in ("none", "same-origin"):
            shown = f"origin {origin.strip()!r}" if origin is not None else "another site"
            raise HttpError(403, f"requests from web pages are refused ({shown} is not in "
                                 f"http_allowed_origins)")
        return None

    def check(self, headers: Mapping[str, list[str]], websocket: bool = False) -> str | None:
        """Every check but the token's and the content type's, in the module's order: the
        allowed origin of a browser request, else None. `websocket`: the server took the
        request for a WebSocket handshake, which is refused once the token is checked."""
        if "content-length" in headers and "transfer-encoding" in headers:
            raise HttpError(400, "the request has both Content-Length and Transfer-Encoding "
                                 "headers, so its body could be read two ways; send only "
                                 "one", [(b"connection", b"close")])
        origin = self.admit(headers)
        wanted = [name for value in headers.get("upgrade", ()) for name in value.split(",")
                  if name.strip() and name.strip().lower() != "h2c"]
        if websocket or wanted:
            self.authenticate(headers)
            shown = ", ".join(name.strip() for name in wanted) or "websocket"
            raise HttpError(400, f"the gateway does not switch protocols (Upgrade: {_clip(shown)}"
                                 f"); it answers plain HTTP requests: POST /v1/messages with "
                                 f"\"stream\": true streams a reply as Server-Sent Events")
        return origin

    def authenticate(self, headers: Mapping[str, list[str]]) -> None:
        if self.token is None:
            return
        given = headers.get("authorization", [])
        scheme, _, credential = (given[0] if len(given) == 1 else "").strip().partition(" ")
        if scheme.lower() != "bearer" or not credential.strip():
            problem = "missing bearer token"
        elif not self.token.matches(credential.strip()):
            problem = "wrong bearer token"
        else:
            return
        raise HttpError(401, f"{problem}: send the header 'Authorization: Bearer <token>'; "
                             f"the token is {self.token.where}",
                        [(b"www-authenticate", b'Bearer realm="hookline"')])

    @staticmethod
    def require_json(headers: Mapping[str, list[str]]) -> None:
        given = headers.get("content-type", [])
        kind = given[0].split(";", 1)[0].strip().lower() if len(given) == 1 else ""
        if kind != "application/json":
            shown = f"got {given[0]!r}" if given else "none was given"
            raise HttpError(415, f"the body must be JSON sent with 'Content-Type: "
                                 f"application/json' ({shown})")

    @staticmethod
    def cors_headers(origin: str | None, preflight: bool = False) -> list[tuple[bytes, bytes]]:
        """Headers that let an allowed origin's page read the answer (and its preflight)."""
        if origin is None:
            return []
        headers = [(b"access-control-allow-origin", origin.encode("latin-1", "replace")),
                   (b"vary", b"Origin")]
        if preflight:
            return [*headers, (b"access-control-allow-methods", _CORS_METHODS),
                    (b"access-control-allow-headers", _CORS_HEADERS),
                    (b"access-control-max-age", b"600")]
        return [*headers, (b"access-control-expose-headers", _CORS_EXPOSED)]


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def header_map(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, list[str]]:
    """ASGI headers as lower-case names to every value given (latin-1, as HTTP says)."""
    headers: dict[str, list[str]] = {}
    for name, value in raw:
        headers.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return headers
