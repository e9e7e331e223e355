"""Which channels a channel manager runs: the `provide_channels` selection rules (`all`,
`!name`, explicit names; `Interface` channels only when named, `Lifecycle` channels beside
an explicit non-`Lifecycle` one)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from hookline.kernel.channels import Channel, Interface, Lifecycle

__all__ = ["select_channels"]

logger = logging.getLogger(__name__)


def select_channels(channels: Mapping[str, Channel],
                    names: str | Iterable[str] = "all") -> dict[str, Channel]:
    """The channels of `channels` (by name) to run for a selection (the
    `provide_channels` rules).

    `names` is a comma-separated list (or an iterable of names). `all` selects every
    enabled channel that is not an `Interface`; `!name` excludes a channel; explicit
    names select those channels, and when one of them is not a `Lifecycle` channel,
    every enabled `Lifecycle` channel is added too (unless excluded). Interface
    channels (the CLI) run only when named. Channels whose `enabled` is false never
    run; unknown names are logged and ignored. An empty selection, or one made only
    of exclusions, means `all`.
    """
    raw = names.split(",") if isinstance(names, str) else list(names)
    tokens = [str(token).strip() for token in raw if str(token).strip()]
    excluded = {token[1:].strip() for token in tokens if token.startswith("!")}
    wanted = [token for token in tokens if not token.startswith("!")]
    explicit = [token for token in wanted if token != "all"]
    usable = {name: channel for name, channel in channels.items()
              if channel.enabled and name not in excluded}
    selected: dict[str, Channel] = {}
    if "all" in wanted or not wanted:
        selected.update((name, channel) for name, channel in usable.items()
                        if not isinstance(channel, Interface))
    for name in explicit:
        if name in usable:
            selected[name] = usable[name]
        elif name not in channels:
            logger.warning("channel.unknown name=%s known=%s", name,
                           ",".join(channels) or "(none)")
        elif name not in excluded:
            logger.warning("channel.disabled name=%s", name)
    if any(not isinstance(usable[name], Lifecycle) for name in explicit if name in usable):
        for name, channel in usable.items():
            if isinstance(channel, Lifecycle):
                selected.setdefault(name, channel)
    return selected
