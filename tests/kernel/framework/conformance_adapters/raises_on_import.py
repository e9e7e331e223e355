"""An adapter file that fails as it is imported."""

raise ValueError("broken at import")
