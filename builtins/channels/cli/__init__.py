"""The terminal channel: the line editor, piped input and the channel that prints events."""
