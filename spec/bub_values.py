"""Bub's own values for the fixtures, built the same way by both adapters.

A plugin of the ``bub`` entry point group answers with Bub's types, registers its tools in
Bub's process-wide ``bub.tools.REGISTRY`` and logs through loguru; a Bub channel hands
over Bub ``MediaItem`` attachments. Both adapters build those values here, so the
reference and hookline's Bub compatibility layer get the very same objects: the Bub
adapter for the tags below, the hookline adapter for any tag given ``group = "bub"``.

Bub is imported only when a value is built (hookline's own environment may not have it).
Tools registered here stay in Bub's registry until ``forget_registered()``, which each
adapter calls when it makes the next fixture's kernel or framework: the registry is
process-wide, so one fixture's tools must not reach the next.
"""

from __future__ import annotations

from typing import Any

TAGS = frozenset({"tool_decision", "llm_finish", "admit", "model_options", "channel",
                  "registered_tool", "attachment"})
"""The tags built here."""

_REGISTERED: list[tuple[str, Any]] = []
"""The tools ``registered_tool`` put into Bub's registry, until ``forget_registered()``."""


def make(tag: str, data: dict[str, Any]) -> Any:
    """A Bub value for one fixture tag (``data["value"]`` is the tag's value)."""
    value = data["value"]
    if tag == "tool_decision":
        from bub.core.events import ToolCallDecision

        options = {k: v for k, v in data.items() if k not in ("value", "group")}
        return ToolCallDecision(value, **options)
    if tag == "llm_finish":
        from bub.core.events import LLMCallDecision

        return LLMCallDecision.finish(value)
    if tag == "admit":
        from bub.channels.admission import AdmitDecision

        return AdmitDecision(value, data.get("reason"))
    if tag == "model_options":
        from bub.model_selection import ModelChoice, ModelOptions

        return ModelOptions(models=[ModelChoice(m) for m in value.get("models", [])],
                            current_model=value.get("current_model"))
    if tag == "channel":
        return _spec_channel_class()(value, data.get("tag", ""), data.get("on_start"))
    if tag == "registered_tool":
        return _registered_tool(value, data)
    if tag == "attachment":
        return _attachment(value, data)
    raise ValueError(f"no Bub value for ${tag}")


_SPEC_CHANNEL: list[type] = []
"""The fixture channel class on Bub's ``Channel``, made once."""


def _spec_channel_class() -> type:
    from bub.channels.base import Channel

    from .hookline_adapter import _channel_class  # kernel-neutral: imports nothing

    if not _SPEC_CHANNEL:
        _SPEC_CHANNEL.append(_channel_class(Channel))
    return _SPEC_CHANNEL[0]


def _registered_tool(name: str, data: dict[str, Any]) -> Any:
    """``{ "$registered_tool" = "name", exposure, deferred, agent_use, tag }``: a tool
    registered as a Bub plugin registers one, ``@bub.tool(name=..., ...)`` on a handler
    that returns the name. ``bub.tool`` is looked up now, so a keyword the installed Bub
    lacks (``agent_use``) fails as it does for a real plugin, unless something (hookline's
    layer) added it."""
    import bub

    options = {key: data[key] for key in ("exposure", "deferred", "agent_use") if key in data}

    def handler() -> str:
        return name

    made = bub.tool(name=name, description=data.get("tag", ""), **options)(handler)
    _REGISTERED.append((made.name, made))
    return made


def _attachment(mime_type: str, data: dict[str, Any]) -> Any:
    """``{ "$attachment" = "image/png", data = "hi", filename = "a.png" }``: a Bub
    ``MediaItem`` as channels such as bub-feishu hand them over: no URL, its bytes (the
    UTF-8 of ``data``) fetched on demand through ``data_fetcher``."""
    from bub.channels.message import MediaItem

    payload = str(data.get("data", "")).encode("utf-8")

    async def fetch() -> bytes:
        return payload

    return MediaItem(type=mime_type.partition("/")[0], mime_type=mime_type,
                     filename=data.get("filename"), data_fetcher=fetch)


def forget_registered() -> None:
    """Take the tools ``registered_tool`` registered out of Bub's registry again (those
    still there under their name)."""
    if not _REGISTERED:
        return
    from bub.core.tools import REGISTRY

    for name, tool in _REGISTERED:
        if REGISTRY.get(name) is tool:
            del REGISTRY[name]
    _REGISTERED.clear()


def log(level: str, message: str) -> None:
    """Log as a Bub plugin does: through loguru (from this module, not from Bub's)."""
    from loguru import logger

    logger.log(level, message)
