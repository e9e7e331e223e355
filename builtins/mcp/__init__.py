"""MCP servers as tool providers of the builtin plugin (docs/mcp.md).

`config` reads the `[mcp_servers.NAME]` tables and needs nothing else; the rest (`manager`,
`connection`, `cache`, `stdio`, `http`, `tools`) is imported only when a server is
configured, and loads the optional MCP SDK (`pip install 'hookline[mcp]'`) only when a
session with a server opens.
"""

from .cache import CACHE_FOLDER, ToolCache
from .config import (
    CONFIG_TABLE,
    NAME_SEPARATOR,
    ServerConfig,
    parse_server,
    server_configs,
    server_table,
)

__all__ = ["CACHE_FOLDER", "CONFIG_TABLE", "NAME_SEPARATOR", "ServerConfig", "ToolCache",
           "parse_server", "server_configs", "server_table"]
