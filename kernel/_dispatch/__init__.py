"""The dispatch core: markers, registry, plans, runtime, tracing and reports."""
