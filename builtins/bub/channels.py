"""Bub channels as hookline channels, so they are selected and started exactly as Bub does.

hookline's channel manager chooses what runs by hookline's base classes: an ``Interface``
runs only when named, a ``Lifecycle`` runs unless excluded and joins any explicit
selection that names a channel that is not one. A Bub channel derives from Bub's own
``Interface`` / ``Lifecycle`` (``bub.channels.base``), which hookline's manager cannot
see; ``adapt_channel`` wraps it in the hookline class of the same kind, found by
``isinstance`` against Bub's classes, and the wrapper hands every call to the Bub channel:
``start`` / ``stop``, ``send`` with a Bub ``ChannelMessage`` (built as Bub's manager builds
it), ``stream_events``, ``admit_message`` with Bub's snapshot and decision types, and the
``needs_debounce`` / ``enabled`` properties.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any

from hookline.kernel.channels import (
    AdmitDecision,
    Channel,
    Interface,
    Lifecycle,
    StopEvent,
    TurnSnapshot,
)
from hookline.kernel.streaming import AsyncStreamEvents, StreamEvent

from .convert import admit_decision, bub_message, bub_snapshot

__all__ = ["BubChannel", "BubInterface", "BubLifecycle", "adapt_channel", "unwrap_channel"]


class BubChannel(Channel):
    """A Bub channel that is neither an ``Interface`` nor a ``Lifecycle``."""

    def __init__(self, channel: Any) -> None:
        self.bub = channel
        """The Bub channel itself."""
        self.name = str(channel.name)  # type: ignore[misc]  # per instance: Bub's own name

    @property
    def needs_debounce(self) -> bool:  # type: ignore[override]
        return bool(self.bub.needs_debounce)

    @property
    def enabled(self) -> bool:  # type: ignore[override]
        return bool(self.bub.enabled)

    async def start(self, stop_event: StopEvent) -> None:
        await self.bub.start(stop_event)

    async def stop(self) -> None:
        await self.bub.stop()

    async def send(self, message: Any) -> None:
        await self.bub.send(bub_message(message, self.name))

    def stream_events(self, message: Any, stream: AsyncStreamEvents
                      ) -> AsyncIterable[StreamEvent]:
        wrapped: AsyncIterable[StreamEvent] = self.bub.stream_events(message, stream)
        return wrapped

    async def admit_message(self, session_id: str, message: Any, turn: TurnSnapshot
                            ) -> AdmitDecision | None:
        decision = await self.bub.admit_message(session_id=session_id, message=message,
                                                turn=bub_snapshot(turn))
        converted: AdmitDecision | None = admit_decision(decision)
        return converted

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} of {self.bub!r}>"


class BubInterface(BubChannel, Interface):
    """A Bub ``Interface``: runs only when named."""


class BubLifecycle(BubChannel, Lifecycle):
    """A Bub ``Lifecycle``: runs unless excluded, and beside any named channel."""


def adapt_channel(channel: Any) -> Any:
    """The hookline channel for a Bub channel (by Bub's own base classes); a channel
    that is not a Bub channel is returned unchanged."""
    from bub.channels.base import Channel as BubBase
    from bub.channels.base import Interface as BubInterfaceBase
    from bub.channels.base import Lifecycle as BubLifecycleBase

    if not isinstance(channel, BubBase):
        return channel
    if isinstance(channel, BubInterfaceBase):
        return BubInterface(channel)
    if isinstance(channel, BubLifecycleBase):
        return BubLifecycle(channel)
    return BubChannel(channel)


def unwrap_channel(channel: Any) -> Any:
    """The Bub channel behind an adapter (what a Bub plugin expects to see)."""
    return channel.bub if isinstance(channel, BubChannel) else channel
