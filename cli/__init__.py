"""hookline.cli: the command-line application (built in a later issue)."""
