"""Builtin channels and the channel manager that runs them: the terminal channel
(`cli/`), the http channel of the gateway (`http/`), debouncing and attachments, and the
protocols the command line asks of channels (`protocols.py`; docs/channels.md).

Names are imported on first use: `hookline run` never loads the http channel."""

from __future__ import annotations

from hookline.kernel._lazy import LazyExports as _LazyExports

_PUBLIC = {
    "manager": ("DEFAULT_SHUTDOWN_TIMEOUT", "ChannelManager"),
    "debounce": ("DebounceBuffer", "merge_messages"),
    "attachments": ("IMAGE_TYPES", "attached_text", "prompt_media"),
    "cli.channel": ("CliChannel",),
    "cli.input": ("ChatCommand",),
    "http.channel": ("HttpChannel",),
    "protocols": ("ChatChannel", "ListenerChannel"),
}
"""Module (relative to this package) -> the public names it defines."""

_exports = _LazyExports(globals(), _PUBLIC)
__getattr__ = _exports.getattr
__dir__ = _exports.dir
