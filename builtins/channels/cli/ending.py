"""When the `cli` channel's session ends: the stop event it was started with, whether it
stopped reading, whether its input ended (it then leaves once the lines already sent are
answered), and whether it asked to quit."""

from __future__ import annotations

from hookline.kernel.channels import StopEvent

__all__ = ["Ending"]


class Ending:
    """The ending state of one `CliChannel` (closed until it starts)."""

    def __init__(self) -> None:
        self.stop_event: StopEvent | None = None
        self.closed = True
        self.input_ended = False
        self.quit_requested = False

    def begin(self, stop_event: StopEvent) -> None:
        """The channel starts reading: nothing has ended yet."""
        self.stop_event = stop_event
        self.closed = self.input_ended = self.quit_requested = False

    def stopped(self) -> bool:
        """The channel stopped reading, or the session's stop event is set."""
        return self.closed or (self.stop_event is not None and self.stop_event.is_set())

    def ending(self) -> bool:
        """The session is ending (stopped, or leaving once the lines sent are answered):
        lines without an answer are reported by the channel's `stop`."""
        return self.input_ended or self.stopped()

    def quit(self) -> None:
        """End the session: set the stop event the channel was started with."""
        self.quit_requested = True
        self.closed = True
        setter = getattr(self.stop_event, "set", None)
        if callable(setter):
            setter()
