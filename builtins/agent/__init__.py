"""The agent loop: model steps, tool calls and interception as one event stream, with the
spill sidecar, the steering inbox and the notes on how tool calls ran (docs/builtins.md)."""
