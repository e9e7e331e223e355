"""The tool lists of MCP servers, kept in the hookline home between processes.

A turn offers a server's tools before the server is up only if it knows them: each list
the live server gives is stored here (one private file per server, named by a digest of
what decides which program answers: command, args, the names of env, url), and read by
the next process. Reading needs neither the MCP SDK nor pydantic, so a turn that never
calls the server's tools does not pay for them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..privacy.files import write_private_file
from .config import ServerConfig

if TYPE_CHECKING:
    from mcp_types import Tool

__all__ = ["CACHE_FOLDER", "ListedTool", "ToolCache", "listed_tool"]

logger = logging.getLogger(__name__)

CACHE_FOLDER = "mcp-tools"
"""The folder of the hookline home that holds the lists."""
FAILED_FOR = 600.0
"""Seconds a server that could not start, and never listed its tools, is not waited for
again: the next processes start it in the background instead of holding their turn."""


@dataclass(frozen=True)
class ListedTool:
    """What hookline keeps of one tool a server lists: enough to offer it."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


def listed_tool(tool: Tool) -> ListedTool:
    """An SDK tool as hookline keeps it."""
    return ListedTool(tool.name, tool.description or tool.title or "", dict(tool.input_schema))


class ToolCache:
    """One JSON file per server under `folder`; a missing or unreadable file is no list."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, config: ServerConfig) -> Path:
        identity = {"command": config.command, "args": list(config.args),
                    "env": sorted(config.env), "url": config.url}
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
        return self.folder / f"{digest[:32]}.json"

    def load(self, config: ServerConfig) -> list[ListedTool] | None:
        """The list last stored for this server, or None. Blocking: call it from a thread."""
        path = self.path(config)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and "failed_at" in data:  # no list: `mark_failed`
                return None
            return [_read(item) for item in data["tools"]]
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.debug("mcp.cache_unreadable server=%s path=%s error=%s", config.name, path,
                         exc)
            return None

    def forget(self, config: ServerConfig) -> None:
        """Delete what is kept of the server (`mcp remove`): its tools, its failure."""
        with contextlib.suppress(OSError):
            self.path(config).unlink()

    def failed_lately(self, config: ServerConfig) -> bool:
        """Whether the server failed to start within `FAILED_FOR` seconds, in this process
        or an earlier one, and has listed no tools since. Blocking."""
        try:
            data = json.loads(self.path(config).read_text(encoding="utf-8"))
            return 0 <= time.time() - float(data["failed_at"]) < FAILED_FOR
        except (OSError, ValueError, KeyError, TypeError):
            return False

    def mark_failed(self, config: ServerConfig) -> None:
        """Remember that the server, which has no list kept, could not start. Blocking."""
        with contextlib.suppress(OSError):  # then the next process waits for it again
            write_private_file(self.path(config), json.dumps({"failed_at": time.time()}),
                               durable=False)

    def store(self, config: ServerConfig, tools: list[ListedTool]) -> None:
        """Replace the server's list (mode 0600 in a 0700 folder). Blocking."""
        data = {"tools": [{"name": tool.name, "description": tool.description,
                           "input_schema": dict(tool.input_schema)} for tool in tools]}
        try:
            write_private_file(self.path(config), json.dumps(data, ensure_ascii=False),
                               durable=False)
        except OSError as exc:  # the list is only a head start: the turn goes on without it
            logger.warning("MCP server %r: its tool list could not be kept in %s (%s); the "
                           "next process waits for the server to list its tools",
                           config.name, self.folder, exc.strerror or exc)


def _read(item: Any) -> ListedTool:
    tool = ListedTool(item["name"], item["description"], item["input_schema"])
    if not (isinstance(tool.name, str) and isinstance(tool.description, str)
            and isinstance(tool.input_schema, dict)):
        raise ValueError(f"not a tool: {item!r:.80}")
    return tool
