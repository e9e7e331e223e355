"""A running channel manager for the channel tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from hookline.builtins.channels import ChannelManager
from hookline.kernel.channels import Channel
from hookline.kernel.framework.core import Framework


@asynccontextmanager
async def serving(framework: Framework, channels: dict[str, Channel] | None = None,
                  **options: Any) -> AsyncIterator[ChannelManager]:
    """A manager running inside the framework's `running()`; stopped gracefully at the end."""
    manager = ChannelManager(framework, channels, **options)
    stop = anyio.Event()
    async with framework.running(), anyio.create_task_group() as task_group:
        await task_group.start(manager.run, stop)
        yield manager
        stop.set()
