"""How long and how much the `http` channel allows: the reply and body timeouts, how long
an approval question waits, what a message for a busy session does, the largest body.
Each left as None is read from the settings when the channel starts; before that, the
setting's default applies (`Settings` holds the defaults, once)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...config import Settings
from .payload import MAX_BODY_SIZE

__all__ = ["Limits"]


@dataclass
class Limits:
    """The limits of one `HttpChannel`."""

    reply_timeout: float | None = None
    """Seconds a request waits for its reply (`http_timeout`)."""
    body_timeout: float | None = None
    """Seconds a request body may take to arrive (`http_body_timeout`)."""
    approval_timeout: float | None = None
    """Seconds a question waits for its answer (`http_approval_timeout`)."""
    busy_session: str | None = None
    """What a message for a session with a running turn does: `follow_up` (the default),
    `process`, `steer` or `drop` (`http_busy_session`)."""
    max_body_size: int = MAX_BODY_SIZE

    def read(self, settings: Any) -> None:
        """The channel starts: what is still None is read from `settings`."""
        if self.reply_timeout is None:
            self.reply_timeout = float(settings.http_timeout)
        if self.body_timeout is None:
            self.body_timeout = float(settings.http_body_timeout)
        if self.busy_session is None:
            self.busy_session = settings.http_busy_session
        if self.approval_timeout is None:
            self.approval_timeout = float(settings.http_approval_timeout)

    @property
    def reply_seconds(self) -> float:
        """How long a request waits for its reply."""
        return self.reply_timeout if self.reply_timeout is not None else Settings.http_timeout

    @property
    def body_seconds(self) -> float:
        """How long a request body may take to arrive."""
        return self.body_timeout if self.body_timeout is not None else Settings.http_body_timeout

    @property
    def approval_seconds(self) -> float:
        """How long a question waits for its answer."""
        return (self.approval_timeout if self.approval_timeout is not None
                else Settings.http_approval_timeout)

    @property
    def busy_action(self) -> str:
        """What a message for a session with a running turn does."""
        return self.busy_session or Settings.http_busy_session
