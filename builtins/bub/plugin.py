"""The layer's own plugin, ``bub``: what no single Bub plugin owns.

Registered (under the name ``bub``, group ``bub``) before the Bub plugins whenever the
``bub`` group has entry points. It gives the model the tools plugins wrote into the
builtin agent's tool table (bub-mcp's server tools), first in priority, as Bub's agent
prefers them; it gives tools that appeared in ``bub.tools.REGISTRY`` after loading
without a plugin to own them; and it resolves Bub ``MediaItem`` data fetchers of the
inbound message before the prompt is built, as Bub's builtin ``build_prompt`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hookline.kernel import hookimpl

from .convert import resolve_media

if TYPE_CHECKING:
    from hookline.kernel.tools import Tool

__all__ = ["BubCompatPlugin"]


class BubCompatPlugin:
    """The glue between Bub plugins and hookline's builtin."""

    def __init__(self, group: Any) -> None:
        """``group``: the ``group.BubGroup`` (not imported: it imports this module)."""
        self.group = group

    def __repr__(self) -> str:
        return "<hookline Bub compatibility plugin>"

    @hookimpl(specname="provide_tools", tryfirst=True)
    def agent_tools(self) -> list[Tool]:
        """Tools written into the builtin agent's table: they cover any of that name."""
        return self.group.agent_tools.model_tools()

    @hookimpl(specname="provide_tools")
    def unowned_tools(self) -> list[Tool]:
        """Tools registered with ``@bub.tool`` after loading, with no plugin to own them."""
        return self.group.unowned_tools()

    @hookimpl
    async def load_state(self, message: Any) -> None:
        """Resolve Bub media attachments into prompt media (data URLs)."""
        await resolve_media(message)
