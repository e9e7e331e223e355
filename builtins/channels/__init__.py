"""Builtin channels and the channel manager that runs them (contract 2.18, 2.20, 2.22)."""

from __future__ import annotations

from .cli.channel import CliChannel
from .manager import ChannelManager

__all__ = ["ChannelManager", "CliChannel"]
