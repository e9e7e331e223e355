"""Session tapes: the Tape API, the fork store of a run, context building for the model,
archives, the tape tools, and sessions as the user sees them (docs/builtins.md)."""
