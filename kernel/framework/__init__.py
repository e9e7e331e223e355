"""The framework layer: `Framework`, the `running()` scope, the turn pipeline, the agent hooks
adapter, the environment cache, plugin loading and the model stage (docs/architecture.md)."""
